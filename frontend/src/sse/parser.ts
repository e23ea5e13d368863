// Reads a Server-Sent Events response body with `eventsource-parser`, which follows the
// WHATWG "event stream interpretation" over text that may split anywhere (mid-line,
// mid-field, between CR and LF).

import { createParser } from "eventsource-parser";

export interface SseEvent {
  /** The `id:` this event carried itself, if any. */
  id?: string;
  /** The `event:` name; `message` when none was given, as in the spec. */
  event: string;
  data: string;
}

/** Reads a response body to its end, passing on each event as its blank line arrives. */
export async function readEventStream(
  body: ReadableStream<Uint8Array>,
  onEvent: (event: SseEvent) => void,
  /** Called as bytes arrive, heartbeats (comments) included. */
  onBytes?: () => void,
): Promise<void> {
  const parser = createParser({
    onEvent: ({ id, event = "message", data }) => onEvent(id === undefined ? { event, data } : { id, event, data }),
  });
  let endsInCR = false;
  const feed = (text: string): void => {
    if (text === "") return;
    parser.feed(text);
    endsInCR = text.endsWith("\r");
  };
  const reader = body.getReader();
  // The decoder also drops a leading byte-order mark.
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onBytes?.();
      feed(decoder.decode(value, { stream: true }));
    }
    feed(decoder.decode());
    // The parser holds a CR that ends the text, to see whether an LF follows: none will.
    if (endsInCR) parser.feed("\n");
  } finally {
    reader.releaseLock();
  }
}
