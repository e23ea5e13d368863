//! Tool definitions that fit a model's prompt. A hosted model takes the servers'
//! definitions as they are; a small local model reads its prompt at 50-100 tokens a
//! second on a laptop, and fifteen full definitions are most of ten thousand tokens
//! before the question. For such a model (or any with a `tool_budget`) the
//! definitions are made compact, step by step, until they fit: every tool stays
//! offered and callable, with less prose about it.
//!
//! Tokens are estimated, not counted: a tokenizer per model would be one more thing
//! to ship for each. JSON and English run at about 3.5 characters a token in the
//! common tokenizers; the estimate takes 3, so it errs on the large side. Digits are
//! a token each: Qwen's tokenizer splits numbers into single digits, and a booking's
//! dates, times and phone number are mostly digits (records measured at 1.5
//! characters a token with the estimate at 3 said 2,560 characters were 850 tokens;
//! the server counted 1,652).

use serde_json::{Map, Value};

use super::ToolDef;
use maitred_core::settings::ModelProfile;

/// A small model's budget for tool definitions when its profile names none.
pub const SMALL_MODEL_TOOL_BUDGET: u32 = 2_000;

/// Characters per token the estimate assumes.
const CHARS_PER_TOKEN: usize = 3;

/// What wraps each definition on the wire (`{"type":"function","function":{...}}`, or
/// a text-mode line), in tokens.
const PER_TOOL_OVERHEAD: usize = 20;

/// Schema keywords a model does not need to make a call: the gateway checks the
/// arguments against the full schema anyway, and tells the model what is wrong.
const VALIDATION_ONLY: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "additionalProperties",
    "examples",
    "default",
];

/// The estimated size of some prompt text, in tokens.
pub fn estimate_tokens(text: &str) -> usize {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    digits + (text.chars().count() - digits).div_ceil(CHARS_PER_TOKEN)
}

/// The estimated size of tool definitions as a request carries them.
pub fn tools_tokens(tools: &[ToolDef]) -> usize {
    tools
        .iter()
        .map(|t| {
            PER_TOOL_OVERHEAD
                + estimate_tokens(&t.name)
                + estimate_tokens(&t.description)
                + estimate_tokens(&t.parameters.to_string())
        })
        .sum()
}

/// How compact the definitions were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Compaction {
    /// As the servers wrote them.
    Full,
    /// First sentence of each description; no validation keywords; property notes cut short.
    Short,
    /// No property notes at all.
    Bare,
    /// Tool descriptions cut to a line.
    Minimal,
}

/// The definitions for a model with `profile`, the level used, and their estimated
/// size. Over budget even at `Minimal`, they are sent as small as they get (a tool
/// left out could not be called at all), and the caller logs it.
pub fn fit(tools: &[ToolDef], profile: &ModelProfile) -> (Vec<ToolDef>, Compaction, usize) {
    let budget = profile
        .tool_budget
        .or(profile.small.then_some(SMALL_MODEL_TOOL_BUDGET));
    let Some(budget) = budget.map(|b| b as usize) else {
        return (tools.to_vec(), Compaction::Full, tools_tokens(tools));
    };
    let mut level = Compaction::Full;
    let mut fitted = tools.to_vec();
    loop {
        let size = tools_tokens(&fitted);
        let next = match level {
            _ if size <= budget => return (fitted, level, size),
            Compaction::Full => Compaction::Short,
            Compaction::Short => Compaction::Bare,
            Compaction::Bare => Compaction::Minimal,
            Compaction::Minimal => return (fitted, level, size),
        };
        level = next;
        fitted = tools.iter().map(|t| compact(t, level)).collect();
    }
}

fn compact(tool: &ToolDef, level: Compaction) -> ToolDef {
    let description = match level {
        Compaction::Full => tool.description.clone(),
        Compaction::Short | Compaction::Bare => first_sentence(&tool.description, 160),
        Compaction::Minimal => first_sentence(&tool.description, 70),
    };
    let notes = match level {
        Compaction::Full => None,
        Compaction::Short => Some(50),
        Compaction::Bare | Compaction::Minimal => Some(0),
    };
    let parameters = match notes {
        None => tool.parameters.clone(),
        Some(notes) => slim(&tool.parameters, notes),
    };
    ToolDef {
        description,
        parameters,
        ..tool.clone()
    }
}

/// The first sentence of `text` (to the first `. ` or line end), at most `max` chars.
fn first_sentence(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let sentence = match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    };
    cut(sentence.trim(), max)
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// A schema with only what a model needs to write a call: types, enums, required
/// fields, nested shapes, and property notes of at most `notes` chars (0: none).
fn slim(schema: &Value, notes: usize) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        if VALIDATION_ONLY.contains(&key.as_str()) {
            continue;
        }
        let value = match key.as_str() {
            "description" if notes == 0 => continue,
            "description" => match value.as_str() {
                Some(text) => Value::from(first_sentence(text, notes)),
                None => continue,
            },
            // ["string", "null"] says no more to a model than "string": an optional
            // field is one left out.
            "type" => match value.as_array() {
                Some(types) => {
                    let named: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                    match named.as_slice() {
                        [one] => (*one).clone(),
                        _ => value.clone(),
                    }
                }
                None => value.clone(),
            },
            "properties" => match value.as_object() {
                Some(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), slim(property, notes)))
                        .collect(),
                ),
                None => value.clone(),
            },
            "items" | "anyOf" | "oneOf" | "allOf" => match value {
                Value::Array(items) => Value::Array(items.iter().map(|i| slim(i, notes)).collect()),
                other => slim(other, notes),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The definitions maitred's own MCP role offers, as the gateway registers them.
    fn resos_tools() -> Vec<ToolDef> {
        let raw: Vec<Value> = serde_json::from_str(include_str!(
            // The offline model's fixture: what our MCP role lists.
            "../../offline-model/testdata/tools.json"
        ))
        .unwrap_or_default();
        raw.iter()
            .map(|t| ToolDef {
                name: t["name"].as_str().unwrap_or_default().to_owned(),
                title: t["title"].as_str().map(str::to_owned),
                description: t["description"].as_str().unwrap_or_default().to_owned(),
                parameters: crate::schema::for_model(&t["parameters"]),
                read_only: t["read_only"].as_bool().unwrap_or(true),
            })
            .collect()
    }

    #[test]
    fn a_hosted_model_gets_the_definitions_as_written() {
        let tools = resos_tools();
        assert_eq!(tools.len(), 15);
        let (sent, level, _) = fit(&tools, &ModelProfile::default());
        assert_eq!(level, Compaction::Full);
        assert_eq!(sent, tools);
    }

    #[test]
    fn a_small_model_gets_every_tool_within_its_budget() {
        let tools = resos_tools();
        let full = tools_tokens(&tools);
        let small = ModelProfile {
            small: true,
            ..ModelProfile::default()
        };
        let (sent, level, size) = fit(&tools, &small);
        assert!(size <= SMALL_MODEL_TOOL_BUDGET as usize, "{size} of {full}");
        assert!(level > Compaction::Full);
        // Every tool, with every parameter and what must be given.
        assert_eq!(sent.len(), tools.len());
        for (compact, original) in sent.iter().zip(&tools) {
            assert_eq!(compact.name, original.name);
            assert!(!compact.description.is_empty(), "{}", compact.name);
            let keys = |schema: &Value| -> Vec<String> {
                schema["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default()
            };
            assert_eq!(keys(&compact.parameters), keys(&original.parameters));
            assert_eq!(
                compact.parameters["required"], original.parameters["required"],
                "{}",
                compact.name
            );
        }
        // A budget of its own wins.
        let roomy = ModelProfile {
            small: true,
            tool_budget: Some(100_000),
            ..ModelProfile::default()
        };
        assert_eq!(fit(&tools, &roomy).1, Compaction::Full);
    }

    #[test]
    fn schemas_keep_what_a_call_needs() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "required": ["date"],
            "properties": {
                "date": { "type": "string", "format": "date", "description": "The day. Local time." },
                "status": { "type": ["string", "null"], "enum": ["a", "b"], "description": "x" },
                "people": { "type": ["integer", "null"], "minimum": 1, "maximum": 99 }
            }
        });
        assert_eq!(
            slim(&schema, 40),
            json!({
                "type": "object",
                "required": ["date"],
                "properties": {
                    "date": { "type": "string", "description": "The day." },
                    "status": { "type": "string", "enum": ["a", "b"], "description": "x" },
                    "people": { "type": "integer" }
                }
            })
        );
        assert!(
            slim(&schema, 0)["properties"]["date"]
                .get("description")
                .is_none()
        );
        assert_eq!(first_sentence("One. Two.", 100), "One.");
        assert_eq!(first_sentence("A very long line", 7), "A very…");
    }
}
