import { useEffect, useRef, type ReactElement } from "react";
import type { InputAction } from "../api/types";
import type { InputRequest } from "../chat/answer";
import { formatMinutesSeconds, useSecondsLeft } from "../hooks/useSecondsLeft";
import { ConnectAccountCard } from "./ConnectAccountCard";
import { InputForm } from "./InputForm";
import { InputLink } from "./InputLink";

const FOCUSABLE = "input:not([disabled]), select:not([disabled]), button:not([disabled])";

interface InputCardProps {
  title: string;
  input: InputRequest;
  onAnswer: (action: InputAction, content?: Record<string, unknown>) => void;
  /** Off where the request comes unasked-for beside the chat (a background task's): the person may be typing. */
  takeFocus?: boolean;
}

/** A tool's request for input; the gateway's own request to connect an account has a card of its own. */
export function InputCard(props: InputCardProps): ReactElement {
  const { input, onAnswer, takeFocus } = props;
  if (input.mode === "url" && input.connect) {
    return (
      <ConnectAccountCard
        card={input.connect}
        input={input}
        takeFocus={takeFocus}
        onAnswer={(action) => onAnswer(action)}
      />
    );
  }
  return <RequestCard {...props} />;
}

/**
 * A tool asks the person something mid-call: its message, the time left to answer, and
 * a form (or a link to visit). The message is the MCP server's text, shown as text.
 */
function RequestCard({
  title,
  input,
  onAnswer,
  takeFocus = true,
}: InputCardProps): ReactElement {
  const card = useRef<HTMLElement>(null);
  const left = useSecondsLeft(input.expiresAt);
  const expired = left === 0;
  const busy = input.state === "sending";

  // The request appears: the person's attention goes to it (the announcer says why).
  // A field the form itself chose (one the server named) keeps it.
  useEffect(() => {
    const el = card.current;
    if (takeFocus && el && !el.contains(document.activeElement)) el.querySelector<HTMLElement>(FOCUSABLE)?.focus();
  }, [takeFocus]);

  return (
    <section
      ref={card}
      className="input-card"
      data-testid="input-card"
      data-mode={input.mode}
      data-state={input.state}
      aria-label={`Input needed: ${title}`}
    >
      <p className="input-message" data-testid="input-message">
        {input.message}
      </p>
      {left !== null && (
        <p className="input-expiry" data-testid="input-expiry">
          {expired ? "The time to answer is up." : `Closes in ${formatMinutesSeconds(left)}.`}
        </p>
      )}
      {input.problem && (
        <p className="form-problem" role="alert" data-testid="input-problem">
          {input.problem}
        </p>
      )}
      {input.mode === "url" ? (
        <InputLink url={input.url} expired={expired} busy={busy} onAnswer={(action) => onAnswer(action)} />
      ) : (
        <InputForm input={input} expired={expired} onAnswer={onAnswer} />
      )}
    </section>
  );
}
