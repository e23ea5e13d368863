import { describe, expect, it } from "vitest";
import { SseParser, readEventStream, type SseEvent } from "./parser";

function parse(chunks: string[]): { events: SseEvent[]; comments: string[]; parser: SseParser } {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const parser = new SseParser({ onEvent: (e) => events.push(e), onComment: (c) => comments.push(c) });
  for (const chunk of chunks) parser.feed(chunk);
  return { events, comments, parser };
}

const STREAM =
  'id: 1\nevent: meta\ndata: {"message_id":"msg_1"}\n\n' +
  ": ping\n\n" +
  'id: 2\nevent: token\ndata: {"text":"Hello"}\n\n' +
  'id: 3\nevent: done\ndata: {"finish_reason":"stop"}\n\n';

describe("SseParser", () => {
  it("reads ids, event names and data", () => {
    const { events, parser } = parse([STREAM]);
    expect(events).toEqual([
      { id: "1", event: "meta", data: '{"message_id":"msg_1"}' },
      { id: "2", event: "token", data: '{"text":"Hello"}' },
      { id: "3", event: "done", data: '{"finish_reason":"stop"}' },
    ]);
    expect(parser.lastEventId).toBe("3");
  });

  it("gives the same events however the text is split", () => {
    const whole = parse([STREAM]).events;
    for (let size = 1; size <= 7; size++) {
      const chunks: string[] = [];
      for (let i = 0; i < STREAM.length; i += size) chunks.push(STREAM.slice(i, i + size));
      expect(parse(chunks).events).toEqual(whole);
    }
    // A split between every pair of characters, one pair at a time.
    for (let cut = 1; cut < STREAM.length; cut++) {
      expect(parse([STREAM.slice(0, cut), STREAM.slice(cut)]).events).toEqual(whole);
    }
  });

  it("accepts CRLF, CR and LF line ends, even a CRLF split across chunks", () => {
    const crlf = STREAM.replace(/\n/g, "\r\n");
    const cr = STREAM.replace(/\n/g, "\r");
    const whole = parse([STREAM]).events;
    expect(parse([crlf]).events).toEqual(whole);
    expect(parse([cr]).events).toEqual(whole);
    const at = crlf.indexOf("\r\n") + 1;
    expect(parse([crlf.slice(0, at), crlf.slice(at)]).events).toEqual(whole);
  });

  it("joins several data lines with newlines", () => {
    const { events } = parse(["event: token\ndata: first\ndata:second\ndata:  third\n\n"]);
    expect(events).toEqual([{ event: "token", data: "first\nsecond\n third" }]);
  });

  it("passes comments aside and never as events", () => {
    const { events, comments } = parse([": ping\n\n:\n\n: hello there\ndata: x\n\n"]);
    expect(comments).toEqual(["ping", "", "hello there"]);
    expect(events).toEqual([{ event: "message", data: "x" }]);
  });

  it("keeps the last id across events that set none, but only reports an event's own", () => {
    const { events, parser } = parse(["id: 7\ndata: a\n\ndata: b\n\n"]);
    expect(events[0]?.id).toBe("7");
    expect(events[1]?.id).toBeUndefined();
    expect(parser.lastEventId).toBe("7");
  });

  it("does not dispatch an event whose blank line has not arrived", () => {
    const { events } = parse(['id: 1\nevent: token\ndata: {"text":"a"}\n']);
    expect(events).toEqual([]);
  });

  it("ignores a leading byte-order mark and unknown fields", () => {
    const { events } = parse(["\ufeffdata: x\nfoo: bar\n\n"]);
    expect(events).toEqual([{ event: "message", data: "x" }]);
  });
});

describe("readEventStream", () => {
  it("decodes UTF-8 split inside a character", async () => {
    const bytes = new TextEncoder().encode('event: token\ndata: {"text":"café ☕"}\n\n');
    const split = bytes.length - 6;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, split));
        controller.enqueue(bytes.slice(split));
        controller.close();
      },
    });
    const events: SseEvent[] = [];
    await readEventStream(body, new SseParser({ onEvent: (e) => events.push(e) }));
    expect(events).toEqual([{ event: "token", data: '{"text":"café ☕"}' }]);
  });
});
