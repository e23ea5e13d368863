// JSON shapes of the gateway's API (see the README's "The chat API").

export interface User {
  subject: string;
  name: string;
  email?: string | null;
  roles: string[];
}

export type AuthStatus =
  | { authenticated: false; login_url: string; model: string }
  | { authenticated: true; csrf_token: string; user: User; model: string };

export interface ConversationSummary {
  id: string;
  title: string;
  created_at: string;
  updated_at: string;
}

export interface StoredToolCall {
  id: string;
  server: string;
  tool: string;
  arguments: unknown;
  status: string;
  duration_ms: number | null;
  summary: string | null;
  created_at: string;
}

export interface StoredMessage {
  id: string;
  message_id: string | null;
  role: "user" | "assistant";
  content: string | null;
  status: string;
  model: string | null;
  created_at: string;
  tool_calls?: StoredToolCall[];
}

export interface Conversation extends ConversationSummary {
  messages: StoredMessage[];
}

/** The gateway's error envelope. */
export interface ErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

export const OFFLINE_MODEL = "maitred-offline";

// The stream's events, by name.
export interface MetaEvent {
  conversation_id: string;
  message_id: string;
  model: string;
  fallback_from?: string;
}
export interface TokenEvent {
  text: string;
}
export interface ToolCallEvent {
  id: string;
  server: string;
  tool: string;
  title: string;
  arguments: unknown;
}
export interface ApprovalRequiredEvent extends ToolCallEvent {
  expires_at: string;
}
export type ToolResultStatus = "ok" | "error" | "denied" | "unavailable";
export interface ToolResultEvent {
  id: string;
  status: ToolResultStatus;
  duration_ms: number;
  summary: string;
}
export interface UsageEvent {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
export interface ErrorEvent {
  code: string;
  message: string;
}
export type FinishReason = "stop" | "cancelled" | "max_iterations" | "error";
export interface DoneEvent {
  finish_reason: FinishReason;
}

export type ChatEvent =
  | { type: "meta"; data: MetaEvent }
  | { type: "token"; data: TokenEvent }
  | { type: "tool_call"; data: ToolCallEvent }
  | { type: "approval_required"; data: ApprovalRequiredEvent }
  | { type: "tool_result"; data: ToolResultEvent }
  | { type: "usage"; data: UsageEvent }
  | { type: "error"; data: ErrorEvent }
  | { type: "done"; data: DoneEvent };
