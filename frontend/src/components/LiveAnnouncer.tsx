import { useEffect, useRef, useState, type ReactElement } from "react";
import { nextChunk } from "../chat/announce";

const EVERY_MS = 2500;

/**
 * Reads a streaming answer politely: sentences batched every few seconds, the rest at
 * the end. A notice (a tool asking for input) is read once, when its key first comes.
 */
export function LiveAnnouncer({
  answerKey,
  text,
  streaming,
  noticeKey = null,
  notice = "",
}: {
  answerKey: string | null;
  text: string;
  streaming: boolean;
  noticeKey?: string | null;
  notice?: string;
}): ReactElement {
  const [message, setMessage] = useState("");
  const spoken = useRef({ key: answerKey, upTo: 0 });
  const latest = useRef(text);
  const noticed = useRef<string | null>(null);

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

  useEffect(() => {
    if (noticeKey === null || noticed.current === noticeKey) return;
    noticed.current = noticeKey;
    setMessage(notice);
  }, [noticeKey, notice]);

  return (
    <div className="sr-only" aria-live="polite" aria-atomic="true" data-testid="live-region">
      {message}
    </div>
  );
}
