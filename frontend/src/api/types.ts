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

// The conversations API and the stream's events are generated from the gateway's Rust
// types (src/gateway/bindings.rs): they cannot drift from what the server sends.
export type {
  ApprovalRequiredEvent,
  Conversation,
  ConversationSummary,
  DoneEvent,
  ErrorEvent,
  FinishReason,
  InputAction,
  InputMode,
  InputRequiredEvent,
  InputResolvedEvent,
  MetaEvent,
  StoredMessage,
  StoredToolCall,
  TokenEvent,
  ToolCallEvent,
  ToolProgressEvent,
  ToolResultEvent,
  ToolResultStatus,
  UsageEvent,
} from "./generated";
import type {
  ApprovalRequiredEvent,
  DoneEvent,
  ErrorEvent,
  InputRequiredEvent,
  InputResolvedEvent,
  MetaEvent,
  TokenEvent,
  ToolCallEvent,
  ToolProgressEvent,
  ToolResultEvent,
  UsageEvent,
} from "./generated";

/** The gateway's error envelope. */
export interface ErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

export const OFFLINE_MODEL = "maitred-offline";

export type ChatEvent =
  | { type: "meta"; data: MetaEvent }
  | { type: "token"; data: TokenEvent }
  | { type: "tool_call"; data: ToolCallEvent }
  | { type: "approval_required"; data: ApprovalRequiredEvent }
  | { type: "input_required"; data: InputRequiredEvent }
  | { type: "input_resolved"; data: InputResolvedEvent }
  | { type: "tool_progress"; data: ToolProgressEvent }
  | { type: "tool_result"; data: ToolResultEvent }
  | { type: "usage"; data: UsageEvent }
  | { type: "error"; data: ErrorEvent }
  | { type: "done"; data: DoneEvent };
