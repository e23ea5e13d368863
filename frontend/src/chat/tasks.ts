// What the conversation does about its tasks, as pure functions: when to poll the
// gateway, which results to append as new answers, how long a task has run.

import type { Task, TaskStatus } from "../api/tasks";
import type { Turn } from "./answer";

/** How often the tasks are asked for while any of them still needs watching. */
export const TASK_POLL_MS = 2000;

/**
 * How long a task that ended is watched for the answer that carries its result: the
 * gateway posts it just after the end, so a task that has none by then gets none.
 */
export const FOLLOW_UP_WAIT_MS = 60_000;

export function taskEnded(status: TaskStatus): boolean {
  return status === "completed" || status === "failed" || status === "cancelled";
}

/** The answers (`message_id`s) the transcript already shows, the follow-ups it has appended included. */
export function shownMessageIds(turns: readonly Turn[]): Set<string> {
  const ids = new Set<string>();
  for (const turn of turns) {
    const id = turn.kind === "assistant" ? turn.answer.messageId : turn.messageId;
    if (id) ids.add(id);
  }
  return ids;
}

/** Tasks whose result was posted as an answer the transcript does not show yet, oldest first. */
export function followUpsToShow(tasks: readonly Task[], shown: ReadonlySet<string>): Task[] {
  return tasks
    .filter((t) => t.follow_up_message_id !== null && !shown.has(t.follow_up_message_id))
    .sort((a, b) => (a.finished_at ?? a.updated_at).localeCompare(b.finished_at ?? b.updated_at));
}

/**
 * Whether an ended task may still get its follow-up: it has none yet, and it ended a
 * short while ago, both by when this page first saw it ended (`endedSeenAt`) and by
 * the server's clock (so that opening an old conversation does not start a minute of
 * polling for tasks that ended long ago).
 */
export function awaitingFollowUp(task: Task, endedSeenAt: number | undefined, now: number): boolean {
  if (!taskEnded(task.status) || task.follow_up_message_id !== null) return false;
  const seen = endedSeenAt ?? now;
  if (now - seen >= FOLLOW_UP_WAIT_MS) return false;
  const finished = Date.parse(task.finished_at ?? task.updated_at);
  // A few minutes of slack for a server clock that is not this computer's.
  return Number.isNaN(finished) || now - finished < FOLLOW_UP_WAIT_MS + 5 * 60_000;
}

/** Whether the tasks need asking for again: one still runs, or a result is still to come or to show. */
export function keepPolling(
  tasks: readonly Task[],
  shown: ReadonlySet<string>,
  endedSeenAt: ReadonlyMap<string, number>,
  now: number,
): boolean {
  return tasks.some(
    (t) =>
      !taskEnded(t.status) ||
      (t.follow_up_message_id !== null && !shown.has(t.follow_up_message_id)) ||
      awaitingFollowUp(t, endedSeenAt.get(t.id), now),
  );
}

/** Notes when each task was first seen ended, keeping earlier notes; tasks gone from the list are forgotten. */
export function noteEnded(
  previous: ReadonlyMap<string, number>,
  tasks: readonly Task[],
  now: number,
): Map<string, number> {
  const next = new Map<string, number>();
  for (const t of tasks) {
    if (taskEnded(t.status)) next.set(t.id, previous.get(t.id) ?? now);
  }
  return next;
}

/** The list with `task` in place of the one with its id (an answer to a cancel or an input). */
export function replaceTask(tasks: readonly Task[], task: Task): Task[] {
  return tasks.some((t) => t.id === task.id) ? tasks.map((t) => (t.id === task.id ? task : t)) : [...tasks, task];
}

/** How long the task has run: the server's figure, plus the time since it was fetched while it still runs. */
export function elapsedMs(task: Task, fetchedAt: number, now: number): number {
  return taskEnded(task.status) ? task.elapsed_ms : task.elapsed_ms + Math.max(0, now - fetchedAt);
}

const STATUS_WORDS: Record<TaskStatus, string> = {
  working: "Running",
  input_required: "Needs your input",
  completed: "Finished",
  failed: "Failed",
  cancelled: "Stopped",
};

export function taskStatusWord(status: TaskStatus): string {
  return STATUS_WORDS[status];
}

/** 4_200 → "0:04", 3_723_000 → "1:02:03": a stopwatch, for a task's elapsed time. */
export function formatElapsed(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
}

/**
 * How far a running task got: its server's figures, or else the "Day 12 of 30" its
 * status message starts with (a task's server may report only words); none otherwise.
 */
export function progressOf(task: Task): { progress: number; total?: number } | null {
  const { progress } = task;
  if (progress) {
    return progress.total !== null && progress.total > 0
      ? { progress: progress.progress, total: progress.total }
      : { progress: progress.progress };
  }
  const match = /^\D{0,40}?\b(\d{1,9}) of (\d{1,9})\b/.exec(task.status_message ?? "");
  if (!match) return null;
  const done = Number(match[1]);
  const total = Number(match[2]);
  return total > 0 && done <= total ? { progress: done, total } : null;
}
