import { memo, type ReactElement } from "react";
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

/**
 * The model's markdown, GFM included; raw HTML in it is dropped, never rendered, and
 * images are never loaded (see `img` above).
 */
export const Markdown = memo(function Markdown({ text }: { text: string }): ReactElement {
  return (
    <ReactMarkdown remarkPlugins={[remarkGfm]} skipHtml components={components}>
      {text}
    </ReactMarkdown>
  );
});
