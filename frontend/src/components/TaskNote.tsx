import type { ReactElement } from "react";
import type { Task } from "../api/tasks";
import { taskStatusWord } from "../chat/tasks";
import { AlertIcon, BanIcon, CheckIcon, ClockIcon } from "./icons";

function NoteIcon({ task }: { task: Task | undefined }): ReactElement {
  switch (task?.status) {
    case "failed":
      return <AlertIcon />;
    case "cancelled":
      return <BanIcon />;
    case "working":
    case "input_required":
      return <ClockIcon />;
    default:
      return <CheckIcon />;
  }
}

/**
 * The question part of a task's follow-up: not something the person typed, but the
 * task saying it ended, with the task's title and status. Its text (the gateway's note
 * to the model) is the task's, shown as text.
 */
export function TaskNote({ task, text }: { task: Task | undefined; text: string }): ReactElement {
  const status = task ? taskStatusWord(task.status).toLowerCase() : "finished";
  const title = task?.title ?? "A background task";
  return (
    <aside className="message task-note" data-testid="task-note" data-role="task" data-status={task?.status ?? ""}>
      <p className="task-note-head">
        <span className="tool-icon" aria-hidden="true">
          <NoteIcon task={task} />
        </span>
        <span data-testid="task-note-title">
          {title} <span className="task-note-status">{status}</span>
        </span>
      </p>
      {text.trim() !== "" && (
        <details className="task-note-text">
          <summary>What it reported</summary>
          <p>{text}</p>
        </details>
      )}
    </aside>
  );
}
