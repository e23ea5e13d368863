// A Server-Sent Events parser after the WHATWG "event stream interpretation": fed text
// in chunks that may split anywhere (mid-line, mid-field, between CR and LF).

export interface SseEvent {
  /** The `id:` this event carried itself, if any. */
  id?: string;
  event: string;
  data: string;
}

export interface SseHandlers {
  onEvent: (event: SseEvent) => void;
  onComment?: (text: string) => void;
  onRetry?: (ms: number) => void;
}

export class SseParser {
  /** The last id seen, as the spec keeps it: it carries over events that set none. */
  lastEventId = "";

  private line = "";
  private afterCR = false;
  private started = false;
  private data: string[] = [];
  private eventType = "";
  private eventId: string | undefined;

  constructor(private readonly handlers: SseHandlers) {}

  feed(text: string): void {
    let start = 0;
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) start = 1;
    }
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (this.afterCR) {
        this.afterCR = false;
        // The LF of a CRLF whose CR ended the previous chunk (or this one's last line).
        if (c === 0x0a) {
          start = i + 1;
          continue;
        }
      }
      if (c === 0x0a || c === 0x0d) {
        this.line += text.slice(start, i);
        this.processLine(this.line);
        this.line = "";
        this.afterCR = c === 0x0d;
        start = i + 1;
      }
    }
    if (start < text.length) this.line += text.slice(start);
  }

  private processLine(line: string): void {
    if (line === "") {
      this.dispatch();
      return;
    }
    if (line.startsWith(":")) {
      this.handlers.onComment?.(line.slice(1).replace(/^ /, ""));
      return;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.data.push(value);
        break;
      case "event":
        this.eventType = value;
        break;
      case "id":
        if (!value.includes("\0")) {
          this.lastEventId = value;
          this.eventId = value;
        }
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.handlers.onRetry?.(Number(value));
        break;
      default:
        // Unknown fields are ignored, as the spec says.
        break;
    }
  }

  private dispatch(): void {
    const data = this.data;
    const event: SseEvent = {
      event: this.eventType || "message",
      data: data.join("\n"),
    };
    if (this.eventId !== undefined) event.id = this.eventId;
    this.data = [];
    this.eventType = "";
    this.eventId = undefined;
    // A block with no data line is not an event (it may still have set the id).
    if (data.length > 0) this.handlers.onEvent(event);
  }
}

/** Reads a response body to its end, feeding the parser as bytes arrive. */
export async function readEventStream(
  body: ReadableStream<Uint8Array>,
  parser: SseParser,
  onBytes?: () => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onBytes?.();
      parser.feed(decoder.decode(value, { stream: true }));
    }
    parser.feed(decoder.decode());
  } finally {
    reader.releaseLock();
  }
}
