import { useEffect, useId, useState, type ReactElement } from "react";
import type { ToolStatus, ToolView } from "../chat/answer";
import { ApprovalCard } from "./ApprovalCard";
import { formatArguments, formatDuration } from "./format";
import { AlertIcon, BanIcon, CheckIcon, ChevronIcon, ClockIcon, PlugIcon } from "./icons";

const STATUS_LABELS: Record<ToolStatus, string> = {
  running: "Running",
  waiting: "Waiting for you",
  ok: "Done",
  error: "Failed",
  denied: "Denied",
  unavailable: "Unavailable",
};

function StatusIcon({ status }: { status: ToolStatus }): ReactElement {
  switch (status) {
    case "running":
      return <span className="spinner" aria-hidden="true" />;
    case "waiting":
      return <ClockIcon />;
    case "ok":
      return <CheckIcon />;
    case "error":
      return <AlertIcon />;
    case "denied":
      return <BanIcon />;
    case "unavailable":
      return <PlugIcon />;
  }
}

/** Time since the card appeared, while the call runs (the server's figure replaces it). */
function useElapsed(running: boolean): number {
  const [started] = useState(() => Date.now());
  const [now, setNow] = useState(started);
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(() => setNow(Date.now()), 100);
    return () => clearInterval(timer);
  }, [running]);
  return now - started;
}

export function ToolCard({
  tool,
  onDecide,
}: {
  tool: ToolView;
  onDecide?: (approve: boolean, rememberMinutes: number) => void;
}): ReactElement {
  const [open, setOpen] = useState(false);
  const detailsId = useId();
  const running = tool.status === "running";
  const elapsed = useElapsed(running);
  const duration = tool.durationMs !== undefined ? formatDuration(tool.durationMs) : running ? formatDuration(elapsed) : "";
  const approval = tool.approval;
  const label = tool.stopped ? "Stopped" : STATUS_LABELS[tool.status];
  const asking = approval && tool.status === "waiting" && (approval.decision === "pending" || approval.decision === "sending");

  return (
    <article
      className={`tool-card status-${tool.status}`}
      data-testid="tool-card"
      data-status={tool.status}
      data-tool={tool.tool}
      aria-label={`${tool.title}: ${label}`}
    >
      <div className="tool-head">
        <span className="tool-icon">
          <StatusIcon status={tool.status} />
        </span>
        <span className="tool-title" data-testid="tool-card-title">
          {tool.title}
        </span>
        <span className="tool-status">{label}</span>
        <span className="tool-duration" data-testid="tool-card-duration">
          {duration}
        </span>
        <button
          type="button"
          className="tool-toggle"
          data-testid="tool-card-toggle"
          aria-expanded={open}
          aria-controls={detailsId}
          onClick={() => setOpen((o) => !o)}
        >
          <ChevronIcon />
          <span className="sr-only">{open ? "Hide details" : "Show details"}</span>
        </button>
      </div>
      {asking && approval && onDecide && (
        <ApprovalCard title={tool.title} args={tool.arguments} approval={approval} onDecide={onDecide} />
      )}
      {approval && !asking && approval.decision !== "pending" && (
        <p className="tool-decision">{approval.decision === "denied" ? "You denied this call." : "You approved this call."}</p>
      )}
      {open && (
        <div className="tool-details" id={detailsId} data-testid="tool-card-details">
          <div className="tool-meta">
            <span>{tool.server ? `${tool.server} · ` : ""}{tool.tool}</span>
          </div>
          <h4>Arguments</h4>
          <pre>{formatArguments(tool.arguments)}</pre>
          <h4>Result</h4>
          <p className="tool-summary">{tool.summary ?? (running || tool.status === "waiting" ? "Not finished yet." : "No summary.")}</p>
        </div>
      )}
    </article>
  );
}
