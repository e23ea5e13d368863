import { useMemo, type ReactElement } from "react";
import { OFFLINE_MODEL, type InputAction } from "../api/types";
import type { Answer } from "../chat/answer";
import { Markdown } from "./Markdown";
import { ToolCard } from "./ToolCard";

export function UserMessage({ text, unsent }: { text: string; unsent?: boolean }): ReactElement {
  return (
    <article className={`message user${unsent ? " unsent" : ""}`} data-testid="message" data-role="user">
      <div className="bubble">{text}</div>
      {unsent && <p className="message-note">Not sent</p>}
    </article>
  );
}

const FINISH_NOTES: Partial<Record<NonNullable<Answer["finish"]>, string>> = {
  cancelled: "Stopped.",
  max_iterations: "Stopped after too many steps without a final answer.",
};

export function AssistantMessage({
  answer,
  onDecide,
  onAnswerInput,
}: {
  answer: Answer;
  onDecide?: (toolId: string, approve: boolean, rememberMinutes: number) => void;
  onAnswerInput?: (inputId: string, action: InputAction, content?: Record<string, unknown>) => void;
}): ReactElement {
  const thinking = answer.streaming && answer.text === "" && answer.tools.every((t) => t.status !== "running" && t.status !== "waiting");
  const note = answer.finish ? FINISH_NOTES[answer.finish] : undefined;
  const { grounding, tools } = answer;
  const marked = useMemo(
    () =>
      grounding
        ? {
            claims: grounding.claims,
            base: grounding.base,
            titles: Object.fromEntries(tools.map((t) => [t.id, t.title])),
          }
        : undefined,
    [grounding, tools],
  );
  return (
    <article
      className="message assistant"
      data-testid="message"
      data-role="assistant"
      data-streaming={String(answer.streaming)}
      aria-busy={answer.streaming}
    >
      {answer.fallbackFrom && (
        <p className="message-note">
          {answer.fallbackFrom} could not answer; {answer.model === OFFLINE_MODEL ? "the offline model" : answer.model} took
          over.
        </p>
      )}
      {answer.resumed && (
        <p className="message-note" data-testid="resumed-note">
          {answer.resumed.message}
        </p>
      )}
      {answer.tools.length > 0 && (
        <div className="tool-list">
          {answer.tools.map((tool) => (
            <ToolCard
              key={tool.id}
              tool={tool}
              onDecide={onDecide ? (approve, minutes) => onDecide(tool.id, approve, minutes) : undefined}
              onAnswerInput={onAnswerInput}
            />
          ))}
        </div>
      )}
      <div className={`markdown${answer.streaming ? " streaming" : ""}`} data-testid="assistant-text">
        <Markdown text={answer.text} marked={marked} />
      </div>
      {thinking && (
        <p className="thinking" aria-hidden="true">
          <span />
          <span />
          <span />
        </p>
      )}
      {note && <p className="message-note">{note}</p>}
      {answer.error && !answer.streaming && <p className="message-note error-note">{answer.error.message}</p>}
    </article>
  );
}
