// Tools that take minutes (MCP Tasks): the gateway keeps each as a task of the
// conversation, and posts its result once as a new answer. Hand-written for now; the
// shapes are the gateway's `GET /conversations/{id}/tasks`.

import type { StoredMessage } from "./types";

export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

export interface TaskProgress {
  progress: number;
  total: number | null;
}

/** What the task waits for: a form (its JSON schema), or else a page to open, as a tool's request for input. */
export interface TaskInput {
  message: string;
  schema?: unknown;
  url?: string | null;
}

export interface Task {
  id: string;
  conversation_id: string;
  /** The answer whose tool call started it. */
  message_id: string;
  tool_call_id: string;
  server: string;
  tool: string;
  title: string;
  status: TaskStatus;
  status_message: string | null;
  /** Figures, when its server reports them; the status message otherwise says how far it got. */
  progress?: TaskProgress | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  elapsed_ms: number;
  /** The new answer that carries its result, once posted. */
  follow_up_message_id: string | null;
  error: string | null;
  input: TaskInput | null;
}

export interface TaskList {
  tasks: Task[];
}

/**
 * A stored part with the field the gateway adds for a task's follow-up answer (its
 * question part is a note from the task, not something the person typed). Read through
 * this until generated.ts has it.
 */
export type StoredMessageWithTask = StoredMessage & { task_id?: string | null };

export function taskIdOf(message: StoredMessage): string | undefined {
  const id = (message as StoredMessageWithTask).task_id;
  return typeof id === "string" && id !== "" ? id : undefined;
}
