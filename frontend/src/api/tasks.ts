// Tools that take minutes (MCP Tasks): the gateway keeps each as a task of the
// conversation, and posts its result once as a new answer. The shapes are generated
// from the gateway's Rust types (generated.ts); this adds what the UI reads besides.

import type { Task as StoredTask, StoredMessage } from "./types";

export type { TaskInput, TaskList, TaskStatus } from "./types";

export interface TaskProgress {
  progress: number;
  total: number | null;
}

/**
 * A task as the gateway lists it. `progress`: figures, should its server ever report
 * them; today the status message says how far it got ("Day 12 of 30 …").
 */
export type Task = StoredTask & { progress?: TaskProgress | null };

/** The task whose result this part belongs to: its question part is a note from the task. */
export function taskIdOf(message: StoredMessage): string | undefined {
  const id = message.task_id;
  return typeof id === "string" && id !== "" ? id : undefined;
}
