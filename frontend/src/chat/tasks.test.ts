import { describe, expect, it } from "vitest";
import type { Conversation, StoredMessage } from "../api/types";
import { ended, task } from "../test/tasks";
import { emptyAnswer, turnsFromConversation, type Turn } from "./answer";
import {
  awaitingFollowUp,
  elapsedMs,
  FOLLOW_UP_WAIT_MS,
  followUpsToShow,
  formatElapsed,
  keepPolling,
  noteEnded,
  progressOf,
  replaceTask,
  shownMessageIds,
} from "./tasks";

const NOW = Date.parse("2026-11-26T10:05:00Z");
const none = new Map<string, number>();

describe("keepPolling", () => {
  it("polls while a task runs or waits for input", () => {
    expect(keepPolling([task()], new Set(), none, NOW)).toBe(true);
    expect(keepPolling([task({ status: "input_required" })], new Set(), none, NOW)).toBe(true);
  });

  it("stops once every task has ended and its result is shown", () => {
    const done = ended("completed", "2026-11-26T10:04:00Z", "msg_f");
    expect(keepPolling([done], new Set(["msg_f"]), new Map([["tsk_1", NOW - 10_000]]), NOW)).toBe(false);
    expect(keepPolling([], new Set(), none, NOW)).toBe(false);
  });

  it("polls while a result is posted but not yet shown", () => {
    const done = ended("completed", "2026-11-26T10:04:00Z", "msg_f");
    expect(keepPolling([done], new Set(["msg_1"]), none, NOW)).toBe(true);
  });

  it("waits a while for the result of a task that just ended, not for one that ended long ago", () => {
    const justNow = ended("completed", "2026-11-26T10:04:59Z");
    expect(keepPolling([justNow], new Set(), new Map([["tsk_1", NOW - 1000]]), NOW)).toBe(true);
    // Seen ended here a minute ago: no result is coming any more.
    expect(keepPolling([justNow], new Set(), new Map([["tsk_1", NOW - FOLLOW_UP_WAIT_MS]]), NOW)).toBe(false);
    // A conversation opened long after its task ended.
    const old = ended("cancelled", "2026-11-25T09:00:00Z");
    expect(keepPolling([old], new Set(), new Map([["tsk_1", NOW]]), NOW)).toBe(false);
    expect(awaitingFollowUp(old, NOW, NOW)).toBe(false);
  });
});

describe("followUpsToShow", () => {
  it("names each posted result the transcript lacks, oldest first, once", () => {
    const a = { ...ended("completed", "2026-11-26T10:04:00Z", "msg_a"), id: "tsk_a" };
    const b = { ...ended("failed", "2026-11-26T10:03:00Z", "msg_b"), id: "tsk_b" };
    const c = { ...ended("completed", "2026-11-26T10:02:00Z", "msg_c"), id: "tsk_c" };
    expect(followUpsToShow([a, b, c, task()], new Set(["msg_c"])).map((t) => t.id)).toEqual(["tsk_b", "tsk_a"]);
  });
});

describe("shownMessageIds", () => {
  it("knows answers streamed here and stored ones, and a follow-up's note", () => {
    const turns: Turn[] = [
      { kind: "user", key: "u1", text: "Hi", messageId: "msg_1" },
      { kind: "assistant", key: "a1", answer: emptyAnswer("msg_1") },
      { kind: "user", key: "u2", text: "" },
      { kind: "assistant", key: "a2", answer: emptyAnswer(null) },
      { kind: "user", key: "n", text: "", messageId: "msg_f", taskId: "tsk_1" },
    ];
    expect([...shownMessageIds(turns)].sort()).toEqual(["msg_1", "msg_f"]);
  });
});

describe("the rest", () => {
  it("counts a running task's time on from the fetch, an ended one's not", () => {
    expect(elapsedMs(task({ elapsed_ms: 3000 }), NOW - 1500, NOW)).toBe(4500);
    expect(elapsedMs(ended("completed", "2026-11-26T10:00:09Z"), NOW - 1500, NOW)).toBe(3000);
    expect(formatElapsed(4_200)).toBe("0:04");
    expect(formatElapsed(125_000)).toBe("2:05");
    expect(formatElapsed(3_723_000)).toBe("1:02:03");
  });

  it("notes when a task was first seen ended", () => {
    const first = noteEnded(new Map(), [task(), { ...ended("failed", "2026-11-26T10:00:00Z"), id: "tsk_2" }], 100);
    expect([...first]).toEqual([["tsk_2", 100]]);
    const later = noteEnded(first, [{ ...ended("failed", "2026-11-26T10:00:00Z"), id: "tsk_2" }, ended("cancelled", "x")], 200);
    expect(later.get("tsk_2")).toBe(100);
    expect(later.get("tsk_1")).toBe(200);
  });

  it("replaces a task by id, or adds it", () => {
    const stopped = ended("cancelled", "2026-11-26T10:01:00Z");
    expect(replaceTask([task()], stopped)).toEqual([stopped]);
    expect(replaceTask([], stopped)).toEqual([stopped]);
  });
});

describe("a follow-up answer in the stored conversation", () => {
  const part = (change: Partial<StoredMessage>): StoredMessage => ({
    id: "p",
    message_id: "msg_1",
    role: "assistant",
    content: null,
    status: "complete",
    model: "scripted",
    created_at: "2026-11-26T10:00:00Z",
    ...change,
  });
  const conversation = (messages: StoredMessage[]): Conversation => ({
    id: "conv_1",
    title: "t",
    created_at: "",
    updated_at: "",
    messages,
    tasks: [],
  });

  it("makes its question part a note from the task, and marks its answer as the task's", () => {
    const turns = turnsFromConversation(
      conversation([
        part({ id: "p1", role: "user", content: "The month report for November", model: null }),
        part({ id: "p2", content: "It runs in the background." }),
        part({ id: "p3", role: "user", message_id: "msg_f", content: "Task finished: …", model: null, task_id: "tsk_1" }),
        part({ id: "p4", message_id: "msg_f", content: "November: 412 covers.", task_id: "tsk_1" }),
      ]),
    );
    expect(turns.map((t) => [t.kind, t.taskId])).toEqual([
      ["user", undefined],
      ["assistant", undefined],
      ["user", "tsk_1"],
      ["assistant", "tsk_1"],
    ]);
    expect(turns[2]).toMatchObject({ text: "Task finished: …", messageId: "msg_f" });
  });

  it("watches a follow-up whose answer is not stored yet as the task's", () => {
    const turns = turnsFromConversation(
      conversation([part({ id: "p3", role: "user", message_id: "msg_f", content: "Done", model: null, task_id: "tsk_1" })]),
      true,
    );
    expect(turns[1]).toMatchObject({ kind: "assistant", taskId: "tsk_1", answer: { messageId: "msg_f", streaming: true } });
  });
});

describe("progressOf", () => {
  it("takes the server's figures, or the day counted in the status message", () => {
    expect(progressOf(task())).toEqual({ progress: 3, total: 30 });
    expect(progressOf(task({ progress: { progress: 2, total: null } }))).toEqual({ progress: 2 });
    const words = (status_message: string | null) => task({ progress: null, status_message });
    expect(progressOf(words("Day 12 of 30 (2026-11-12): 14 bookings, 40 covers"))).toEqual({ progress: 12, total: 30 });
    expect(progressOf(words("Reading the bookings of November 2026"))).toBeNull();
    expect(progressOf(words("Day 31 of 30"))).toBeNull();
    expect(progressOf(words(null))).toBeNull();
  });
});
