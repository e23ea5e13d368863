//! The tools as the gateway knows them: what the model is offered, what the person
//! is asked to approve, and the schema a call's arguments are checked against before
//! they reach the server.

use std::sync::{Arc, OnceLock};

use maitred_core::settings::mcp_servers::ServerConfig;
use maitred_core::settings::tool_search::{Offer, ToolSearch};
use maitred_llm::ToolDef;
use maitred_llm::schema;
use rmcp::model::Tool;
use serde_json::Value;

use super::search::ToolIndex;

/// The stand-in tool's name: `<server>__connect`.
pub(super) const CONNECT_TOOL: &str = "connect";

/// A tool as the gateway knows it.
pub struct RegisteredTool {
    /// The name the model sees: `server__tool`.
    pub exposed: String,
    pub server: String,
    pub tool: String,
    /// A short human name ("Look up customers").
    pub title: String,
    pub def: ToolDef,
    /// Changes nothing, by the operator's word or a trusted server's annotation.
    pub read_only: bool,
    /// Each call waits for the person's approval.
    pub needs_approval: bool,
    /// Calls reach the server as the person (a token exchanged for theirs, or their
    /// own sign-in at it).
    pub as_person: bool,
    /// The stand-in for a server whose tools a person sees only once they have
    /// connected their account: calling it asks them to connect.
    pub connect: bool,
    /// Sent with every question, or found by search (`tools::search`).
    pub offering: Offering,
    validator: Option<jsonschema::Validator>,
}

/// How one tool reaches the model (its server's `offer`, or `pinned`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offering {
    /// With every question.
    Always,
    /// With every question while few enough tools are; else found by search.
    Auto,
    /// Found by search.
    Deferred,
}

/// Arguments that do not fit a tool's input schema: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("; "))]
pub struct InvalidArguments {
    /// At most five, each with its place in the arguments.
    pub problems: Vec<String>,
}

impl RegisteredTool {
    /// A tool as `server` lists it; `None` for a write tool of a read-only server, or
    /// one of a server whose tools are never offered and that is not pinned: neither
    /// is offered (nor called).
    pub(super) fn listed(server: &ServerConfig, as_person: bool, tool: Tool) -> Option<Self> {
        let hint = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
        let read_only = server.tool_is_read_only(&tool.name, hint);
        let needs_approval = server.tool_needs_approval(&tool.name, read_only);
        if server.read_only && !read_only {
            return None;
        }
        let offering = match server.offer {
            _ if server.tool_is_pinned(&tool.name) => Offering::Always,
            Offer::Always => Offering::Always,
            Offer::Auto => Offering::Auto,
            Offer::Deferred => Offering::Deferred,
            Offer::Never => return None,
        };
        let input = Value::Object(tool.input_schema.as_ref().clone());
        let validator = jsonschema::validator_for(&input)
            .map_err(|error| {
                tracing::warn!(tool = ?tool.name, %error, "unusable input schema; arguments go unchecked");
            })
            .ok();
        let exposed = schema::exposed_name(&server.name, &tool.name);
        let title = tool
            .title
            .clone()
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
            .unwrap_or_else(|| humanize(&tool.name));
        Some(Self {
            def: ToolDef {
                name: exposed.clone(),
                title: Some(title.clone()),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                parameters: schema::for_model(&input),
                read_only,
            },
            exposed,
            server: server.name.clone(),
            tool: tool.name.to_string(),
            title,
            read_only,
            needs_approval,
            as_person,
            connect: false,
            offering,
            validator,
        })
    }

    /// The tool that stands for a server the person has not connected: the model
    /// learns the server exists and what it is for, and calling it brings the
    /// person the "Connect <server>" card.
    pub(super) fn connect(server: &ServerConfig) -> Self {
        let exposed = schema::exposed_name(&server.name, CONNECT_TOOL);
        let about = server
            .description
            .as_deref()
            .map(|d| format!(" It is for: {d}."))
            .unwrap_or_default();
        let title = format!("Connect {}", server.name);
        let parameters = serde_json::json!({"type": "object", "properties": {}});
        Self {
            def: ToolDef {
                name: exposed.clone(),
                title: Some(title.clone()),
                description: format!(
                    "The MCP server {} needs the person to connect their own account before its tools can be used or even listed.{about} Call this when the question needs it: the person is asked to sign in, and once they have, the server's tools are available.",
                    server.name
                ),
                parameters: parameters.clone(),
                read_only: true,
            },
            exposed,
            server: server.name.clone(),
            tool: CONNECT_TOOL.to_owned(),
            title,
            read_only: true,
            needs_approval: false,
            as_person: true,
            connect: true,
            // Connecting is how the person gets the server's tools at all.
            offering: Offering::Always,
            validator: jsonschema::validator_for(&parameters).ok(),
        }
    }

    /// Checks arguments against the tool's input schema.
    pub fn validate(&self, arguments: &Value) -> Result<(), InvalidArguments> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(arguments)
            .take(5)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidArguments { problems })
        }
    }
}

#[derive(Default)]
pub struct Catalogue {
    /// Servers in the order they are configured, each server's tools in the order
    /// it lists them: the order they are offered in.
    pub tools: Vec<Arc<RegisteredTool>>,
    /// Servers that could not be listed, and why.
    pub unavailable: Vec<(String, String)>,
    /// How many tools are sent with every question before the rest are searched for.
    pub search: ToolSearch,
    /// The search index of `tools`, built once per catalogue when first needed.
    index: OnceLock<ToolIndex>,
}

impl Catalogue {
    pub fn new(
        tools: Vec<Arc<RegisteredTool>>,
        unavailable: Vec<(String, String)>,
        search: ToolSearch,
    ) -> Self {
        Self {
            tools,
            unavailable,
            search,
            index: OnceLock::new(),
        }
    }

    /// The search index of the catalogue's tools.
    pub fn index(&self) -> &ToolIndex {
        self.index.get_or_init(|| ToolIndex::new(&self.tools))
    }

    pub fn find(&self, exposed: &str) -> Option<Arc<RegisteredTool>> {
        self.tools.iter().find(|t| t.exposed == exposed).cloned()
    }

    pub fn defs(&self) -> Vec<ToolDef> {
        self.tools.iter().map(|t| t.def.clone()).collect()
    }
}

/// `getCustomerById` → "Get customer by id".
pub(crate) fn humanize(name: &str) -> String {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else if c.is_uppercase() && !word.is_empty() {
            words.push(std::mem::take(&mut word));
            word.push(c.to_ascii_lowercase());
        } else {
            word.push(c.to_ascii_lowercase());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut text = words.join(" ");
    if let Some(first) = text.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    text
}

#[cfg(test)]
impl RegisteredTool {
    pub fn for_test(exposed: &str, read_only: bool) -> Self {
        let (server, tool) = exposed.split_once("__").unwrap_or(("test", exposed));
        Self {
            exposed: exposed.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            title: humanize(tool),
            def: ToolDef {
                name: exposed.to_owned(),
                title: None,
                description: String::new(),
                parameters: Value::Object(Default::default()),
                read_only,
            },
            read_only,
            needs_approval: !read_only,
            as_person: false,
            connect: false,
            offering: Offering::Auto,
            validator: None,
        }
    }
}

#[cfg(test)]
impl RegisteredTool {
    /// A read-only tool `server__tool` with a description and parameters, offered as
    /// `offering`.
    pub fn described(
        exposed: &str,
        description: &str,
        parameters: &[&str],
        offering: Offering,
    ) -> Self {
        let properties: serde_json::Map<String, Value> = parameters
            .iter()
            .map(|p| ((*p).to_owned(), serde_json::json!({"type": "string"})))
            .collect();
        let mut tool = Self::for_test(exposed, true);
        tool.def.description = description.to_owned();
        tool.def.parameters = serde_json::json!({"type": "object", "properties": properties});
        tool.offering = offering;
        tool
    }
}

#[cfg(test)]
mod tests {
    use super::humanize;

    #[test]
    fn tool_names_read_as_words() {
        assert_eq!(humanize("getCustomerById"), "Get customer by id");
        assert_eq!(humanize("list_files"), "List files");
    }
}
