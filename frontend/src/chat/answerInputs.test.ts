import { describe, expect, it } from "vitest";
import type { ChatEvent, InputRequiredEvent } from "../api/types";
import { applyEvent, emptyAnswer, setInput, type Answer } from "./answer";

const CALL: ChatEvent = {
  type: "tool_call",
  data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking a table", arguments: { people: 2 } },
};

const REQUEST: InputRequiredEvent = {
  id: "in_a1",
  tool_call_id: "tc_1",
  server: "resos",
  tool: "createBooking",
  message: "Who is the booking for?",
  mode: "form",
  schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  expires_at: "2026-11-24T12:05:00Z",
};

const required = (change: Partial<InputRequiredEvent> = {}): ChatEvent => ({
  type: "input_required",
  data: { ...REQUEST, ...change },
});
const resolved = (id: string, action: "accept" | "decline" | "cancel"): ChatEvent => ({
  type: "input_resolved",
  data: { id, action },
});
const result: ChatEvent = { type: "tool_result", data: { id: "tc_1", status: "ok", duration_ms: 900, summary: "booked" } };

const apply = (events: ChatEvent[], from: Answer = emptyAnswer()): Answer => events.reduce(applyEvent, from);

describe("requests for input in an answer", () => {
  it("opens a request on its tool's card, which waits for the person", () => {
    const answer = apply([CALL, required()]);
    expect(answer.tools).toHaveLength(1);
    expect(answer.tools[0]).toMatchObject({
      id: "tc_1",
      status: "waiting",
      title: "Booking a table",
      input: {
        id: "in_a1",
        mode: "form",
        message: "Who is the booking for?",
        schema: REQUEST.schema,
        expiresAt: REQUEST.expires_at,
        state: "open",
      },
    });
  });

  it("closes it with its outcome when resolved, and the call runs on", () => {
    const answer = apply([CALL, required(), resolved("in_a1", "decline")]);
    expect(answer.tools[0]).toMatchObject({ status: "running", input: { state: "closed", outcome: "decline" } });
  });

  it("shows a replayed request once, keeping what the person did with it", () => {
    let answer = apply([CALL, required()]);
    answer = setInput(answer, "in_a1", { state: "sending" });
    answer = applyEvent(answer, required());
    expect(answer.tools).toHaveLength(1);
    expect(answer.tools[0]?.input).toMatchObject({ id: "in_a1", state: "sending" });
  });

  it("never opens a request whose resolution came first", () => {
    const answer = apply([CALL, resolved("in_a1", "accept"), required()]);
    expect(answer.tools[0]).toMatchObject({ status: "running", input: { state: "closed", outcome: "accept" } });
  });

  it("does not reopen a request answered before a replay of the whole answer", () => {
    const events = [CALL, required(), resolved("in_a1", "accept")];
    // A reload watches the answer from its first event: the same events again.
    const answer = apply([...events, ...events]);
    expect(answer.tools).toHaveLength(1);
    expect(answer.tools[0]?.input).toMatchObject({ state: "closed", outcome: "accept" });
  });

  it("takes a second request of the same call in place of the first", () => {
    const answer = apply([
      CALL,
      required(),
      resolved("in_a1", "accept"),
      required({ id: "in_b2", mode: "url", url: "https://pay.example.com/x", message: "Pay the deposit", schema: undefined }),
    ]);
    expect(answer.tools[0]).toMatchObject({
      status: "waiting",
      input: { id: "in_b2", mode: "url", url: "https://pay.example.com/x", state: "open" },
    });
    expect(answer.tools[0]?.input).not.toHaveProperty("schema");
  });

  it("makes a card for a request whose call it has not seen", () => {
    const answer = apply([required({ tool_call_id: "tc_9", tool: "createBooking" })]);
    expect(answer.tools[0]).toMatchObject({ id: "tc_9", title: "Create booking", status: "waiting" });
  });

  it("ignores a request for a call that has already ended", () => {
    const answer = apply([CALL, result, required()]);
    expect(answer.tools[0]).toMatchObject({ status: "ok" });
    expect(answer.tools[0]?.input).toBeUndefined();
  });

  it("closes a request still open when its call ends or the answer stops", () => {
    const ended = apply([CALL, required(), result]);
    expect(ended.tools[0]).toMatchObject({ status: "ok", input: { state: "closed" } });
    expect(ended.tools[0]?.input?.outcome).toBeUndefined();
    const stopped = apply([CALL, required(), { type: "done", data: { finish_reason: "cancelled" } }]);
    expect(stopped.tools[0]).toMatchObject({ status: "error", stopped: true, input: { state: "closed" } });
  });

  it("keeps a call waiting for its approval when its input is answered", () => {
    const approval: ChatEvent = {
      type: "approval_required",
      data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking a table", arguments: {}, expires_at: "x" },
    };
    const answer = apply([CALL, required(), approval, resolved("in_a1", "accept")]);
    expect(answer.tools[0]?.status).toBe("waiting");
  });
});

describe("an approval replayed with the rest of the answer", () => {
  const approval: ChatEvent = {
    type: "approval_required",
    data: { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking a table", arguments: {}, expires_at: "x" },
  };

  it("is granted, as far as the card goes, once the call asks for input", () => {
    // A reload watches the answer from its first event: the approval is there, but
    // nothing says it was given; that the call runs does.
    const answer = apply([CALL, approval, required()]);
    expect(answer.tools[0]).toMatchObject({ status: "waiting", approval: { decision: "approved" }, input: { state: "open" } });
  });

  it("is granted once the call reports progress", () => {
    const answer = apply([CALL, approval, { type: "tool_progress", data: { id: "tc_1", progress: 1, total: 3 } }]);
    expect(answer.tools[0]).toMatchObject({ status: "running", approval: { decision: "approved" } });
  });

  it("still waits while nothing says the call runs", () => {
    expect(apply([CALL, approval]).tools[0]).toMatchObject({ status: "waiting", approval: { decision: "pending" } });
  });
});

describe("setInput", () => {
  it("changes the request with that id, and a replaced one not at all", () => {
    const answer = apply([CALL, required()]);
    const closed = setInput(answer, "in_a1", { state: "closed", outcome: "accept" });
    expect(closed.tools[0]).toMatchObject({ status: "running", input: { state: "closed", outcome: "accept" } });
    expect(setInput(answer, "in_old", { state: "closed" })).toBe(answer);
  });
});

describe("tool progress", () => {
  const progress = (value: number, total?: number, message?: string): ChatEvent => ({
    type: "tool_progress",
    data: { id: "tc_1", progress: value, ...(total === undefined ? {} : { total }), ...(message ? { message } : {}) },
  });

  it("keeps the latest report on the call's card", () => {
    const answer = apply([CALL, progress(1, 7, "Monday"), progress(3, 7, "Wednesday")]);
    expect(answer.tools[0]?.progress).toEqual({ progress: 3, total: 7, message: "Wednesday" });
  });

  it("has no total when the tool gave none (or a useless one)", () => {
    expect(apply([CALL, progress(5)]).tools[0]?.progress).toEqual({ progress: 5 });
    expect(apply([CALL, progress(5, 0)]).tools[0]?.progress).toEqual({ progress: 5 });
  });

  it("goes when the result comes, and a late report does not bring it back", () => {
    const answer = apply([CALL, progress(3, 7), result, progress(4, 7)]);
    expect(answer.tools[0]?.status).toBe("ok");
    expect(answer.tools[0]?.progress).toBeUndefined();
  });

  it("is ignored for a call it does not know", () => {
    const answer = apply([CALL, { type: "tool_progress", data: { id: "tc_other", progress: 1 } }]);
    expect(answer.tools[0]?.progress).toBeUndefined();
    expect(answer.tools).toHaveLength(1);
  });
});
