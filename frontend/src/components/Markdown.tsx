import { memo, useMemo, type ReactElement, type ReactNode } from "react";
import type { Claim } from "../api/types";
import { claimRanges, rehypeClaims } from "./claimMarks";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";

const components: Components = {
  // Links leave the chat in a new tab, and the new page gets no handle on this one.
  // react-markdown's default urlTransform has already emptied any href whose scheme
  // is not http(s), mailto, irc(s) or xmpp (javascript:, data:, vbscript:...); such a
  // link is shown as its text, since an empty href would only reopen this page.
  a: ({ node: _node, href, children, ...props }) =>
    href ? (
      <a {...props} href={href} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    ) : (
      <span className="md-link-removed">{children}</span>
    ),
  // The answer is written from untrusted text: guests' names and notes, tool output,
  // whatever a prompt-injected model was told to say. An <img> would be fetched by
  // every browser that shows the answer, without a click, so a URL in it could leak
  // what the model put there (or just that staff looked). No image is ever loaded:
  // it is shown as its alt text, with the address only in a tooltip. Inline and
  // reference-style images both arrive here; raw <img> HTML is dropped by skipHtml.
  img: ({ alt, src }) => (
    <span
      className="md-image"
      data-testid="markdown-image"
      title={typeof src === "string" && src ? `Image not loaded: ${src}` : "Image not loaded"}
    >
      {alt || "image"}
    </span>
  ),
  // Wide tables scroll on their own instead of widening the page on a phone.
  table: ({ node: _node, ...props }) => (
    <div className="table-scroll">
      <table {...props} />
    </div>
  ),
};

/** The answer's checked claims and the tool cards they point to. */
export interface MarkedClaims {
  claims: Claim[];
  /** UTF-16 index in the text where the claims' offsets start. */
  base: number;
  /** Each tool call's card title, by id, for a supported claim's tooltip. */
  titles: Record<string, string>;
}

/** A claim as shown: a link to the card of the call that returned it, or marked. */
function ClaimMark({ claim, title, children }: { claim: Claim; title?: string; children: ReactNode }): ReactElement {
  if (claim.status === "supported" && claim.tool_call_id) {
    const id = claim.tool_call_id;
    return (
      <a
        className="claim claim-supported"
        href={`#tool-${id}`}
        title={`From ${title ?? "a tool result"}`}
        data-testid="claim"
        data-status="supported"
        data-tool-call={id}
        onClick={(event) => {
          const card = document.getElementById(`tool-${id}`);
          if (!card) return;
          event.preventDefault();
          card.scrollIntoView({ block: "nearest" });
          card.classList.add("tool-card-source");
          setTimeout(() => card.classList.remove("tool-card-source"), 1500);
        }}
      >
        {children}
      </a>
    );
  }
  return (
    <mark
      className="claim claim-unsupported"
      title="No tool result states this"
      aria-label={`${claim.text} (no tool result states this)`}
      tabIndex={0}
      data-testid="claim"
      data-status="unsupported"
    >
      {children}
    </mark>
  );
}

/**
 * The model's markdown, GFM included; raw HTML in it is dropped, never rendered, and
 * images are never loaded (see `img` above). With `marked`, the answer's checked
 * claims are shown where they stand.
 */
export const Markdown = memo(function Markdown({ text, marked }: { text: string; marked?: MarkedClaims }): ReactElement {
  const { plugins, shown } = useMemo(() => {
    if (!marked || marked.claims.length === 0) return { plugins: [], shown: components };
    const ranges = claimRanges(text, marked.base, marked.claims);
    const withClaims: Components = {
      ...components,
      mark: ({ node: _node, children, ...props }) => {
        const index = Number((props as Record<string, unknown>)["data-claim"]);
        const claim = marked.claims[index];
        if (!claim) return <>{children}</>;
        return (
          <ClaimMark claim={claim} title={claim.tool_call_id ? marked.titles[claim.tool_call_id] : undefined}>
            {children}
          </ClaimMark>
        );
      },
    };
    return { plugins: [rehypeClaims(text, ranges)], shown: withClaims };
  }, [text, marked]);
  return (
    <ReactMarkdown remarkPlugins={[remarkGfm]} rehypePlugins={plugins} skipHtml components={shown}>
      {text}
    </ReactMarkdown>
  );
});
