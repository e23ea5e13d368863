import { HttpError, NetworkError } from "../api/http";
import type { ErrorEvent } from "../api/types";

/** What went wrong, said so a person knows what to do next. */
export interface Failure {
  title: string;
  message: string;
  /** Seconds to wait before asking again (429, 503). */
  retryAfter?: number;
  /** The session is gone: signing in again is the way out. */
  signIn?: boolean;
  /** The question to ask again; none when retrying would not help. */
  retry: { question: string; unsentKey?: string } | null;
}

/** The gateway's messages start in lower case and may repeat the wait we count down. */
function sentence(message: string, countedDown: boolean): string {
  const text = countedDown ? message.replace(/[;,.]?\s*retry in \d+ ?s\.?$/i, "") : message;
  return text.charAt(0).toUpperCase() + text.slice(1) + (/[.!?]$/.test(text) ? "" : ".");
}

export function failureFromError(error: unknown, retry: Failure["retry"]): Failure {
  if (error instanceof HttpError) {
    switch (error.status) {
      case 401:
        return {
          title: "Signed out",
          message: "Your session has ended. Sign in again to continue.",
          signIn: true,
          retry,
        };
      case 429:
        return {
          title: "Too many questions",
          message: sentence(error.message, error.retryAfter !== undefined),
          retryAfter: error.retryAfter,
          retry,
        };
      case 503:
        return {
          title: "The service is restarting",
          message: sentence(error.message, error.retryAfter !== undefined),
          retryAfter: error.retryAfter,
          retry,
        };
      case 400:
      case 413:
      case 422:
        return { title: "The question was not accepted", message: sentence(error.message, false), retry: null };
      default:
        return { title: "Something went wrong", message: sentence(error.message, false), retry };
    }
  }
  if (error instanceof NetworkError) {
    return { title: "No connection", message: error.message, retry };
  }
  return {
    title: "Something went wrong",
    message: error instanceof Error ? error.message : String(error),
    retry,
  };
}

const EVENT_TITLES: Record<string, string> = {
  model_rate_limited: "The language model is busy",
  model_busy: "The language model is busy",
  model_timeout: "The language model took too long",
  model_unreachable: "The language model could not be reached",
  interrupted: "The answer was interrupted",
  budget: "The budget is spent",
};

export function failureFromEvent(event: ErrorEvent, retry: Failure["retry"]): Failure {
  // Asking again spends from the same budget: no retry until an admin raises it.
  if (event.code === "budget") return { title: "The budget is spent", message: event.message, retry: null };
  return { title: EVENT_TITLES[event.code] ?? "The answer could not be completed", message: event.message, retry };
}
