import { useEffect, useId, useRef, useState, type ReactElement } from "react";
import type { ConnectCard, InputAction } from "../api/types";
import type { InputRequest } from "../chat/answer";
import { connectTitle, waitingWords } from "../chat/accounts";
import { formatMinutesSeconds, useSecondsLeft } from "../hooks/useSecondsLeft";
import { offerableLink } from "./InputLink";

function ReasonLine({ card }: { card: ConnectCard }): ReactElement | null {
  switch (card.reason) {
    case "reconnect":
      return <p className="connect-reason">Your sign-in at {card.server} has ended.</p>;
    case "more_access":
      return <p className="connect-reason">A tool needs access at {card.server} that you have not given yet.</p>;
    case "connect":
      return null;
  }
}

/**
 * The gateway asks the person to sign in at an MCP server with their own account. The
 * card says where they will sign in; Connect opens that page in a new tab, and the card
 * settles by itself when the sign-in comes back to the gateway, so there is no "done"
 * to press (a person's word that they signed in proves nothing).
 */
export function ConnectAccountCard({
  card,
  input,
  onAnswer,
  takeFocus = true,
}: {
  card: ConnectCard;
  input: InputRequest;
  onAnswer: (action: InputAction) => void;
  takeFocus?: boolean;
}): ReactElement {
  const section = useRef<HTMLElement>(null);
  const headingId = useId();
  const left = useSecondsLeft(input.expiresAt);
  const [opened, setOpened] = useState(false);
  const expired = left === 0;
  const disabled = input.state === "sending" || expired;
  const link = offerableLink(input.url);
  // Where the browser really goes, which the gateway's word should match.
  const host = link?.host ?? card.host;

  useEffect(() => {
    const el = section.current;
    if (takeFocus && el && !el.contains(document.activeElement)) el.querySelector<HTMLElement>("button:not([disabled])")?.focus();
  }, [takeFocus]);

  return (
    <section
      ref={section}
      className="input-card connect-card"
      data-testid="connect-card"
      data-reason={card.reason}
      data-server={card.server}
      data-state={opened && input.state === "open" ? "waiting" : input.state}
      aria-labelledby={headingId}
    >
      <h3 className="connect-title" id={headingId} data-testid="connect-title">
        {connectTitle(card)}
      </h3>
      <ReasonLine card={card} />
      <p className="connect-host">
        You will sign in at <strong data-testid="connect-host">{host}</strong>
      </p>
      <p className="input-message" data-testid="input-message">
        {input.message}
      </p>
      {left !== null && (
        <p className="input-expiry" data-testid="input-expiry">
          {expired ? "The time to sign in is up." : `Closes in ${formatMinutesSeconds(left)}.`}
        </p>
      )}
      {input.problem && (
        <p className="form-problem" role="alert" data-testid="input-problem">
          {input.problem}
        </p>
      )}
      {!link && (
        <p className="form-note" data-testid="connect-refused">
          The sign-in page is not a web page, so it is not offered here.
        </p>
      )}
      {opened && !expired && (
        <p className="connect-waiting" role="status" data-testid="connect-waiting">
          <span className="spinner" aria-hidden="true" />
          {waitingWords(host)}
        </p>
      )}
      <div className="input-buttons">
        {link && (
          <button
            type="button"
            className={`button${opened ? "" : " primary"}`}
            data-testid="connect-open"
            disabled={disabled}
            onClick={() => {
              window.open(link.href, "_blank", "noopener,noreferrer");
              setOpened(true);
            }}
          >
            {opened ? "Open the sign-in page again" : "Connect"}
          </button>
        )}
        <button
          type="button"
          className="button"
          data-testid="connect-not-now"
          disabled={disabled}
          onClick={() => onAnswer("decline")}
        >
          Not now
        </button>
      </div>
    </section>
  );
}
