import { useEffect, useState, type ReactElement } from "react";
import type { Task, TaskStatus } from "../api/tasks";
import type { InputAction } from "../api/types";
import type { InputRequest } from "../chat/answer";
import { elapsedMs, formatElapsed, progressOf, taskEnded, taskStatusWord } from "../chat/tasks";
import type { TaskAction } from "../hooks/useTasks";
import { AlertIcon, BanIcon, CheckIcon, ClockIcon, StopIcon } from "./icons";
import { InputCard } from "./InputCard";
import { ToolProgressBar } from "./ToolProgressBar";

function StatusIcon({ status }: { status: TaskStatus }): ReactElement {
  switch (status) {
    case "working":
      return <span className="spinner" aria-hidden="true" />;
    case "input_required":
      return <ClockIcon />;
    case "completed":
      return <CheckIcon />;
    case "failed":
      return <AlertIcon />;
    case "cancelled":
      return <BanIcon />;
  }
}

/** This computer's clock, once a second while `running`. */
function useNow(running: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [running]);
  return now;
}

/** The task's request for input, as the form card of a tool's request shows it. */
function inputRequest(task: Task, action: TaskAction | undefined): InputRequest | null {
  if (task.status !== "input_required" || task.input === null) return null;
  const { schema, url } = task.input;
  const form = schema !== undefined && schema !== null;
  const request: InputRequest = {
    id: task.id,
    mode: form || typeof url !== "string" ? "form" : "url",
    message: task.input.message,
    // A task's request waits as long as the task does: no deadline to show.
    expiresAt: "",
    state: action?.sending ? "sending" : "open",
  };
  if (form) request.schema = schema;
  else if (typeof url === "string") request.url = url;
  if (action?.problems) request.problems = action.problems;
  if (action?.problem) request.problem = action.problem;
  return request;
}

/** Under an ended task's title: why it failed, or where its result went (its last status message is stale). */
function rowNote(task: Task): string | null {
  switch (task.status) {
    case "failed":
      return task.error ?? task.status_message;
    case "completed":
      return task.follow_up_message_id !== null ? "Its result is posted in the conversation." : null;
    case "cancelled":
      return null;
    default:
      return task.status_message;
  }
}

/** One task: what it is, how far it got, how long it has run; Stop while it runs. */
export function TaskRow({
  task,
  fetchedAt,
  action,
  onCancel,
  onAnswerInput,
}: {
  task: Task;
  fetchedAt: number;
  action: TaskAction | undefined;
  onCancel: (taskId: string) => void;
  onAnswerInput: (taskId: string, action: InputAction, content?: Record<string, unknown>) => void;
}): ReactElement {
  const ended = taskEnded(task.status);
  const now = useNow(!ended);
  const input = inputRequest(task, action);
  const progress = progressOf(task);
  const note = rowNote(task);
  return (
    <li
      className={`task-row status-${task.status}`}
      data-testid="task-row"
      data-task-id={task.id}
      data-status={task.status}
      data-tool={task.tool}
    >
      <div className="task-head">
        <span className="tool-icon" aria-hidden="true">
          <StatusIcon status={task.status} />
        </span>
        <span className="task-title" data-testid="task-title">
          {task.title}
        </span>
        <span className="tool-status" data-testid="task-status">
          {taskStatusWord(task.status)}
        </span>
        <span className="tool-duration" data-testid="task-elapsed" title="How long it has run">
          {formatElapsed(elapsedMs(task, fetchedAt, now))}
        </span>
        {!ended && (
          <button
            type="button"
            className="button task-stop"
            data-testid="task-stop"
            disabled={action?.sending === true}
            aria-label={`Stop ${task.title}`}
            onClick={() => onCancel(task.id)}
          >
            <StopIcon />
            <span>Stop</span>
          </button>
        )}
      </div>
      {task.status === "working" ? (
        // Without figures, a bar that says it runs, under its status message.
        <ToolProgressBar
          title={task.title}
          progress={{
            progress: progress?.progress ?? 0,
            ...(progress?.total !== undefined ? { total: progress.total } : {}),
            ...(task.status_message ? { message: task.status_message } : {}),
          }}
        />
      ) : (
        note && (
          <p className={`task-message${task.status === "failed" ? " error-note" : ""}`} data-testid="task-message">
            {note}
          </p>
        )
      )}
      {action?.problem && !input && (
        <p className="form-problem" role="alert" data-testid="task-problem">
          {action.problem}
        </p>
      )}
      {input && (
        <InputCard
          key={`${task.id}:${task.input?.message ?? ""}`}
          title={task.title}
          input={input}
          takeFocus={false}
          onAnswer={(answer, content) => onAnswerInput(task.id, answer, content)}
        />
      )}
    </li>
  );
}
