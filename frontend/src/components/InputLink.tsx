import { useEffect, useRef, useState, type ReactElement } from "react";
import type { InputAction } from "../api/types";

/** A link the page may offer: http(s) only, with the host the person is about to visit. */
export function offerableLink(url: string | undefined): { href: string; host: string } | null {
  if (!url) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return null;
  // `host` is in punycode, so a look-alike name shows as what it is.
  return { href: parsed.href, host: parsed.host };
}

/**
 * A request to visit a URL (an MCP server's sign-in or payment page, say). Nothing is
 * opened until the person says so, and then in a new tab that cannot reach back to this
 * one; afterwards they say whether they are done.
 */
export function InputLink({
  url,
  expired,
  busy,
  onAnswer,
}: {
  url: string | undefined;
  expired: boolean;
  busy: boolean;
  onAnswer: (action: InputAction) => void;
}): ReactElement {
  const link = offerableLink(url);
  const [opened, setOpened] = useState(false);
  const done = useRef<HTMLButtonElement>(null);
  const disabled = busy || expired;

  // The button pressed has gone: its successor takes the focus.
  useEffect(() => {
    if (opened) done.current?.focus();
  }, [opened]);

  const decline = (
    <>
      <button type="button" className="button" data-testid="input-decline" disabled={disabled} onClick={() => onAnswer("decline")}>
        Decline
      </button>
      <button type="button" className="button" data-testid="input-cancel" disabled={disabled} onClick={() => onAnswer("cancel")}>
        Cancel
      </button>
    </>
  );

  if (!link) {
    return (
      <div className="input-link" data-testid="input-link" data-step="refused">
        <p className="form-note" data-testid="input-link-refused">
          This request asks you to open something that is not a web page, so it is not offered here.
        </p>
        <div className="input-buttons">{decline}</div>
      </div>
    );
  }

  return (
    <div
      className="input-link"
      data-testid="input-link"
      data-step={opened ? "opened" : "confirm"}
      onKeyDown={(e) => {
        if (e.key === "Escape" && !busy) {
          e.preventDefault();
          onAnswer("cancel");
        }
      }}
    >
      <p className="input-link-question">
        {opened ? "Finished on " : "Open "}
        <strong data-testid="input-link-host">{link.host}</strong>?
      </p>
      <p className="input-link-url" data-testid="input-link-url">
        {link.href}
      </p>
      <div className="input-buttons">
        {opened ? (
          <button
            ref={done}
            type="button"
            className="button primary"
            data-testid="input-done"
            disabled={disabled}
            onClick={() => onAnswer("accept")}
          >
            I’m done
          </button>
        ) : (
          <button
            type="button"
            className="button primary"
            data-testid="input-open"
            disabled={disabled}
            onClick={() => {
              window.open(link.href, "_blank", "noopener,noreferrer");
              setOpened(true);
            }}
          >
            Open {link.host}
          </button>
        )}
        {decline}
      </div>
    </div>
  );
}
