// Follows one answer to its `done`, across dropped connections: a network blip, a
// proxy timeout, a laptop waking from sleep. After a drop it asks again with
// Last-Event-ID, and an event it has already seen is never passed on twice.

import { HttpError, NetworkError } from "../api/http";
import { CHAT_EVENT_NAMES, type ChatEvent } from "../api/types";
import { readEventStream, type SseEvent } from "../sse/parser";

const EVENT_NAMES = new Set<string>(CHAT_EVENT_NAMES);

export type StreamEnd =
  | { kind: "done" }
  /** The server no longer has the answer: read it from the conversation instead. */
  | { kind: "gone" }
  | { kind: "failed"; error: unknown };

export interface AnswerStreamHandlers {
  onEvent: (event: ChatEvent) => void;
  onConnection?: (state: "live" | "reconnecting") => void;
  onEnd: (end: StreamEnd) => void;
}

/** What the stream needs from the world, so tests can replace any of it. */
export interface AnswerStreamOptions {
  /** The first request (the question); omitted when resuming an answer already known. */
  open?: (signal: AbortSignal) => Promise<Response>;
  resume: (messageId: string, lastEventId: number, signal: AbortSignal) => Promise<Response>;
  messageId?: string;
  lastEventId?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** The server pings every 15 s; this long without a byte means the connection is dead. */
  idleTimeoutMs?: number;
  random?: () => number;
  /** Where `online` and `visibilitychange` are heard. */
  win?: Pick<Window, "addEventListener" | "removeEventListener">;
  doc?: Pick<Document, "addEventListener" | "removeEventListener" | "visibilityState">;
}

export function toChatEvent(raw: SseEvent): ChatEvent | null {
  if (!EVENT_NAMES.has(raw.event)) return null;
  try {
    // The event's name was checked above; its data is the gateway's JSON for that
    // event, trusted to have that event's shape (the gateway is this UI's own server).
    const data: unknown = JSON.parse(raw.data);
    return { type: raw.event, data } as ChatEvent;
  } catch {
    return null;
  }
}

export class AnswerStream {
  messageId: string | null;
  lastEventId: number;

  private closed = false;
  private finished = false;
  private current: AbortController | null = null;
  private idleTimer: ReturnType<typeof setTimeout> | null = null;
  private lastBytesAt = 0;
  private wake: (() => void) | null = null;
  private readonly opts: Required<
    Pick<AnswerStreamOptions, "initialBackoffMs" | "maxBackoffMs" | "idleTimeoutMs" | "random">
  > &
    AnswerStreamOptions;

  constructor(
    options: AnswerStreamOptions,
    private readonly handlers: AnswerStreamHandlers,
  ) {
    this.opts = {
      initialBackoffMs: 500,
      maxBackoffMs: 10_000,
      idleTimeoutMs: 45_000,
      random: Math.random,
      win: typeof window === "undefined" ? undefined : window,
      doc: typeof document === "undefined" ? undefined : document,
      ...options,
    };
    this.messageId = options.messageId ?? null;
    this.lastEventId = options.lastEventId ?? 0;
  }

  start(): this {
    this.opts.win?.addEventListener("online", this.onOnline);
    this.opts.doc?.addEventListener("visibilitychange", this.onVisibility);
    void this.run();
    return this;
  }

  /** Stops following (the answer itself goes on at the server). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.opts.win?.removeEventListener("online", this.onOnline);
    this.opts.doc?.removeEventListener("visibilitychange", this.onVisibility);
    this.clearIdle();
    this.current?.abort();
    this.wake?.();
  }

  /** Whether the stream should try again now rather than wait out its backoff. */
  private readonly onOnline = (): void => {
    this.wake?.();
  };

  private readonly onVisibility = (): void => {
    if (this.opts.doc?.visibilityState !== "visible") return;
    if (this.wake) {
      this.wake();
    } else if (this.current && Date.now() - this.lastBytesAt > 20_000) {
      // Back from sleep: the old connection is likely dead without knowing it.
      this.current.abort();
    }
  };

  private async run(): Promise<void> {
    let attempt = 0;
    let first = this.opts.open !== undefined && this.messageId === null;
    let reconnecting = false;
    while (!this.closed) {
      const controller = new AbortController();
      this.current = controller;
      try {
        const response = first
          ? await this.opts.open!(controller.signal)
          : await this.opts.resume(this.messageId!, this.lastEventId, controller.signal);
        if (this.closed) return;
        if (!response.body) throw new NetworkError(new Error("the response has no body"));
        if (reconnecting) {
          reconnecting = false;
          this.handlers.onConnection?.("live");
        }
        attempt = 0;
        this.touch(controller);
        await readEventStream(
          response.body,
          (raw) => this.receive(raw, controller),
          () => this.touch(controller),
        );
      } catch (error) {
        if (this.closed || this.finished) return;
        const fatal =
          this.messageId === null ||
          (error instanceof HttpError && (error.status === 401 || error.status === 403 || error.status === 404));
        if (fatal) {
          this.finish(
            error instanceof HttpError && error.status === 404 && this.messageId !== null
              ? { kind: "gone" }
              : { kind: "failed", error },
          );
          return;
        }
      } finally {
        this.clearIdle();
      }
      if (this.closed || this.finished) return;
      if (this.messageId === null) {
        this.finish({ kind: "failed", error: new NetworkError(new Error("the stream ended early")) });
        return;
      }
      first = false;
      if (!reconnecting) {
        reconnecting = true;
        this.handlers.onConnection?.("reconnecting");
      }
      await this.sleep(this.backoff(attempt++));
    }
  }

  private receive(raw: SseEvent, controller: AbortController): void {
    if (this.closed || this.finished) return;
    if (raw.id !== undefined && /^\d+$/.test(raw.id)) {
      const id = Number(raw.id);
      if (id <= this.lastEventId) return;
      this.lastEventId = id;
    }
    const event = toChatEvent(raw);
    if (!event) return;
    if (event.type === "meta") this.messageId = event.data.message_id;
    this.handlers.onEvent(event);
    if (event.type === "done") {
      this.finish({ kind: "done" });
      controller.abort();
    }
  }

  private finish(end: StreamEnd): void {
    if (this.finished) return;
    this.finished = true;
    this.close();
    this.handlers.onEnd(end);
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.opts.maxBackoffMs, this.opts.initialBackoffMs * 2 ** attempt);
    // Jitter, so that many tabs waking at once do not knock together.
    return Math.round(base * (0.75 + this.opts.random() * 0.5));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private touch(controller: AbortController): void {
    this.lastBytesAt = Date.now();
    this.clearIdle();
    this.idleTimer = setTimeout(() => controller.abort(), this.opts.idleTimeoutMs);
  }

  private clearIdle(): void {
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }
}
