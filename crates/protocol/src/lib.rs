//! The chat stream's wire contract, shared by every role and the web UI: ids, the
//! events an answer streams ([`events::ChatEvent`]), and the statuses of messages and
//! tool calls, and the `_meta` keys the gateway sends our MCP server. It depends on no
//! crate of maitred's; everything else depends on it.

pub mod events;
pub mod ids;
pub mod meta;
