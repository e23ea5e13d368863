//! The Responses API's ids are maitred's under OpenAI's prefixes, so nothing maps
//! them but this file: a response is its answer (`resp_<hex>` is the answer's
//! `msg_<hex>`), an `mcp_call` and an `mcp_approval_request` item are the tool call
//! (`mcp_<hex>` and `mcpr_<hex>` are `tc_<hex>`), and a `message` item is the answer's
//! text between two tool calls (`msg_<hex>_<n>`, `n` its place in the output). An
//! answer's id is a UUIDv7 with 74 random bits: not guessed, and never another
//! person's to read (theirs is a 404).

use maitred_protocol::ids::{MessageId, ToolCallId};

const RESPONSE: &str = "resp_";
const CALL: &str = "mcp_";
const APPROVAL: &str = "mcpr_";

/// The hex digits after an id's prefix.
fn hex(id: &str) -> &str {
    id.split_once('_').map_or(id, |(_, hex)| hex)
}

pub fn response(message: &MessageId) -> String {
    format!("{RESPONSE}{}", hex(message.as_str()))
}

/// The answer a response id names; `None` for anything that is not one.
pub fn parse_response(id: &str) -> Option<MessageId> {
    let hex = id.strip_prefix(RESPONSE)?;
    format!("{}_{hex}", MessageId::PREFIX).parse().ok()
}

pub fn call_item(call: &ToolCallId) -> String {
    format!("{CALL}{}", hex(call.as_str()))
}

pub fn approval_item(call: &ToolCallId) -> String {
    format!("{APPROVAL}{}", hex(call.as_str()))
}

/// The tool call an `mcp_approval_request`'s id names.
pub fn parse_approval(id: &str) -> Option<ToolCallId> {
    let hex = id.strip_prefix(APPROVAL)?;
    format!("{}_{hex}", ToolCallId::PREFIX).parse().ok()
}

pub fn message_item(message: &MessageId, place: usize) -> String {
    format!("msg_{}_{place}", hex(message.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_both_ways_and_nothing_else_parses() {
        let message = MessageId::new();
        let id = response(&message);
        assert!(id.starts_with("resp_") && id.len() == 5 + 32, "{id}");
        assert_eq!(parse_response(&id), Some(message.clone()));
        let call = ToolCallId::new();
        assert_eq!(parse_approval(&approval_item(&call)), Some(call.clone()));
        assert!(call_item(&call).starts_with("mcp_"));
        for bad in [
            "",
            "resp_",
            message.as_str(),
            "resp_xyz",
            "resp_../../etc",
            &format!("{id}0"),
            &call_item(&call),
            call.as_str(),
        ] {
            assert_eq!(parse_response(bad), None, "{bad}");
            assert_eq!(parse_approval(bad), None, "{bad}");
        }
    }
}
