//! The `_meta` keys of a `tools/call` that the gateway writes and maitred's MCP
//! server reads: the contract between the two, written once.

/// The end user a call is made for. Logged for audit, never used to decide access:
/// a delegated token names the person, and that is what reaches the backend.
pub const END_USER: &str = "maitred/endUserId";

/// The gateway's id of the tool call (`tc_…`): the server's write audit records it,
/// and the gateway's transport finds the call's person by it.
pub const TOOL_CALL: &str = "maitred/toolCallId";

/// The idempotency key of a call of a tool that writes, minted by the gateway: the
/// server passes it on (maitred's MCP server as the backend's `Idempotency-Key`), so
/// the same call sent twice acts once. A reverse-DNS prefix, as the MCP spec asks of
/// `_meta` keys since 2025-11-25.
pub const IDEMPOTENCY_KEY: &str = "io.maitred/idempotencyKey";
