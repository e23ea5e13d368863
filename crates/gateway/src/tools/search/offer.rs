//! What the model is offered on one turn: the tools every question gets, in the
//! catalogue's order; then, when some are deferred, `search_tools`; then the tools
//! loaded so far, in the order they were loaded. Each part only grows at its end, so
//! one turn's tools are the start of the next turn's, and the first two parts are
//! the same for every question while the catalogue stays the same.
//!
//! What is loaded is read from the conversation itself, not kept beside it: the
//! tools this question's searches listed, and the deferred tools called in it or
//! earlier in the conversation. So an answer taken over by another replica, or the
//! next question, sees what the model saw.

use std::collections::HashSet;
use std::sync::Arc;

use maitred_llm::{Message, ToolDef};
use serde_json::json;

use super::SEARCH_TOOLS;
use super::found::listed;
use crate::tools::catalogue::Offering;
use crate::tools::{Catalogue, RegisteredTool};

/// Loaded tools past this many are not sent: a model that searched this often can
/// still call what it found by name (the gateway knows every tool).
const MAX_LOADED: usize = 20;

/// The tools for one model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    pub tools: Vec<ToolDef>,
    /// Some tools are deferred: `search_tools` is among `tools`.
    pub searching: bool,
}

/// The tools a person whose policy `allows` them is offered, after `messages`.
pub fn offer(
    catalogue: &Catalogue,
    allows: impl Fn(&RegisteredTool) -> bool,
    messages: &[Message],
) -> Offered {
    let usable: Vec<&Arc<RegisteredTool>> = catalogue.tools.iter().filter(|t| allows(t)).collect();
    let would_be_sent = usable
        .iter()
        .filter(|t| t.offering != Offering::Deferred)
        .count();
    let defer_auto = would_be_sent > catalogue.search.defer_above;
    let sent = |tool: &RegisteredTool| match tool.offering {
        Offering::Always => true,
        Offering::Auto => !defer_auto,
        Offering::Deferred => false,
    };
    let mut tools: Vec<ToolDef> = usable
        .iter()
        .filter(|t| sent(t))
        .map(|t| t.def.clone())
        .collect();
    let deferred: Vec<&Arc<RegisteredTool>> = usable.iter().copied().filter(|t| !sent(t)).collect();
    if deferred.is_empty() {
        return Offered {
            tools,
            searching: false,
        };
    }
    tools.push(search_tool(&deferred));
    let mut added = HashSet::new();
    for name in loaded(messages) {
        if added.len() == MAX_LOADED {
            break;
        }
        if let Some(tool) = deferred.iter().find(|t| t.exposed == name)
            && added.insert(name)
        {
            tools.push(tool.def.clone());
        }
    }
    Offered {
        tools,
        searching: true,
    }
}

/// Whether some of the catalogue's tools are (or may be) found by search rather
/// than sent: then naming every tool is what search is there to avoid.
pub fn defers(catalogue: &Catalogue) -> bool {
    catalogue.tools.len() > catalogue.search.defer_above
        || catalogue
            .tools
            .iter()
            .any(|t| t.offering == Offering::Deferred)
}

/// The gateway's own tool, told which servers it searches: the model learns what
/// exists beyond the tools it sees.
fn search_tool(deferred: &[&Arc<RegisteredTool>]) -> ToolDef {
    let mut servers: Vec<&str> = Vec::new();
    for tool in deferred {
        if !servers.contains(&tool.server.as_str()) {
            servers.push(&tool.server);
        }
    }
    ToolDef {
        name: SEARCH_TOOLS.to_owned(),
        title: Some("Search tools".to_owned()),
        description: format!(
            "Finds tools by what they do. Besides the tools listed here, {} more are \
             available, from: {}. Describe the task in a few words (for example \"refund an \
             invoice\" or \"next week's meetings\"): the best matching tools are returned, and \
             you can call them from your next step on.",
            deferred.len(),
            servers.join(", ")
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What the tool should do, in a few words",
                },
            },
            "required": ["query"],
        }),
        read_only: true,
    }
}

/// The tools loaded by `messages`, in the order they were: deferred tools called
/// earlier in the conversation, then in this question (the last user message on) the
/// tools each search listed and those called.
fn loaded(messages: &[Message]) -> Vec<&str> {
    let asked = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0);
    let mut names = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let Message::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for call in tool_calls {
            if call.name != SEARCH_TOOLS {
                names.push(call.name.as_str());
            } else if at > asked {
                names.extend(answer_to(messages, &call.id).into_iter().flat_map(listed));
            }
        }
    }
    names
}

/// The result the conversation holds for call `id`.
fn answer_to<'m>(messages: &'m [Message], id: &str) -> Option<&'m str> {
    messages.iter().find_map(|m| match m {
        Message::Tool {
            tool_call_id,
            content,
        } if tool_call_id == id => Some(content.as_str()),
        _ => None,
    })
}
