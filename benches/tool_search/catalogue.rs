//! The benchmark's ten servers and its routing questions, read from the text files
//! beside this one (their format is described at the top of each).

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

/// One scripted MCP server: its name and what it lists.
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) tools: Vec<Tool>,
}

/// A question, and the tool (`server__tool`) that should answer it.
pub(crate) struct Question {
    pub(crate) tool: String,
    pub(crate) text: String,
    /// Not looked at while the search's weights were chosen.
    pub(crate) held_out: bool,
}

/// The ten servers, in the order of the file.
pub(crate) fn servers() -> Vec<Server> {
    let mut servers: Vec<Server> = Vec::new();
    for line in lines(include_str!("catalogue.txt")) {
        if let Some(header) = line.strip_prefix('[') {
            let (name, _) = header.split_once(']').expect("[server] about");
            servers.push(Server {
                name: name.to_owned(),
                tools: Vec::new(),
            });
            continue;
        }
        let columns: Vec<&str> = line.split('|').map(str::trim).collect();
        let [name, title, description, parameters] = columns[..] else {
            panic!("a tool is four columns: {line}");
        };
        let mut tool = Tool::new(name.to_owned(), description.to_owned(), schema(parameters));
        if !title.is_empty() {
            tool = tool.with_title(title.to_owned());
        }
        servers
            .last_mut()
            .expect("a tool after its server")
            .tools
            .push(tool);
    }
    servers
}

/// The routing set, in the order of the file; every other question held out.
pub(crate) fn questions() -> Vec<Question> {
    lines(include_str!("questions.txt"))
        .enumerate()
        .map(|(at, line)| {
            let (tool, text) = line.split_once('|').expect("tool | question");
            Question {
                tool: tool.trim().to_owned(),
                text: text.trim().to_owned(),
                held_out: at % 2 == 1,
            }
        })
        .collect()
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// `name?: type - description; …` as a JSON Schema object.
fn schema(parameters: &str) -> Arc<Map<String, Value>> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for parameter in parameters
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, rest) = parameter.split_once(':').expect("name: type - description");
        let (kind, description) = rest.split_once(" - ").expect("type - description");
        let (name, optional) = match name.trim().strip_suffix('?') {
            Some(name) => (name, true),
            None => (name.trim(), false),
        };
        let mut property = match kind.trim() {
            "string" | "integer" | "number" | "boolean" => json!({ "type": kind.trim() }),
            "date" => json!({ "type": "string", "format": "date" }),
            "datetime" => json!({ "type": "string", "format": "date-time" }),
            "strings" => json!({ "type": "array", "items": { "type": "string" } }),
            other => {
                let values = other
                    .strip_prefix("enum(")
                    .and_then(|v| v.strip_suffix(')'))
                    .unwrap_or_else(|| panic!("unknown type {other}"));
                json!({ "type": "string", "enum": values.split('/').collect::<Vec<_>>() })
            }
        };
        property["description"] = description.trim().into();
        properties.insert(name.to_owned(), property);
        if !optional {
            required.push(name.to_owned());
        }
    }
    let mut schema = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        schema["required"] = required.into();
    }
    match schema {
        Value::Object(schema) => Arc::new(schema),
        _ => unreachable!("an object"),
    }
}

/// Arguments that fit `tool`'s input schema: a plausible value for each required
/// parameter, as a model would write them.
pub(crate) fn arguments(tool: &Tool) -> Value {
    let schema = tool.input_schema.as_ref();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for name in required {
        let property = &schema["properties"][name];
        let value = match (property["type"].as_str(), property["format"].as_str()) {
            (_, _) if property["enum"].is_array() => property["enum"][0].clone(),
            (Some("integer"), _) => json!(2),
            (Some("number"), _) => json!(20.5),
            (Some("boolean"), _) => json!(true),
            (Some("array"), _) => json!(["someone@example.com"]),
            (_, Some("date")) => json!("2026-12-01"),
            (_, Some("date-time")) => json!("2026-12-01T10:00:00Z"),
            _ => json!("example"),
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}
