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
// types (crates/gateway/src/bindings.rs): they cannot drift from what the server sends.
// A `ChatEvent` is one SSE frame: `type` is its `event:` name, `data` its parsed `data:`.
export { CHAT_EVENT_NAMES } from "./generated";
export type {
  Account,
  AccountList,
  AccountStatus,
  AdminAccount,
  AdminAccountList,
  ApprovalRequiredEvent,
  BudgetEvent,
  ChatEvent,
  Claim,
  ClaimKind,
  ClaimStatus,
  ClientKind,
  ConnectCard,
  ConnectReason,
  ConnectStart,
  Conversation,
  ConversationSummary,
  Disconnected,
  DoneEvent,
  ErrorEvent,
  FinishReason,
  GroundingEvent,
  InputAction,
  InputMode,
  InputRequiredEvent,
  InputResolvedEvent,
  MetaEvent,
  ResumedEvent,
  StoredMessage,
  StoredToolCall,
  Task,
  TaskInput,
  TaskList,
  TaskStatus,
  TokenEvent,
  ToolCallEvent,
  ToolProgressEvent,
  ToolResultEvent,
  ToolResultStatus,
  UsageEvent,
} from "./generated";

/** The gateway's error envelope. */
export interface ErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

export const OFFLINE_MODEL = "maitred-offline";
