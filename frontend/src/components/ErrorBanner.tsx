import { useEffect, useState, type ReactElement } from "react";
import { loginUrl } from "../api/http";
import type { Failure } from "../chat/failure";
import { AlertIcon, CrossIcon } from "./icons";

function useCountdown(seconds: number | undefined): number {
  const [countdown, setCountdown] = useState({ from: seconds, left: seconds ?? 0 });
  // A new wait (another failure) starts over in this very render, not one render
  // late from an effect: React's pattern for state that follows a prop.
  let left = countdown.left;
  if (countdown.from !== seconds) {
    left = seconds ?? 0;
    setCountdown({ from: seconds, left });
  }
  useEffect(() => {
    if (!seconds) return;
    const started = Date.now();
    const timer = setInterval(() => {
      const remaining = Math.max(0, seconds - Math.floor((Date.now() - started) / 1000));
      setCountdown({ from: seconds, left: remaining });
      if (remaining === 0) clearInterval(timer);
    }, 250);
    return () => clearInterval(timer);
  }, [seconds]);
  return left;
}

export function ErrorBanner({
  failure,
  onRetry,
  onDismiss,
}: {
  failure: Failure;
  onRetry: () => void;
  onDismiss: () => void;
}): ReactElement {
  const wait = useCountdown(failure.retryAfter);
  return (
    <div className="error-banner" data-testid="error-banner" role="alert">
      <span className="error-icon">
        <AlertIcon />
      </span>
      <div className="error-text">
        <strong>{failure.title}</strong>
        <span>{failure.message}</span>
        {wait > 0 && <span className="error-wait">You can ask again in {wait} s.</span>}
      </div>
      <div className="error-actions">
        {failure.signIn && (
          <a className="button primary" href={loginUrl(window.location.pathname)}>
            Sign in again
          </a>
        )}
        {failure.retry && (
          <button type="button" className="button" data-testid="retry-button" onClick={onRetry}>
            {wait > 0 ? `Retry (${wait} s)` : "Retry"}
          </button>
        )}
        <button type="button" className="icon-button" aria-label="Dismiss" onClick={onDismiss}>
          <CrossIcon />
        </button>
      </div>
    </div>
  );
}
