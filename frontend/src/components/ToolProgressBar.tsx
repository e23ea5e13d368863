import type { ReactElement } from "react";
import type { ToolProgress } from "../chat/answer";

const number = (n: number): string => n.toLocaleString(undefined, { maximumFractionDigits: 1 });

/** How far a tool has got, from its progress reports: a share of its total when it gave one. */
export function ToolProgressBar({ title, progress }: { title: string; progress: ToolProgress }): ReactElement {
  const { total, message } = progress;
  const known = total !== undefined;
  const share = known ? Math.min(1, Math.max(0, progress.progress / total)) : 0;
  const figures = known ? `${number(progress.progress)} of ${number(total)}` : undefined;
  return (
    <div className="tool-progress" data-testid="tool-progress">
      <div
        role="progressbar"
        className={`progress-track${known ? "" : " indeterminate"}`}
        aria-label={`${title}: progress`}
        aria-valuemin={known ? 0 : undefined}
        aria-valuemax={known ? total : undefined}
        aria-valuenow={known ? progress.progress : undefined}
        aria-valuetext={known ? [figures, message].filter(Boolean).join(", ") : message}
      >
        {/* Set through the DOM's style object, which the page's style-src policy allows. */}
        <div className="progress-fill" style={known ? { width: `${share * 100}%` } : undefined} />
      </div>
      {(message || figures) && (
        <p className="tool-progress-text">
          <span data-testid="tool-progress-message">{message}</span>
          {figures && <span className="tool-progress-figures">{figures}</span>}
        </p>
      )}
    </div>
  );
}
