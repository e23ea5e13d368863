import { forwardRef, useState, type FormEvent, type KeyboardEvent, type ReactElement } from "react";
import { SendIcon, StopIcon } from "./icons";

export const Composer = forwardRef<
  HTMLTextAreaElement,
  { streaming: boolean; onAsk: (question: string) => void; onStop: () => void }
>(function Composer({ streaming, onAsk, onStop }, ref): ReactElement {
  const [text, setText] = useState("");
  const canSend = text.trim() !== "" && !streaming;

  const send = (): void => {
    if (!canSend) return;
    onAsk(text.trim());
    setText("");
  };

  const onSubmit = (e: FormEvent): void => {
    e.preventDefault();
    send();
  };

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>): void => {
    // Not while an input method is composing: its Enter picks a candidate.
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      send();
    }
  };

  return (
    <form className="composer" onSubmit={onSubmit}>
      <label htmlFor="question" className="sr-only">
        Your question
      </label>
      <textarea
        id="question"
        ref={ref}
        data-testid="question-input"
        rows={1}
        placeholder="Ask about bookings, tables, guests…"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
        aria-describedby="composer-hint"
      />
      <span id="composer-hint" className="sr-only">
        Enter sends, Shift+Enter starts a new line.
      </span>
      {streaming ? (
        <button type="button" className="button stop" data-testid="stop-button" onClick={onStop}>
          <StopIcon />
          <span>Stop</span>
        </button>
      ) : (
        <button type="submit" className="button primary send" data-testid="send-button" disabled={!canSend}>
          <SendIcon />
          <span>Send</span>
        </button>
      )}
    </form>
  );
});
