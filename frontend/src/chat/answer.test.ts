import { describe, expect, it } from "vitest";
import type { Conversation, StoredMessage } from "../api/types";
import { applyEvent, emptyAnswer, titleFromToolName, turnsFromConversation, type Answer } from "./answer";

function row(change: Partial<StoredMessage>): StoredMessage {
  return {
    id: "msg",
    message_id: "msg_1",
    role: "assistant",
    content: null,
    status: "complete",
    model: "maitred-offline",
    created_at: "2025-01-01T00:00:00Z",
    ...change,
  };
}

function conversation(messages: StoredMessage[]): Conversation {
  return { id: "conv_1", title: "t", created_at: "", updated_at: "", messages, tasks: [] };
}

const call = {
  id: "tc_1",
  server: "resos",
  tool: "createBooking",
  title: "Create booking",
  arguments: { people: 2 },
  duration_ms: null,
  summary: null,
  created_at: "",
};

describe("applyEvent", () => {
  it("builds an answer from the stream's events", () => {
    let answer: Answer = emptyAnswer();
    answer = applyEvent(answer, { type: "meta", data: { conversation_id: "c", message_id: "msg_1", model: "m" } });
    answer = applyEvent(answer, { type: "token", data: { text: "Let me look." } });
    answer = applyEvent(answer, {
      type: "tool_call",
      data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking", arguments: {} },
    });
    answer = applyEvent(answer, {
      type: "approval_required",
      data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking", arguments: {}, expires_at: "x" },
    });
    expect(answer.tools[0]?.status).toBe("waiting");
    answer = applyEvent(answer, { type: "tool_result", data: { id: "tc_1", status: "ok", duration_ms: 40, summary: "booked" } });
    answer = applyEvent(answer, { type: "token", data: { text: "Booked." } });
    answer = applyEvent(answer, { type: "done", data: { finish_reason: "stop" } });
    expect(answer.messageId).toBe("msg_1");
    expect(answer.text).toBe("Let me look.\n\nBooked.");
    expect(answer.tools).toHaveLength(1);
    expect(answer.tools[0]).toMatchObject({ status: "ok", durationMs: 40, summary: "booked" });
    expect(answer.tools[0]?.actingAs).toBeUndefined();
    expect(answer.streaming).toBe(false);
  });

  it("keeps whom a call is made as", () => {
    const answer = applyEvent(emptyAnswer(), {
      type: "tool_call",
      data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking", arguments: {}, acting_as: "Ada Lovelace" },
    });
    expect(answer.tools[0]?.actingAs).toBe("Ada Lovelace");
  });

  it("marks an answer another server took over, and keeps its text", () => {
    let answer = applyEvent(emptyAnswer(), { type: "token", data: { text: "Half a sen" } });
    answer = applyEvent(answer, { type: "resumed", data: { attempt: 1, message: "It goes on." } });
    answer = applyEvent(answer, { type: "token", data: { text: "tence." } });
    expect(answer.resumed?.message).toBe("It goes on.");
    expect(answer.text).toBe("Half a sentence.");
    expect(answer.streaming).toBe(true);
  });

  it("ends calls still open when the answer ends", () => {
    let answer = applyEvent(emptyAnswer(), {
      type: "tool_call",
      data: { id: "tc_1", server: "s", tool: "t", title: "T", arguments: {} },
    });
    answer = applyEvent(answer, { type: "done", data: { finish_reason: "cancelled" } });
    expect(answer.tools[0]?.status).toBe("error");
    expect(answer.finish).toBe("cancelled");
  });
});

describe("turnsFromConversation", () => {
  it("makes one answer of the model turns of one generation", () => {
    const turns = turnsFromConversation(
      conversation([
        row({ id: "m1", role: "user", content: "Book for two", model: null }),
        row({ id: "m2", content: "", tool_calls: [{ ...call, status: "ok", duration_ms: 30, summary: "booked" }] }),
        row({ id: "m3", content: "Done: booked." }),
        row({ id: "m4", role: "user", content: "Thanks", message_id: "msg_2", model: null }),
        row({ id: "m5", content: "You're welcome.", message_id: "msg_2" }),
      ]),
    );
    expect(turns.map((t) => t.kind)).toEqual(["user", "assistant", "user", "assistant"]);
    const first = turns[1];
    if (first?.kind !== "assistant") throw new Error("not an answer");
    expect(first.answer.text).toBe("Done: booked.");
    expect(first.answer.tools).toEqual([
      expect.objectContaining({ id: "tc_1", tool: "createBooking", title: "Create booking", status: "ok", durationMs: 30 }),
    ]);
    expect(first.answer.streaming).toBe(false);
  });

  it("marks an answer waiting on a tool as possibly running only when asked to", () => {
    const messages = [
      row({ id: "m1", role: "user", content: "Book for two", model: null }),
      row({ id: "m2", content: "", tool_calls: [{ ...call, status: "running" }] }),
    ];
    const live = turnsFromConversation(conversation(messages), true)[1];
    const stored = turnsFromConversation(conversation(messages), false)[1];
    expect(live?.kind === "assistant" && live.answer.streaming).toBe(true);
    expect(live?.kind === "assistant" && live.answer.tools[0]?.status).toBe("running");
    expect(stored?.kind === "assistant" && stored.answer.streaming).toBe(false);
    expect(stored?.kind === "assistant" && stored.answer.tools[0]?.status).toBe("error");
  });
});

describe("titleFromToolName", () => {
  it("turns a tool name into words", () => {
    expect(titleFromToolName("getOpeningHours")).toBe("Get opening hours");
    expect(titleFromToolName("resos__getBookingById")).toBe("Get booking by id");
  });
});
