import { useEffect, useId, useState, type ReactElement } from "react";
import type { InputAction } from "../api/types";
import { connectOutcome } from "../chat/accounts";
import type { InputRequest, ToolStatus, ToolView } from "../chat/answer";
import { ApprovalCard } from "./ApprovalCard";
import { formatArguments, formatDuration } from "./format";
import { AlertIcon, BanIcon, CheckIcon, ChevronIcon, ClockIcon, PlugIcon } from "./icons";
import { InputCard } from "./InputCard";
import { ToolProgressBar } from "./ToolProgressBar";

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

/** What became of a request for input, once it no longer waits (none: the call ended first). */
function inputOutcome(input: InputRequest): string | null {
  if (input.problem) return input.problem;
  if (input.connect && input.outcome) return connectOutcome(input.connect, input.outcome);
  switch (input.outcome) {
    case "accept":
      return input.mode === "url" ? "You opened the link and said you were done." : "You sent the details asked for.";
    case "decline":
      return "You declined the request for input.";
    case "cancel":
      return "The request for input was cancelled.";
    default:
      return null;
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
  onAnswerInput,
}: {
  tool: ToolView;
  onDecide?: (approve: boolean, rememberMinutes: number) => void;
  onAnswerInput?: (inputId: string, action: InputAction, content?: Record<string, unknown>) => void;
}): ReactElement {
  const [open, setOpen] = useState(false);
  const detailsId = useId();
  const running = tool.status === "running";
  const elapsed = useElapsed(running);
  const duration = tool.durationMs !== undefined ? formatDuration(tool.durationMs) : running ? formatDuration(elapsed) : "";
  const approval = tool.approval;
  const label = tool.stopped ? "Stopped" : STATUS_LABELS[tool.status];
  const asking = approval && tool.status === "waiting" && (approval.decision === "pending" || approval.decision === "sending");
  const input = tool.input;
  const outcome = input && input.state === "closed" ? inputOutcome(input) : null;
  const active = running || tool.status === "waiting";

  return (
    <article
      className={`tool-card status-${tool.status}`}
      id={`tool-${tool.id}`}
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
      {approval && tool.actingAs && (
        <p className="tool-acting-as" data-testid="tool-card-as">
          Made as {tool.actingAs}, not as the assistant.
        </p>
      )}
      {tool.progress && active && <ToolProgressBar title={tool.title} progress={tool.progress} />}
      {input && input.state !== "closed" && onAnswerInput && (
        <InputCard
          key={input.id}
          title={tool.title}
          input={input}
          onAnswer={(action, content) => onAnswerInput(input.id, action, content)}
        />
      )}
      {outcome && (
        <p className="tool-decision" role="status" data-testid="input-outcome" data-outcome={input?.outcome ?? "gone"}>
          {outcome}
        </p>
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
