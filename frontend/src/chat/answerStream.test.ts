import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Api, HttpError } from "../api/http";
import type { ChatEvent } from "../api/types";
import { fakeBody, fakeFetch, jsonBody, jsonResponse, sse, until } from "../test/fakeStream";
import { AnswerStream, type StreamEnd } from "./answerStream";

const META = { conversation_id: "conv_1", message_id: "msg_1", model: "maitred-offline" };

function headerOf(init: RequestInit, name: string): string | null {
  return new Headers(init.headers).get(name);
}

describe("AnswerStream", () => {
  let net: ReturnType<typeof fakeFetch>;
  let events: ChatEvent[];
  let connection: string[];
  let ended: StreamEnd[];
  const api = new Api("csrf-1");
  const win = new EventTarget();
  const visible: DocumentVisibilityState = "visible";
  const doc = Object.assign(new EventTarget(), { visibilityState: visible });

  beforeEach(() => {
    net = fakeFetch();
    vi.stubGlobal("fetch", net.fetch);
    events = [];
    connection = [];
    ended = [];
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  function follow(options: Partial<ConstructorParameters<typeof AnswerStream>[0]> = {}): AnswerStream {
    return new AnswerStream(
      {
        open: (signal) => api.ask("How many tables?", null, signal),
        resume: (id, last, signal) => api.resume(id, last, signal),
        initialBackoffMs: 1,
        random: () => 0.5,
        win,
        doc,
        ...options,
      },
      {
        onEvent: (e) => events.push(e),
        onConnection: (c) => connection.push(c),
        onEnd: (e) => ended.push(e),
      },
    ).start();
  }

  const text = (): string =>
    events.map((e) => (e.type === "token" ? e.data.text : "")).join("");

  it("resumes after a dropped connection with Last-Event-ID and shows no token twice", async () => {
    const first = fakeBody();
    const second = fakeBody();
    net.queue(first.response);
    net.queue(second.response);
    follow();

    first.send(sse(1, "meta", META) + sse(2, "token", { text: "There are " }));
    // The drop comes in the middle of event 3: its half must not count as seen.
    first.send(sse(3, "token", { text: "12 " }) + 'id: 4\nevent: token\ndata: {"te');
    await until(() => events.length === 3, "three events");
    first.drop();

    await until(() => net.calls.length === 2, "a resume request");
    const resume = net.calls[1]!;
    expect(resume.url).toBe("/api/v1/resos/stream/chat/msg_1");
    expect(headerOf(resume.init, "Last-Event-ID")).toBe("3");
    expect(resume.init.method ?? "GET").toBe("GET");

    // A server replaying one event too many must not double it on screen.
    second.send(sse(3, "token", { text: "12 " }) + sse(4, "token", { text: "tables." }));
    second.send(sse(5, "done", { finish_reason: "stop" }));
    await until(() => ended.length === 1, "the end");

    expect(text()).toBe("There are 12 tables.");
    expect(events.map((e) => e.type)).toEqual(["meta", "token", "token", "token", "done"]);
    expect(connection).toEqual(["reconnecting", "live"]);
    expect(ended).toEqual([{ kind: "done" }]);
  });

  it("keeps the last id across an event that sets none, and resumes from it", async () => {
    const first = fakeBody();
    const second = fakeBody();
    net.queue(first.response);
    net.queue(second.response);
    follow();
    first.send(sse(1, "meta", META) + sse(2, "token", { text: "A" }) + 'event: token\ndata: {"text":"B"}\n\n');
    await until(() => events.length === 3, "three events");
    first.drop();
    await until(() => net.calls.length === 2, "a resume request");
    expect(headerOf(net.calls[1]!.init, "Last-Event-ID")).toBe("2");
    second.send(sse(3, "done", { finish_reason: "stop" }));
    await until(() => ended.length === 1, "the end");
    expect(text()).toBe("AB");
  });

  it("sends the question with the CSRF token", async () => {
    const body = fakeBody();
    net.queue(body.response);
    follow();
    body.send(sse(1, "meta", META) + sse(2, "done", { finish_reason: "stop" }));
    await until(() => ended.length === 1, "the end");
    const ask = net.calls[0]!;
    expect(ask.url).toBe("/api/v1/resos/stream/chat");
    expect(ask.init.method).toBe("POST");
    expect(headerOf(ask.init, "X-CSRF-Token")).toBe("csrf-1");
    expect(headerOf(ask.init, "Content-Type")).toBe("application/json");
    expect(jsonBody(ask.init)).toEqual({ question: "How many tables?" });
  });

  it("keeps trying with backoff while the gateway is unreachable, then resumes", async () => {
    const first = fakeBody();
    const last = fakeBody();
    net.queue(first.response);
    net.queue(new TypeError("Failed to fetch"));
    net.queue(jsonResponse(502, { code: "BAD_GATEWAY", message: "proxy" }));
    net.queue(last.response);
    follow();
    first.send(sse(1, "meta", META) + sse(2, "token", { text: "A" }));
    await until(() => events.length === 2, "two events");
    first.end(); // closed without `done`: not the end of the answer
    await until(() => net.calls.length === 4, "three resumes");
    expect(net.calls.slice(1).map((c) => headerOf(c.init, "Last-Event-ID"))).toEqual(["2", "2", "2"]);
    last.send(sse(3, "token", { text: "B" }) + sse(4, "done", { finish_reason: "stop" }));
    await until(() => ended.length === 1, "the end");
    expect(text()).toBe("AB");
  });

  it("tries again at once when the browser comes back online", async () => {
    const first = fakeBody();
    const second = fakeBody();
    net.queue(first.response);
    net.queue(second.response);
    follow({ initialBackoffMs: 60_000 });
    first.send(sse(1, "meta", META));
    await until(() => events.length === 1, "meta");
    first.drop();
    await until(() => connection.length === 1, "reconnecting");
    expect(net.calls).toHaveLength(1);
    win.dispatchEvent(new Event("online"));
    await until(() => net.calls.length === 2, "a resume right away", 500);
    second.send(sse(2, "done", { finish_reason: "stop" }));
    await until(() => ended.length === 1, "the end");
  });

  it("reports a refused question (429 with Retry-After) without retrying", async () => {
    net.queue(jsonResponse(429, { code: "RATE_LIMIT_EXCEEDED", message: "too many requests" }, { "Retry-After": "17" }));
    follow();
    await until(() => ended.length === 1, "the end");
    const end = ended[0]!;
    expect(end.kind).toBe("failed");
    const error = (end as { error: unknown }).error;
    expect(error).toBeInstanceOf(HttpError);
    expect((error as HttpError).status).toBe(429);
    expect((error as HttpError).retryAfter).toBe(17);
    expect(net.calls).toHaveLength(1);
  });

  it("says the answer is gone when the server no longer has it", async () => {
    const first = fakeBody();
    net.queue(first.response);
    net.queue(jsonResponse(404, { code: "RESOURCE_NOT_FOUND", message: "generation msg_1 not found" }));
    follow();
    first.send(sse(1, "meta", META));
    await until(() => events.length === 1, "meta");
    first.drop();
    await until(() => ended.length === 1, "the end");
    expect(ended).toEqual([{ kind: "gone" }]);
  });

  it("stops following when closed, and asks nothing more", async () => {
    const first = fakeBody();
    net.queue(first.response);
    const stream = follow();
    first.send(sse(1, "meta", META));
    await until(() => events.length === 1, "meta");
    stream.close();
    first.send(sse(2, "token", { text: "late" }));
    await new Promise((r) => setTimeout(r, 20));
    expect(events).toHaveLength(1);
    expect(net.calls).toHaveLength(1);
    expect(ended).toEqual([]);
  });
});
