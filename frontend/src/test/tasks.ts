// A task as the gateway lists it, for tests: working on a month report unless told otherwise.

import type { Task } from "../api/tasks";

export function task(change: Partial<Task> = {}): Task {
  return {
    id: "tsk_1",
    conversation_id: "conv_1",
    message_id: "msg_1",
    tool_call_id: "tc_1",
    server: "resos",
    tool: "getMonthReport",
    title: "Month report · month 2026-11",
    status: "working",
    status_message: "Day 3 of 30",
    progress: { progress: 3, total: 30 },
    created_at: "2026-11-26T10:00:00Z",
    updated_at: "2026-11-26T10:00:03Z",
    finished_at: null,
    elapsed_ms: 3000,
    follow_up_message_id: null,
    error: null,
    input: null,
    ...change,
  };
}

/** The same task, ended `status` at `finished_at`, its result posted as `follow_up_message_id` (if given). */
export function ended(status: Task["status"], finishedAt: string, followUp: string | null = null): Task {
  return task({
    status,
    finished_at: finishedAt,
    updated_at: finishedAt,
    status_message: null,
    progress: null,
    follow_up_message_id: followUp,
  });
}
