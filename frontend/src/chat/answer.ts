// An assistant answer as the transcript shows it, built from stream events (live) or
// from stored rows (a conversation opened later). Pure functions, so both are tested.

import type {
  ChatEvent,
  Conversation,
  ErrorEvent,
  FinishReason,
  StoredMessage,
  StoredToolCall,
  UsageEvent,
} from "../api/types";

export type ToolStatus = "running" | "waiting" | "ok" | "error" | "denied" | "unavailable";

export interface Approval {
  expiresAt: string;
  decision: "pending" | "sending" | "approved" | "denied";
  problem?: string;
}

export interface ToolView {
  id: string;
  server: string;
  tool: string;
  title: string;
  arguments: unknown;
  status: ToolStatus;
  durationMs?: number;
  summary?: string;
  approval?: Approval;
  /** Ended by a stop or a restart rather than by its own result (shown as an error). */
  stopped?: boolean;
}

export interface Answer {
  /** The generation's id (`message_id`), once known. */
  messageId: string | null;
  text: string;
  tools: ToolView[];
  model: string | null;
  fallbackFrom: string | null;
  streaming: boolean;
  finish: FinishReason | null;
  error: ErrorEvent | null;
  usage: UsageEvent | null;
  /** Text after a tool call starts a new paragraph, as the stored rows do. */
  afterTool: boolean;
}

export type Turn =
  | { kind: "user"; key: string; text: string; unsent?: boolean }
  | { kind: "assistant"; key: string; answer: Answer };

export function emptyAnswer(messageId: string | null = null): Answer {
  return {
    messageId,
    text: "",
    tools: [],
    model: null,
    fallbackFrom: null,
    streaming: true,
    finish: null,
    error: null,
    usage: null,
    afterTool: false,
  };
}

function updateTool(answer: Answer, id: string, change: (tool: ToolView) => ToolView): ToolView[] {
  return answer.tools.map((tool) => (tool.id === id ? change(tool) : tool));
}

export function applyEvent(answer: Answer, event: ChatEvent): Answer {
  switch (event.type) {
    case "meta":
      return {
        ...answer,
        messageId: event.data.message_id,
        model: event.data.model,
        fallbackFrom: event.data.fallback_from ?? answer.fallbackFrom,
      };
    case "token": {
      const needsBreak = answer.afterTool && answer.text !== "" && !answer.text.endsWith("\n\n");
      return {
        ...answer,
        text: answer.text + (needsBreak ? "\n\n" : "") + event.data.text,
        afterTool: false,
      };
    }
    case "tool_call": {
      const { id, server, tool, title } = event.data;
      if (answer.tools.some((t) => t.id === id)) return answer;
      return {
        ...answer,
        afterTool: true,
        tools: [...answer.tools, { id, server, tool, title, arguments: event.data.arguments, status: "running" }],
      };
    }
    case "approval_required": {
      const { id, server, tool, title, expires_at } = event.data;
      const approval: Approval = { expiresAt: expires_at, decision: "pending" };
      if (!answer.tools.some((t) => t.id === id)) {
        return {
          ...answer,
          afterTool: true,
          tools: [
            ...answer.tools,
            { id, server, tool, title, arguments: event.data.arguments, status: "waiting", approval },
          ],
        };
      }
      return { ...answer, tools: updateTool(answer, id, (t) => ({ ...t, status: "waiting", approval })) };
    }
    case "tool_result":
      return {
        ...answer,
        tools: updateTool(answer, event.data.id, (t) => ({
          ...t,
          status: event.data.status,
          durationMs: event.data.duration_ms,
          summary: event.data.summary,
          approval:
            t.approval && t.approval.decision !== "approved" && t.approval.decision !== "denied"
              ? { ...t.approval, decision: event.data.status === "denied" ? "denied" : "approved" }
              : t.approval,
        })),
      };
    case "usage":
      return { ...answer, usage: event.data };
    case "error":
      return { ...answer, error: event.data };
    case "done":
      return {
        ...answer,
        streaming: false,
        finish: event.data.finish_reason,
        // A call still open when the answer ends will not finish any more.
        tools: answer.tools.map((t) =>
          t.status === "running" || t.status === "waiting"
            ? { ...t, status: "error", stopped: true, summary: t.summary ?? "Stopped before it finished." }
            : t,
        ),
      };
  }
}

export function setApproval(answer: Answer, toolId: string, change: Partial<Approval>): Answer {
  return {
    ...answer,
    tools: updateTool(answer, toolId, (t) => (t.approval ? { ...t, approval: { ...t.approval, ...change } } : t)),
  };
}

/** "getCustomers" → "Get customers": stored calls have no title of their own. */
export function titleFromToolName(tool: string): string {
  const words = tool
    .replace(/^.*__/, "")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[_-]+/g, " ")
    .trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function storedStatus(
  status: string,
  answerRunning: boolean,
): { status: ToolStatus; note?: string; stopped?: boolean } {
  switch (status) {
    case "ok":
    case "error":
    case "denied":
    case "unavailable":
      return { status };
    case "running":
      return answerRunning
        ? { status: "running" }
        : { status: "error", stopped: true, note: "Stopped before it finished." };
    case "cancelled":
      return { status: "error", stopped: true, note: "Stopped before it finished." };
    case "interrupted":
      return { status: "error", stopped: true, note: "Interrupted by a server restart." };
    default:
      return { status: "error", note: status };
  }
}

function storedTool(call: StoredToolCall, answerRunning: boolean): ToolView {
  const { status, note, stopped } = storedStatus(call.status, answerRunning);
  const view: ToolView = {
    id: call.id,
    server: call.server,
    tool: call.tool,
    title: titleFromToolName(call.tool),
    arguments: call.arguments,
    status,
  };
  if (stopped) view.stopped = true;
  if (call.duration_ms !== null) view.durationMs = call.duration_ms;
  const summary = call.summary ?? note;
  if (summary) view.summary = summary;
  return view;
}

/**
 * Whether the answer these rows began may still be running at the server. A model
 * turn's row is "complete" while its tool calls run or wait for approval, so a last
 * row that asked for tools means the answer goes on (or stopped without a trace).
 */
function mayBeRunning(rows: StoredMessage[]): boolean {
  const last = rows[rows.length - 1];
  return (
    rows.some((r) => r.status === "streaming" || (r.tool_calls ?? []).some((c) => c.status === "running")) ||
    (last?.status === "complete" && (last.tool_calls?.length ?? 0) > 0)
  );
}

function storedAnswer(rows: StoredMessage[], running: boolean): Answer {
  const last = rows[rows.length - 1];
  const answer = emptyAnswer(rows[0]?.message_id ?? null);
  answer.text = rows
    .map((r) => r.content ?? "")
    .filter((c) => c !== "")
    .join("\n\n");
  answer.tools = rows.flatMap((r) => (r.tool_calls ?? []).map((c) => storedTool(c, running)));
  answer.model = rows.find((r) => r.model)?.model ?? null;
  answer.streaming = running;
  if (!running) {
    const status = last?.status ?? "complete";
    answer.finish = status === "complete" ? "stop" : status === "cancelled" ? "cancelled" : "error";
    if (status === "interrupted") {
      answer.error = { code: "interrupted", message: "The server restarted, so this answer was cut short." };
    }
  }
  return answer;
}

/**
 * A stored conversation as turns: one answer per generation, however many model turns
 * it took. With `live`, the last answer is marked streaming when it may still be
 * running, so that the caller watches it again; without, everything stored is final.
 */
export function turnsFromConversation(conversation: Conversation, live = false): Turn[] {
  const turns: Turn[] = [];
  const groups: StoredMessage[][] = [];
  let group: StoredMessage[] = [];
  const flush = (): void => {
    if (group.length > 0) groups.push(group);
    const first = group[0];
    if (first) turns.push({ kind: "assistant", key: first.id, answer: storedAnswer(group, false) });
    group = [];
  };
  for (const message of conversation.messages) {
    if (message.role === "assistant") {
      if (group.length > 0 && group[0]?.message_id !== message.message_id) flush();
      group.push(message);
    } else if (message.role === "user") {
      flush();
      turns.push({ kind: "user", key: message.id, text: message.content ?? "" });
    }
  }
  flush();
  if (!live) return turns;
  const last = turns[turns.length - 1];
  const lastMessage = conversation.messages[conversation.messages.length - 1];
  if (last?.kind === "assistant") {
    const rows = groups[groups.length - 1] ?? [];
    if (mayBeRunning(rows)) turns[turns.length - 1] = { ...last, answer: storedAnswer(rows, true) };
  } else if (last?.kind === "user" && lastMessage?.message_id) {
    // Asked, and no model turn stored yet: the answer may be on its way.
    turns.push({ kind: "assistant", key: `${last.key}-answer`, answer: emptyAnswer(lastMessage.message_id) });
  }
  return turns;
}
