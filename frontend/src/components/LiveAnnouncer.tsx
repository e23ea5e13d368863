import { useEffect, useRef, useState, type ReactElement } from "react";
import { nextChunk } from "../chat/announce";

const EVERY_MS = 2500;

/** Reads a streaming answer politely: sentences batched every few seconds, the rest at the end. */
export function LiveAnnouncer({
  answerKey,
  text,
  streaming,
}: {
  answerKey: string | null;
  text: string;
  streaming: boolean;
}): ReactElement {
  const [message, setMessage] = useState("");
  const spoken = useRef({ key: answerKey, upTo: 0 });
  const latest = useRef(text);

  // First of the effects, which run in order after each commit: the timer below reads
  // the newest text, and the ones below see which answer this is.
  useEffect(() => {
    latest.current = text;
    if (spoken.current.key !== answerKey) {
      // A new answer; one already there when it appeared (history) is not read out.
      spoken.current = { key: answerKey, upTo: streaming ? 0 : text.length };
    }
  }, [answerKey, text, streaming]);

  useEffect(() => {
    if (!streaming) return;
    const timer = setInterval(() => {
      const { say, upTo } = nextChunk(latest.current, spoken.current.upTo, false);
      spoken.current.upTo = upTo;
      if (say) setMessage(say);
    }, EVERY_MS);
    return () => clearInterval(timer);
  }, [streaming, answerKey]);

  useEffect(() => {
    if (streaming) return;
    const { say, upTo } = nextChunk(text, spoken.current.upTo, true);
    spoken.current.upTo = upTo;
    if (say) setMessage(say);
  }, [streaming, text]);

  return (
    <div className="sr-only" aria-live="polite" aria-atomic="true" data-testid="live-region">
      {message}
    </div>
  );
}
