import { useEffect, useLayoutEffect, useRef, type ReactElement } from "react";
import type { Task } from "../api/tasks";
import type { InputAction } from "../api/types";
import type { Turn } from "../chat/answer";
import { AssistantMessage, UserMessage } from "./Message";
import { TaskNote } from "./TaskNote";

const SUGGESTIONS = [
  "Which tables seat six people?",
  "What are the opening hours this week?",
  "Show the bookings for today",
  "What did guests say in their latest feedback?",
];

export function Transcript({
  turns,
  loading,
  onDecide,
  onAnswerInput,
  onSuggest,
  tasks = [],
}: {
  turns: Turn[];
  loading: boolean;
  onDecide: (toolId: string, approve: boolean, rememberMinutes: number) => void;
  onAnswerInput: (inputId: string, action: InputAction, content?: Record<string, unknown>) => void;
  onSuggest: (question: string) => void;
  /** The conversation's tasks, for the notes that open their follow-ups. */
  tasks?: readonly Task[];
}): ReactElement {
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);

  // Follow the answer as it grows, unless the reader scrolled up to read something.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  });

  useEffect(() => {
    pinned.current = true;
  }, [turns.length]);

  return (
    <div
      className="transcript"
      ref={scroller}
      onScroll={(e) => {
        const el = e.currentTarget;
        pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
      }}
    >
      <div className="transcript-inner">
        {loading && <p className="transcript-loading">Loading the conversation…</p>}
        {!loading && turns.length === 0 && (
          <div className="welcome">
            <h1>What would you like to know?</h1>
            <p>Ask about bookings, tables, opening hours or guest feedback. Changes wait for your approval.</p>
            <ul className="suggestions">
              {SUGGESTIONS.map((s) => (
                <li key={s}>
                  <button type="button" className="suggestion" onClick={() => onSuggest(s)}>
                    {s}
                  </button>
                </li>
              ))}
            </ul>
          </div>
        )}
        {turns.map((turn) =>
          turn.kind === "user" && turn.taskId !== undefined ? (
            <TaskNote key={turn.key} task={tasks.find((t) => t.id === turn.taskId)} text={turn.text} />
          ) : turn.kind === "user" ? (
            <UserMessage key={turn.key} text={turn.text} unsent={turn.unsent} />
          ) : (
            <AssistantMessage key={turn.key} answer={turn.answer} onDecide={onDecide} onAnswerInput={onAnswerInput} />
          ),
        )}
      </div>
    </div>
  );
}
