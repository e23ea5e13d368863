// A tool that takes minutes, through the whole page: the conversation's tasks in their
// panel, a Stop that posts the cancel, and the task's result arriving as a new answer
// that streams in beside a question the person asks meanwhile.

import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import type { Task } from "./api/tasks";
import { fakeBody, jsonBody, jsonResponse, sse, until, type FakeBody, type FetchCall } from "./test/fakeStream";
import { ended, task } from "./test/tasks";

const SIGNED_IN = {
  authenticated: true,
  csrf_token: "csrf-t",
  user: { subject: "u1", name: "Oscar Operator", roles: ["OPERATOR"] },
  model: "scripted",
};
const CONVERSATION = {
  id: "conv_1",
  title: "Month report",
  created_at: "2026-11-26T10:00:00Z",
  updated_at: "2026-11-26T10:00:00Z",
  messages: [
    { id: "p1", message_id: "msg_1", role: "user", content: "The month report for 2026-11", status: "complete", model: null, created_at: "2026-11-26T10:00:00Z" },
    { id: "p2", message_id: "msg_1", role: "assistant", content: "It runs in the background.", status: "complete", model: "scripted", created_at: "2026-11-26T10:00:01Z" },
  ],
};

/** The gateway, by path: the tasks' list is whatever `tasks` holds when asked. */
function gateway(tasks: Task[]): {
  calls: FetchCall[];
  tasks: Task[];
  followUp: FakeBody;
  ask: FakeBody;
  cancels: Response[];
} {
  const calls: FetchCall[] = [];
  const state = { calls, tasks, followUp: fakeBody(), ask: fakeBody(), cancels: [] as Response[] };
  const answer = (url: string, init: RequestInit): Response => {
    calls.push({ url, init });
    if (url === "/api/auth/status") return jsonResponse(200, SIGNED_IN);
    if (url === "/api/v1/resos/conversations") return jsonResponse(200, []);
    if (url === "/api/v1/resos/conversations/conv_1") return jsonResponse(200, CONVERSATION);
    if (url === "/api/v1/resos/conversations/conv_1/tasks") return jsonResponse(200, { tasks: state.tasks });
    if (url === "/api/v1/resos/stream/chat/msg_f") return state.followUp.response;
    if (url === "/api/v1/resos/stream/chat") return state.ask.response;
    if (url === "/api/v1/resos/chat/tasks/tsk_1/input") return jsonResponse(202, task({ status_message: "Reading 2026-11" }));
    if (url === "/api/v1/resos/chat/tasks/tsk_1/cancel") {
      const next = state.cancels.shift();
      if (!next) throw new Error(`unexpected cancel ${url}`);
      return next;
    }
    throw new Error(`unexpected fetch ${url}`);
  };
  vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) => Promise.resolve().then(() => answer(url, init)));
  return state;
}

const polls = (calls: FetchCall[]): number => calls.filter((c) => c.url.endsWith("/tasks")).length;

describe("a conversation's tasks", () => {
  beforeEach(() => {
    window.history.replaceState(null, "", "/c/conv_1");
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("shows a running task with its progress, and stops it with Stop", async () => {
    const net = gateway([task()]);
    render(<App />);
    const row = await screen.findByTestId("task-row");
    expect(row.dataset.status).toBe("working");
    expect(within(row).getByTestId("task-title").textContent).toBe("Month report · month 2026-11");
    const bar = within(row).getByRole("progressbar");
    expect(bar.getAttribute("aria-valuenow")).toBe("3");
    expect(bar.getAttribute("aria-valuemax")).toBe("30");
    expect(within(row).getByTestId("tool-progress-message").textContent).toBe("Day 3 of 30");
    expect(within(row).getByTestId("task-elapsed").textContent).toMatch(/^0:0\d$/);
    // A running task does not keep the person from asking.
    fireEvent.change(screen.getByTestId("question-input"), { target: { value: "Anything else?" } });
    expect(screen.getByTestId<HTMLButtonElement>("send-button").disabled).toBe(false);

    const stopped = ended("cancelled", "2026-11-26T10:00:05Z");
    net.cancels.push(jsonResponse(202, stopped));
    net.tasks = [stopped];
    fireEvent.click(within(row).getByTestId("task-stop"));
    await until(() => screen.getByTestId("task-row").dataset.status === "cancelled", "the task stopped");
    const cancel = net.calls.find((c) => c.url.endsWith("/cancel"))!;
    expect(cancel.init.method).toBe("POST");
    expect(jsonBody(cancel.init)).toEqual({});
    expect(new Headers(cancel.init.headers).get("X-CSRF-Token")).toBe("csrf-t");
    expect(screen.queryByTestId("task-stop")).toBeNull();
    expect(screen.getByTestId("task-status").textContent).toBe("Stopped");
  });

  it("says so when Stop comes after the task ended", async () => {
    const net = gateway([task()]);
    render(<App />);
    const row = await screen.findByTestId("task-row");
    net.cancels.push(jsonResponse(409, { code: "CONFLICT", message: "the task has ended" }));
    fireEvent.click(within(row).getByTestId("task-stop"));
    expect((await screen.findByTestId("task-problem")).textContent).toBe("This task has already ended.");
  });

  it("shows a task's request for input as a form, and posts the answer to the task", async () => {
    const asking = task({
      status: "input_required",
      status_message: "Asking which month to report on",
      progress: null,
      input: {
        message: "Which month?",
        schema: { type: "object", properties: { month: { type: "string", title: "Month" } }, required: ["month"] },
        url: null,
      },
    });
    const net = gateway([asking]);
    render(<App />);
    const card = await screen.findByTestId("input-card");
    expect(within(card).getByTestId("input-message").textContent).toBe("Which month?");
    expect(screen.getByTestId("task-row").dataset.status).toBe("input_required");
    // It came beside the chat unasked-for: the question box keeps the focus.
    expect(card.contains(document.activeElement)).toBe(false);
    net.tasks = [task()];
    fireEvent.change(within(card).getByLabelText(/^Month/), { target: { value: "2026-11" } });
    fireEvent.click(within(card).getByTestId("input-send"));
    await until(() => screen.queryByTestId("input-card") === null, "the form gone");
    const sent = net.calls.find((c) => c.url.endsWith("/input"))!;
    expect(sent.url).toBe("/api/v1/resos/chat/tasks/tsk_1/input");
    expect(jsonBody(sent.init)).toEqual({ action: "accept", content: { month: "2026-11" } });
    expect(new Headers(sent.init.headers).get("X-CSRF-Token")).toBe("csrf-t");
    expect(screen.getByTestId("task-row").dataset.status).toBe("working");
  });

  it("appends a task's result as a new answer that streams in, while the person asks something else", async () => {
    const net = gateway([ended("completed", new Date().toISOString(), "msg_f")]);
    render(<App />);
    const note = await screen.findByTestId("task-note");
    expect(within(note).getByTestId("task-note-title").textContent).toBe("Month report · month 2026-11 finished");
    await until(() => net.calls.some((c) => c.url === "/api/v1/resos/stream/chat/msg_f"), "the follow-up watched");
    const watch = net.calls.find((c) => c.url === "/api/v1/resos/stream/chat/msg_f")!;
    expect(new Headers(watch.init.headers).get("Last-Event-ID")).toBe("0");

    act(() => {
      net.followUp.send(sse(1, "meta", { conversation_id: "conv_1", message_id: "msg_f", model: "scripted" }));
      net.followUp.send(sse(2, "token", { text: "November: " }));
    });
    const assistants = (): HTMLElement[] => screen.getAllByTestId("message").filter((m) => m.dataset.role === "assistant");
    await until(() => assistants().length === 2, "the follow-up's answer");
    expect(assistants()[1]!.dataset.streaming).toBe("true");
    // Not one of the person's bubbles, and not a reason to keep them from asking.
    expect(screen.getAllByTestId("message").filter((m) => m.dataset.role === "user")).toHaveLength(1);
    expect(screen.queryByTestId("stop-button")).toBeNull();

    // The person asks meanwhile: both answers stream, neither cuts the other off.
    const input = screen.getByTestId("question-input");
    fireEvent.change(input, { target: { value: "Which tables seat six?" } });
    fireEvent.keyDown(input, { key: "Enter" });
    await until(() => net.calls.some((c) => c.url === "/api/v1/resos/stream/chat"), "the question");
    act(() => {
      net.ask.send(sse(1, "meta", { conversation_id: "conv_1", message_id: "msg_2", model: "scripted" }));
      net.ask.send(sse(2, "token", { text: "T4 seats six." }));
      net.followUp.send(sse(3, "token", { text: "412 covers." }));
      net.followUp.send(sse(4, "done", { finish_reason: "stop" }));
    });
    await until(() => assistants()[1]!.dataset.streaming === "false", "the follow-up's end");
    expect(within(assistants()[1]!).getByTestId("assistant-text").textContent).toBe("November: 412 covers.");
    expect(assistants()[2]!.dataset.streaming).toBe("true");
    act(() => net.ask.send(sse(3, "done", { finish_reason: "stop" })));
    await until(() => assistants()[2]!.dataset.streaming === "false", "the question's end");
    expect(within(assistants()[2]!).getByTestId("assistant-text").textContent).toBe("T4 seats six.");
    // Appended once, however often the tasks were asked for since.
    await until(() => polls(net.calls) >= 2, "a poll after an answer ended");
    expect(screen.getAllByTestId("task-note")).toHaveLength(1);
    expect(net.calls.filter((c) => c.url === "/api/v1/resos/stream/chat/msg_f")).toHaveLength(1);
  });

  it("polls nothing more once every task has ended and its result is shown", async () => {
    const stored = {
      ...CONVERSATION,
      messages: [
        ...CONVERSATION.messages,
        { id: "p3", message_id: "msg_f", role: "user", content: "The task finished.", status: "complete", model: null, created_at: "2026-11-26T10:01:00Z", task_id: "tsk_1" },
        { id: "p4", message_id: "msg_f", role: "assistant", content: "November: 412 covers.", status: "complete", model: "scripted", created_at: "2026-11-26T10:01:01Z", task_id: "tsk_1" },
      ],
    };
    const net = gateway([ended("completed", "2026-11-26T10:01:00Z", "msg_f")]);
    const base = globalThis.fetch;
    vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) =>
      url === "/api/v1/resos/conversations/conv_1" ? Promise.resolve(jsonResponse(200, stored)) : base(url, init),
    );
    render(<App />);
    const note = await screen.findByTestId("task-note");
    expect(within(note).getByText("The task finished.")).toBeTruthy();
    await until(() => polls(net.calls) === 1, "the first poll");
    await new Promise((r) => setTimeout(r, 2500));
    expect(polls(net.calls)).toBe(1);
    expect(net.calls.some((c) => c.url.startsWith("/api/v1/resos/stream/chat/"))).toBe(false);
  });
});
