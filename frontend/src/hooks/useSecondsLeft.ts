import { useEffect, useState } from "react";

/** Whole seconds until `expiresAt` (never below 0), or null when it is not a time. */
export function secondsLeft(expiresAt: string): number | null {
  const at = Date.parse(expiresAt);
  return Number.isNaN(at) ? null : Math.max(0, Math.round((at - Date.now()) / 1000));
}

/** The seconds left, counting down once a second, for a deadline shown to the person. */
export function useSecondsLeft(expiresAt: string): number | null {
  const [left, setLeft] = useState(() => secondsLeft(expiresAt));
  useEffect(() => {
    const timer = setInterval(() => setLeft(secondsLeft(expiresAt)), 1000);
    return () => clearInterval(timer);
  }, [expiresAt]);
  return left;
}

/** 90 → "1:30". */
export function formatMinutesSeconds(seconds: number): string {
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}
