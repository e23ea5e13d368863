// An assistant answer as the transcript shows it, built from stream events (live) or
// from stored rows (a conversation opened later). Pure functions, so both are tested.

import { taskIdOf } from "../api/tasks";
import type {
  BudgetEvent,
  ChatEvent,
  Claim,
  ConnectCard,
  Conversation,
  ErrorEvent,
  FinishReason,
  InputAction,
  InputMode,
  ResumedEvent,
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

/** A tool's request for the person's input, shown on its card while it is open. */
export interface InputRequest {
  id: string;
  mode: InputMode;
  /** Untrusted text from the MCP server. */
  message: string;
  schema?: unknown;
  url?: string;
  /** A sign-in the gateway asks for (a "Connect <server>" card): it settles by itself. */
  connect?: ConnectCard;
  expiresAt: string;
  /** `closed`: answered (here or in another tab), expired, or gone with its tool call. */
  state: "open" | "sending" | "closed";
  /** How it was answered, once known. */
  outcome?: InputAction;
  /** The gateway's `problems` with the last answer sent: the request stays open. */
  problems?: string[];
  /** Why the last answer did not go through (not a problem with a field). */
  problem?: string;
}

export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface ToolView {
  id: string;
  server: string;
  tool: string;
  title: string;
  arguments: unknown;
  /** Whom the call reaches the business system as (a server that takes delegated tokens). */
  actingAs?: string;
  status: ToolStatus;
  durationMs?: number;
  summary?: string;
  approval?: Approval;
  input?: InputRequest;
  /** The tool's latest progress report, until its result comes. */
  progress?: ToolProgress;
  /** Ended by a stop or a restart rather than by its own result (shown as an error). */
  stopped?: boolean;
}

/** An answer's claims, and where in `Answer.text` the text they count in starts. */
export interface Grounding {
  claims: Claim[];
  /** UTF-16 index in `Answer.text` of code point 0 of the claims' offsets. */
  base: number;
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
  /** Set when the server running the answer stopped and another took it over. */
  resumed: ResumedEvent | null;
  usage: UsageEvent | null;
  /** What is left of the tightest budget, after the latest model turn. */
  budget: BudgetEvent | null;
  /** Text after a tool call starts a new paragraph, as the stored rows do. */
  afterTool: boolean;
  /** Where the latest model turn's text starts in `text` (UTF-16 index): claims count from there. */
  turnStart: number;
  /** The answer's figures checked against its tool results, once they are. */
  grounding: Grounding | null;
  /**
   * Requests for input already answered, by id: a replayed `input_required` (after a
   * reconnect or a reload) for one of them must not open its form again.
   */
  resolvedInputs: Record<string, InputAction>;
}

/**
 * A question and an answer. A task's follow-up (its result, posted as a new answer)
 * carries the task's id on both: its question is a note from the task, not the person.
 */
export type Turn =
  | { kind: "user"; key: string; text: string; unsent?: boolean; messageId?: string; taskId?: string }
  | { kind: "assistant"; key: string; answer: Answer; taskId?: string };

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
    resumed: null,
    usage: null,
    budget: null,
    afterTool: false,
    turnStart: 0,
    grounding: null,
    resolvedInputs: {},
  };
}

function updateTool(answer: Answer, id: string, change: (tool: ToolView) => ToolView): ToolView[] {
  return answer.tools.map((tool) => (tool.id === id ? change(tool) : tool));
}

const isActive = (tool: ToolView): boolean => tool.status === "running" || tool.status === "waiting";

const inputOpen = (tool: ToolView): boolean => tool.input !== undefined && tool.input.state !== "closed";

const pendingApproval = (tool: ToolView): boolean =>
  tool.approval !== undefined && (tool.approval.decision === "pending" || tool.approval.decision === "sending");

/**
 * A call that asks for input or reports progress is running, so an approval it waited
 * for was granted. The stream has no event of its own for that: without this, an
 * answer watched again from its start (a reload) would ask to approve it once more.
 */
function runningNow(tool: ToolView): ToolView {
  return tool.approval && pendingApproval(tool) ? { ...tool, approval: { ...tool.approval, decision: "approved" } } : tool;
}

/** The tool's card once its request for input no longer waits: open requests close without an outcome. */
function closeInput(tool: ToolView): InputRequest | undefined {
  return tool.input && tool.input.state !== "closed" ? { ...tool.input, state: "closed" } : tool.input;
}

function inputRequired(answer: Answer, event: Extract<ChatEvent, { type: "input_required" }>["data"]): Answer {
  const resolved = answer.resolvedInputs[event.id];
  const input: InputRequest = {
    id: event.id,
    mode: event.mode,
    message: event.message,
    expiresAt: event.expires_at,
    state: resolved ? "closed" : "open",
  };
  if (event.schema !== undefined && event.schema !== null) input.schema = event.schema;
  if (typeof event.url === "string") input.url = event.url;
  if (event.connect) input.connect = event.connect;
  if (resolved) input.outcome = resolved;
  const existing = answer.tools.find((t) => t.id === event.tool_call_id);
  if (!existing) {
    const { server, tool } = event;
    return {
      ...answer,
      afterTool: true,
      tools: [
        ...answer.tools,
        {
          id: event.tool_call_id,
          server,
          tool,
          title: titleFromToolName(tool),
          arguments: {},
          status: resolved ? "running" : "waiting",
          input,
        },
      ],
    };
  }
  // Shown once: a replay of the same request keeps what the person has done with it.
  if (existing.input?.id === event.id || !isActive(existing)) return answer;
  return {
    ...answer,
    tools: updateTool(answer, existing.id, (t) => ({ ...runningNow(t), status: resolved ? "running" : "waiting", input })),
  };
}

function inputResolved(answer: Answer, event: Extract<ChatEvent, { type: "input_resolved" }>["data"]): Answer {
  const resolvedInputs = { ...answer.resolvedInputs, [event.id]: event.action };
  return {
    ...answer,
    resolvedInputs,
    tools: answer.tools.map((t) =>
      t.input?.id === event.id
        ? {
            ...t,
            status: t.status === "waiting" && !pendingApproval(t) ? "running" : t.status,
            input: { ...t.input, state: "closed", outcome: event.action, problems: undefined, problem: undefined },
          }
        : t,
    ),
  };
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
      const before = answer.text + (needsBreak ? "\n\n" : "");
      return {
        ...answer,
        text: before + event.data.text,
        turnStart: answer.afterTool ? before.length : answer.turnStart,
        afterTool: false,
      };
    }
    case "grounding":
      return { ...answer, grounding: { claims: event.data.claims, base: answer.turnStart } };
    case "tool_call": {
      const { id, server, tool, title, acting_as: actingAs } = event.data;
      if (answer.tools.some((t) => t.id === id)) return answer;
      const call: ToolView = { id, server, tool, title, arguments: event.data.arguments, status: "running" };
      return {
        ...answer,
        afterTool: true,
        tools: [...answer.tools, actingAs === undefined ? call : { ...call, actingAs }],
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
    case "input_required":
      return inputRequired(answer, event.data);
    case "input_resolved":
      return inputResolved(answer, event.data);
    case "tool_progress": {
      const { id, progress, total, message } = event.data;
      const report: ToolProgress = { progress };
      if (typeof total === "number" && total > 0) report.total = total;
      if (typeof message === "string" && message !== "") report.message = message;
      return {
        ...answer,
        tools: updateTool(answer, id, (t) =>
          isActive(t) ? { ...runningNow(t), status: inputOpen(t) ? "waiting" : "running", progress: report } : t,
        ),
      };
    }
    case "tool_result":
      return {
        ...answer,
        tools: updateTool(answer, event.data.id, (t) => ({
          ...t,
          status: event.data.status,
          durationMs: event.data.duration_ms,
          summary: event.data.summary,
          progress: undefined,
          input: closeInput(t),
          approval:
            t.approval && t.approval.decision !== "approved" && t.approval.decision !== "denied"
              ? { ...t.approval, decision: event.data.status === "denied" ? "denied" : "approved" }
              : t.approval,
        })),
      };
    case "usage":
      return { ...answer, usage: event.data };
    case "budget":
      return { ...answer, budget: event.data };
    case "error":
      return { ...answer, error: event.data };
    case "resumed":
      return { ...answer, resumed: event.data };
    case "done":
      return {
        ...answer,
        streaming: false,
        finish: event.data.finish_reason,
        // A call still open when the answer ends will not finish any more.
        tools: answer.tools.map((t) =>
          isActive(t)
            ? {
                ...t,
                status: "error",
                stopped: true,
                summary: t.summary ?? "Stopped before it finished.",
                progress: undefined,
                input: closeInput(t),
              }
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

/** Changes the request for input with this id, wherever it is; a request since replaced is left alone. */
export function setInput(answer: Answer, inputId: string, change: Partial<InputRequest>): Answer {
  if (!answer.tools.some((t) => t.input?.id === inputId)) return answer;
  return {
    ...answer,
    tools: answer.tools.map((t) => {
      if (t.input?.id !== inputId) return t;
      const input = { ...t.input, ...change };
      // Answered here: the call goes on (its `input_resolved` will say the same).
      const status = input.state === "closed" && t.status === "waiting" && !pendingApproval(t) ? "running" : t.status;
      return { ...t, status, input };
    }),
  };
}

/**
 * "getCustomers" → "Get customers": a name for the card of a call whose `tool_call`
 * (which carries the call's title) this answer has not seen, only a request for input
 * that names its tool. Calls streamed or stored carry the title the gateway gave them.
 */
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
    title: call.title,
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
  answer.text = "";
  for (const row of rows) {
    const content = row.content ?? "";
    if (content === "") continue;
    if (answer.text !== "") answer.text += "\n\n";
    if (row.grounding) answer.grounding = { claims: row.grounding.claims, base: answer.text.length };
    answer.text += content;
  }
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
    const taskId = group.map(taskIdOf).find((id) => id !== undefined);
    if (first) {
      const turn: Turn = { kind: "assistant", key: first.id, answer: storedAnswer(group, false) };
      turns.push(taskId === undefined ? turn : { ...turn, taskId });
    }
    group = [];
  };
  for (const message of conversation.messages) {
    if (message.role === "assistant") {
      if (group.length > 0 && group[0]?.message_id !== message.message_id) flush();
      group.push(message);
    } else if (message.role === "user") {
      flush();
      const turn: Turn = { kind: "user", key: message.id, text: message.content ?? "" };
      if (message.message_id) turn.messageId = message.message_id;
      const taskId = taskIdOf(message);
      if (taskId !== undefined) turn.taskId = taskId;
      turns.push(turn);
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
    const answer: Turn = { kind: "assistant", key: `${last.key}-answer`, answer: emptyAnswer(lastMessage.message_id) };
    turns.push(last.taskId === undefined ? answer : { ...answer, taskId: last.taskId });
  }
  return turns;
}
