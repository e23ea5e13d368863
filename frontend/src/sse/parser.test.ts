import { describe, expect, it } from "vitest";
import { readEventStream, type SseEvent } from "./parser";

/** A body that sends these chunks of text, each as its own read. */
function body(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      controller.close();
    },
  });
}

async function parse(chunks: (string | Uint8Array)[]): Promise<{ events: SseEvent[]; reads: number }> {
  const events: SseEvent[] = [];
  let reads = 0;
  await readEventStream(body(chunks), (e) => events.push(e), () => reads++);
  return { events, reads };
}

const STREAM =
  'id: 1\nevent: meta\ndata: {"message_id":"msg_1"}\n\n' +
  ": ping\n\n" +
  'id: 2\nevent: token\ndata: {"text":"Hello"}\n\n' +
  'id: 3\nevent: done\ndata: {"finish_reason":"stop"}\n\n';

describe("readEventStream", () => {
  it("reads ids, event names and data", async () => {
    const { events } = await parse([STREAM]);
    expect(events).toEqual([
      { id: "1", event: "meta", data: '{"message_id":"msg_1"}' },
      { id: "2", event: "token", data: '{"text":"Hello"}' },
      { id: "3", event: "done", data: '{"finish_reason":"stop"}' },
    ]);
  });

  it("gives the same events however the text is split", async () => {
    const whole = (await parse([STREAM])).events;
    for (let size = 1; size <= 7; size++) {
      const chunks: string[] = [];
      for (let i = 0; i < STREAM.length; i += size) chunks.push(STREAM.slice(i, i + size));
      expect((await parse(chunks)).events).toEqual(whole);
    }
    // A split between every pair of characters, one pair at a time.
    for (let cut = 1; cut < STREAM.length; cut++) {
      expect((await parse([STREAM.slice(0, cut), STREAM.slice(cut)])).events).toEqual(whole);
    }
  });

  it("accepts CRLF, CR and LF line ends, even a CRLF split across chunks", async () => {
    const crlf = STREAM.replace(/\n/g, "\r\n");
    const cr = STREAM.replace(/\n/g, "\r");
    const whole = (await parse([STREAM])).events;
    expect((await parse([crlf])).events).toEqual(whole);
    expect((await parse([cr])).events).toEqual(whole);
    const at = crlf.indexOf("\r\n") + 1;
    expect((await parse([crlf.slice(0, at), crlf.slice(at)])).events).toEqual(whole);
  });

  it("joins several data lines with newlines", async () => {
    const { events } = await parse(["event: token\ndata: first\ndata:second\ndata:  third\n\n"]);
    expect(events).toEqual([{ event: "token", data: "first\nsecond\n third" }]);
  });

  it("never passes comments on as events, though they count as bytes arriving", async () => {
    const { events } = await parse([": ping\n\n:\n\n: hello there\ndata: x\n\n"]);
    expect(events).toEqual([{ event: "message", data: "x" }]);
    // A heartbeat alone is no event, but it is bytes: the connection is alive.
    expect(await parse([": ping\n\n", ": ping\n\n"])).toEqual({ events: [], reads: 2 });
  });

  it("reports only an event's own id", async () => {
    const { events } = await parse(["id: 7\ndata: a\n\ndata: b\n\n"]);
    expect(events[0]?.id).toBe("7");
    expect(events[1]?.id).toBeUndefined();
  });

  it("does not dispatch an event whose blank line has not arrived", async () => {
    const { events } = await parse(['id: 1\nevent: token\ndata: {"text":"a"}\n']);
    expect(events).toEqual([]);
  });

  it("ignores a leading byte-order mark and unknown fields", async () => {
    const { events } = await parse([new Uint8Array([0xef, 0xbb, 0xbf]), "data: x\nfoo: bar\n\n"]);
    expect(events).toEqual([{ event: "message", data: "x" }]);
  });

  it("decodes UTF-8 split inside a character", async () => {
    const bytes = new TextEncoder().encode('event: token\ndata: {"text":"café ☕"}\n\n');
    const split = bytes.length - 6;
    const { events } = await parse([bytes.slice(0, split), bytes.slice(split)]);
    expect(events).toEqual([{ event: "token", data: '{"text":"café ☕"}' }]);
  });
});
