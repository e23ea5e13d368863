// Generated from the gateway's Rust types by `MAITRED_WRITE_BINDINGS=1 cargo test bindings`
// (crates/gateway/src/bindings.rs). Do not edit: change the Rust types instead.

export type ConversationId = string;

export type MessageId = string;

export type PartId = string;

export type ToolCallId = string;

export type InputId = string;

export type TaskId = string;

export type Role = "user" | "assistant" | "tool";

export type MessageStatus = "streaming" | "complete" | "cancelled" | "interrupted" | "error";

export type CallStatus = "running" | "cancelled" | "interrupted" | "ok" | "error" | "denied" | "unavailable";

export type MetaEvent = { conversation_id: ConversationId, message_id: MessageId, model: string, 
/**
 * Set on a later `meta` when the model changed: the one that could not answer.
 */
fallback_from?: string, };

export type TokenEvent = { text: string, };

export type ToolCallEvent = { id: ToolCallId, server: string, tool: string, 
/**
 * A short human text ("Looking up customers · limit 5").
 */
title: string, arguments: unknown, 
/**
 * The person the call is made as (their name), when the server takes delegated
 * tokens: it reaches the business system as them, not as the gateway.
 */
acting_as?: string, };

export type ApprovalRequiredEvent = { id: ToolCallId, server: string, tool: string, title: string, arguments: unknown, expires_at: string, };

export type InputMode = "form" | "url";

export type ConnectReason = "connect" | "reconnect" | "more_access";

export type ConnectCard = { 
/**
 * The MCP server's configured name.
 */
server: string, 
/**
 * The host of the sign-in page, shown so the person knows where they go.
 */
host: string, 
/**
 * Why: `connect` (first time), `reconnect` (the sign-in ended) or `more_access`
 * (the tool needs more scopes than were granted).
 */
reason: ConnectReason, };

export type InputRequiredEvent = { id: InputId, 
/**
 * The call that asks.
 */
tool_call_id: ToolCallId, server: string, tool: string, 
/**
 * The server's words to the person (untrusted text: show it escaped).
 */
message: string, mode: InputMode, 
/**
 * `form`: the JSON schema of the answer (a flat object of simple fields).
 */
schema?: unknown, 
/**
 * `url`: the page to open (https, or http on localhost in development).
 */
url?: string, 
/**
 * Set when the gateway itself asks the person to connect their account at this
 * MCP server (a "Connect <server>" card): `url` is the server's sign-in page,
 * and the card settles by itself once the sign-in comes back.
 */
connect?: ConnectCard, expires_at: string, };

export type InputAction = "accept" | "decline" | "cancel";

export type InputResolvedEvent = { id: InputId, action: InputAction, };

export type ToolProgressEvent = { id: ToolCallId, progress: number, total?: number, message?: string, };

export type ToolResultStatus = "ok" | "error" | "denied" | "unavailable";

export type ToolResultEvent = { id: ToolCallId, status: ToolResultStatus, duration_ms: number, summary: string, };

export type ClaimKind = "count" | "number" | "money" | "date" | "time" | "name";

export type ClaimStatus = "supported" | "unsupported";

export type Claim = { 
/**
 * As the answer writes it ("forty", "$1,200", "25 November").
 */
text: string, 
/**
 * Its span in the answer's final text, in Unicode code points (`end` excluded).
 */
start: number, end: number, kind: ClaimKind, 
/**
 * The value it states, written one way: `60`, `1200.50`, `2026-11-25` (or
 * `--11-25` without a year), `19:00`, a name as written.
 */
value: string, status: ClaimStatus, 
/**
 * The call whose result states it (the first, when several do); `null` when
 * none does.
 */
tool_call_id: ToolCallId | null, };

export type GroundingEvent = { claims: Array<Claim>, };

export type UsageEvent = { prompt_tokens: number, completion_tokens: number, total_tokens: number, };

export type BudgetEvent = { 
/**
 * `person`, `role` or `conversation`.
 */
scope: string, 
/**
 * `total`, `daily` or `monthly` (UTC).
 */
window: string, remaining_tokens: number | null, 
/**
 * In the prices' currency (US dollars in the examples).
 */
remaining_cost: number | null, };

export type ErrorEvent = { code: string, message: string, };

export type ResumedEvent = { 
/**
 * How many times this answer has been taken over, this one included.
 */
attempt: number, 
/**
 * A clear, user-safe note ("The server running this answer stopped; it goes on.").
 */
message: string, };

export type FinishReason = "stop" | "cancelled" | "max_iterations" | "error";

export type DoneEvent = { finish_reason: FinishReason, };

export type ChatEvent = { "type": "meta", "data": MetaEvent } | { "type": "token", "data": TokenEvent } | { "type": "tool_call", "data": ToolCallEvent } | { "type": "approval_required", "data": ApprovalRequiredEvent } | { "type": "input_required", "data": InputRequiredEvent } | { "type": "input_resolved", "data": InputResolvedEvent } | { "type": "tool_progress", "data": ToolProgressEvent } | { "type": "tool_result", "data": ToolResultEvent } | { "type": "grounding", "data": GroundingEvent } | { "type": "usage", "data": UsageEvent } | { "type": "budget", "data": BudgetEvent } | { "type": "error", "data": ErrorEvent } | { "type": "resumed", "data": ResumedEvent } | { "type": "done", "data": DoneEvent };

export const CHAT_EVENT_NAMES: readonly ChatEvent["type"][] = ["meta", "token", "tool_call", "approval_required", "input_required", "input_resolved", "tool_progress", "tool_result", "grounding", "usage", "budget", "error", "resumed", "done"];

export type ConversationSummary = { id: ConversationId, title: string, created_at: string, updated_at: string, };

export type StoredToolCall = { id: ToolCallId, server: string, tool: string, 
/**
 * What people were shown of the call as it streamed (its `tool_call` event's
 * title); for a call stored before titles were, its tool's name in words.
 */
title: string, arguments: unknown, status: CallStatus, duration_ms: number | null, summary: string | null, created_at: string, };

export type StoredMessage = { id: PartId, 
/**
 * The question or answer this part belongs to: the chat stream's `message_id`.
 */
message_id: MessageId | null, role: Role, content: string | null, status: MessageStatus, model: string | null, created_at: string, 
/**
 * For a model turn: the calls it made.
 */
tool_calls?: Array<StoredToolCall>, 
/**
 * On the turn that holds an answer's final text: its claims checked against the
 * answer's tool results, as the `grounding` event streamed them.
 */
grounding?: GroundingEvent, 
/**
 * Set on the parts of an answer that posts a background task's result: its
 * question is a note from the task, not something the person wrote.
 */
task_id?: TaskId, };

export type Conversation = { id: ConversationId, title: string, created_at: string, updated_at: string, 
/**
 * The questions and the answers' model turns, in order (tool results, which only
 * the model reads, are left out).
 */
messages: Array<StoredMessage>, 
/**
 * Its background tasks, oldest first (also at `…/conversations/{id}/tasks`).
 */
tasks: Array<Task>, };

export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

export type TaskInput = { message: string, 
/**
 * The form's JSON schema; none: a page to open (`url`).
 */
schema: unknown, url: string | null, };

export type Task = { id: TaskId, conversation_id: ConversationId, 
/**
 * The answer whose tool call started it, and that call.
 */
message_id: MessageId, tool_call_id: ToolCallId, server: string, tool: string, 
/**
 * What people were shown of the call ("Month report · month 2026-11").
 */
title: string, status: TaskStatus, 
/**
 * What its server last said of it ("day 12 of 30").
 */
status_message: string | null, created_at: string, updated_at: string, finished_at: string | null, 
/**
 * From its start to its end, or to now while it runs.
 */
elapsed_ms: number, 
/**
 * The answer that carries its result, once it has started (watch it at
 * `GET …/stream/chat/{id}`).
 */
follow_up_message_id: MessageId | null, 
/**
 * Why it failed.
 */
error: string | null, 
/**
 * While it waits for the person: what it asks.
 */
input: TaskInput | null, };

export type TaskList = { tasks: Array<Task>, };

export type AccountStatus = "connected" | "not_connected";

export type ClientKind = "metadata_document" | "dynamic" | "preregistered";

export type Account = { 
/**
 * The MCP server's configured name.
 */
server: string, 
/**
 * What the operator says the server is for.
 */
description: string | null, 
/**
 * The host of the MCP server.
 */
host: string, status: AccountStatus, 
/**
 * The scopes granted, once connected.
 */
scopes: Array<string>, connected_at: string | null, 
/**
 * When its access was last renewed.
 */
refreshed_at: string | null, 
/**
 * How maitred is known to the server's authorization server.
 */
client: ClientKind | null, };

export type AccountList = { accounts: Array<Account>, };

export type ConnectStart = { server: string, authorization_url: string, 
/**
 * The host of the sign-in page.
 */
host: string, expires_at: string, };

export type Disconnected = { server: string, 
/**
 * Whether the server's authorization server was told to revoke the tokens
 * (RFC 7009); they are deleted here either way.
 */
revoked_at_server: boolean, };

export type AdminAccount = { 
/**
 * The person's subject.
 */
owner: string, server: string, scopes: Array<string>, client: ClientKind | null, connected_at: string, refreshed_at: string | null, };

export type AdminAccountList = { accounts: Array<AdminAccount>, };
