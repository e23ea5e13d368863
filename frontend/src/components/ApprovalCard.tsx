import { useId, useState, type ReactElement } from "react";
import type { Approval } from "../chat/answer";
import { formatMinutesSeconds, useSecondsLeft } from "../hooks/useSecondsLeft";

export const REMEMBER_CHOICES = [0, 5, 10, 30] as const;

/** What the call will do, in full: the person approves these values, not a summary. */
function CallArguments({ value }: { value: unknown }): ReactElement | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return value === undefined || value === null ? null : <pre className="approval-args">{JSON.stringify(value, null, 2)}</pre>;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return null;
  return (
    <dl className="approval-args">
      {entries.map(([key, v]) => (
        <div key={key}>
          <dt>{key}</dt>
          <dd>{typeof v === "string" ? v : JSON.stringify(v)}</dd>
        </div>
      ))}
    </dl>
  );
}

export function ApprovalCard({
  title,
  args,
  approval,
  onDecide,
}: {
  title: string;
  args?: unknown;
  approval: Approval;
  onDecide: (approve: boolean, rememberMinutes: number) => void;
}): ReactElement {
  const [remember, setRemember] = useState(0);
  const selectId = useId();
  const left = useSecondsLeft(approval.expiresAt);
  const busy = approval.decision === "sending";
  const expired = left === 0;

  return (
    <div className="approval-card" data-testid="approval-card" role="group" aria-label={`Approval needed: ${title}`}>
      <p className="approval-question">
        <strong>This tool changes data.</strong> Allow it to run?
      </p>
      <CallArguments value={args} />
      {left !== null && (
        <p className="approval-expiry">
          {expired
            ? "The time to answer is up; it counts as denied."
            : `Denied automatically in ${formatMinutesSeconds(left)}.`}
        </p>
      )}
      {approval.problem && (
        <p className="approval-problem" role="alert">
          {approval.problem}
        </p>
      )}
      <div className="approval-actions">
        <label htmlFor={selectId} className="approval-remember">
          Remember
          <select
            id={selectId}
            data-testid="remember-minutes"
            value={remember}
            disabled={busy}
            onChange={(e) => setRemember(Number(e.target.value))}
          >
            {REMEMBER_CHOICES.map((minutes) => (
              <option key={minutes} value={minutes}>
                {minutes === 0 ? "just this once" : `for ${minutes} minutes`}
              </option>
            ))}
          </select>
        </label>
        <span className="approval-buttons">
          <button type="button" className="button" data-testid="deny-button" disabled={busy} onClick={() => onDecide(false, 0)}>
            Deny
          </button>
          <button
            type="button"
            className="button primary"
            data-testid="approve-button"
            disabled={busy}
            onClick={() => onDecide(true, remember)}
          >
            Approve
          </button>
        </span>
      </div>
    </div>
  );
}
