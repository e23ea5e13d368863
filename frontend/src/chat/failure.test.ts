import { describe, expect, it } from "vitest";
import { HttpError, NetworkError } from "../api/http";
import { failureFromError, failureFromEvent } from "./failure";

const retry = { question: "q" };

describe("failureFromError", () => {
  it("asks to sign in again on 401", () => {
    const failure = failureFromError(new HttpError(401, "AUTHENTICATION_ERROR", "sign in first"), retry);
    expect(failure.signIn).toBe(true);
    expect(failure.message).toMatch(/Sign in again/);
  });

  it("counts down a 429's Retry-After instead of repeating the wait in words", () => {
    const error = new HttpError(429, "RATE_LIMIT_EXCEEDED", "too many requests: 3 answers at once; retry in 12 s", 12);
    const failure = failureFromError(error, retry);
    expect(failure.retryAfter).toBe(12);
    expect(failure.message).toBe("Too many requests: 3 answers at once.");
    expect(failure.retry).toEqual(retry);
  });

  it("offers no retry for a question the gateway refuses as such", () => {
    const failure = failureFromError(new HttpError(413, "INVALID_REQUEST", "the question is longer than 8000 characters"), retry);
    expect(failure.retry).toBeNull();
    expect(failure.message).toBe("The question is longer than 8000 characters.");
  });

  it("says when the network, not the gateway, failed", () => {
    expect(failureFromError(new NetworkError(new TypeError("x")), retry).title).toBe("No connection");
  });
});

describe("failureFromEvent", () => {
  it("names the model's trouble and keeps the gateway's message", () => {
    const failure = failureFromEvent({ code: "model_timeout", message: "The model took too long." }, retry);
    expect(failure.title).toBe("The language model took too long");
    expect(failure.message).toBe("The model took too long.");
  });
});
