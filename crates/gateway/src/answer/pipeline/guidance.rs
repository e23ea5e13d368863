//! What a model that got a tool's arguments wrong is told besides the problem: the
//! arguments the tool takes (a small model is sent its tools without their prose),
//! the tool's filter language and fields when it has one, and a call that fits.

use serde_json::{Map, Value, json};

use maitred_llm::ToolDef;

/// Where a tool's description explains its filter (the resOS tools': "Filter with
/// customQuery: … Example: `…`. Fields: …").
const FILTER_HELP: &str = "Filter with customQuery";

/// The arguments `def` takes, its filter help if any, and an example call.
pub(super) fn for_arguments(def: &ToolDef) -> String {
    let mut text = String::new();
    let arguments = arguments(&def.parameters);
    if !arguments.is_empty() {
        text.push_str(&format!(" Its arguments: {}.", arguments.join("; ")));
    }
    if let Some(help) = filter_help(&def.description) {
        text.push_str(&format!(" {help}"));
    }
    text.push_str(&format!(
        " A call that fits: {} {}.",
        def.name,
        example(def)
    ));
    text
}

/// A refusal of a filter by the tool itself (a field the resource does not have, a
/// `:` where an operator goes): the tool's filter help, when its message lacks it.
pub(super) fn for_filter(def: &ToolDef, arguments: &Value, message: &str) -> Option<String> {
    let filtered = arguments
        .get("customQuery")
        .is_some_and(|q| q.as_str().is_some_and(|q| !q.trim().is_empty()));
    let help = filter_help(&def.description)?;
    (filtered && !message.contains("Example")).then(|| format!(" {help}"))
}

/// "limit (integer, 1 to 100): How many records…; customQuery (string): A filter…"
fn arguments(schema: &Value) -> Vec<String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut kind = type_of(property);
            if let (Some(min), Some(max)) =
                (property["minimum"].as_i64(), property["maximum"].as_i64())
            {
                kind.push_str(&format!(", {min} to {max}"));
            }
            if let Some(values) = property["enum"].as_array() {
                let values: Vec<String> = values.iter().map(Value::to_string).collect();
                kind.push_str(&format!(", one of {}", values.join(" ")));
            }
            if required.contains(&name.as_str()) {
                kind.push_str(", required");
            }
            match property["description"].as_str() {
                Some(description) if !description.is_empty() => {
                    format!("{name} ({kind}): {}", first_sentence(description))
                }
                _ => format!("{name} ({kind})"),
            }
        })
        .collect()
}

fn type_of(property: &Value) -> String {
    let kind = match &property["type"] {
        Value::String(kind) => kind.clone(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("any")
            .to_owned(),
        _ => "any".to_owned(),
    };
    // Only the formats a model must write by hand; `uint32` and the like say nothing
    // the type does not.
    match property["format"].as_str() {
        Some("date") => "date YYYY-MM-DD".to_owned(),
        Some("time") => "time HH:MM".to_owned(),
        _ => kind,
    }
}

fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}

/// The filter help of a tool's description, from "Filter with customQuery" to the
/// end of its list of fields.
fn filter_help(description: &str) -> Option<&str> {
    let start = description.find(FILTER_HELP)?;
    let rest = &description[start..];
    let end = rest
        .find("Fields:")
        .and_then(|f| rest[f..].find(". ").map(|e| f + e + 1))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// A call with the required arguments filled in, and a filter from the tool's own
/// example when it takes one.
fn example(def: &ToolDef) -> Value {
    let schema = &def.parameters;
    let mut call = Map::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            if required.contains(&name.as_str()) {
                call.insert(name.clone(), sample(property));
            }
        }
        if properties.contains_key("customQuery")
            && let Some(filter) = filter_example(&def.description)
        {
            call.insert("customQuery".to_owned(), json!(filter));
        }
        if properties.contains_key("limit") && !call.contains_key("limit") {
            call.insert("limit".to_owned(), json!(10));
        }
    }
    Value::Object(call)
}

fn filter_example(description: &str) -> Option<&str> {
    let help = filter_help(description)?;
    let after = &help[help.find("Example: `")? + "Example: `".len()..];
    Some(&after[..after.find('`')?])
}

fn sample(property: &Value) -> Value {
    if let Some(first) = property["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match (type_of(property).as_str(), property["minimum"].as_i64()) {
        ("date YYYY-MM-DD", _) => json!("2026-11-25"),
        ("time HH:MM", _) => json!("19:00"),
        ("integer" | "number", Some(min)) => json!(min.max(1)),
        ("integer" | "number", None) => json!(2),
        ("boolean", _) => json!(true),
        _ => json!("…"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn customers() -> ToolDef {
        ToolDef {
            name: "resos__getCustomers".into(),
            title: None,
            description: "List customers. Filter with customQuery: conditions `field op value` with op one of = != > >= < <= LIKE. Example: `email LIKE '%@example.com' AND bookingCount > 2`. Fields: name (text), email (text), bookingCount (integer). Sort with `field:asc`.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": 100, "description": "How many records to return, 1 to 100 (default 100)." },
                    "customQuery": { "type": ["string", "null"], "description": "A filter; see the tool description for the fields and operators." }
                },
                "additionalProperties": false
            }),
            read_only: true,
        }
    }

    #[test]
    fn a_bad_call_is_told_the_arguments_the_filter_and_an_example() {
        let told = for_arguments(&customers());
        assert!(told.contains("limit (integer, 1 to 100)"), "{told}");
        assert!(told.contains("customQuery (string)"), "{told}");
        assert!(
            told.contains("Fields: name (text), email (text), bookingCount (integer)."),
            "{told}"
        );
        assert!(!told.contains("Sort with"), "{told}");
        assert!(
            told.contains(r#"resos__getCustomers {"customQuery":"email LIKE '%@example.com' AND bookingCount > 2","limit":10}"#),
            "{told}"
        );
    }

    #[test]
    fn a_refused_filter_gets_the_filter_help_once() {
        let def = customers();
        let filtered = json!({ "customQuery": "bookings: 3" });
        let help = for_filter(&def, &filtered, "unknown field 'bookings'").unwrap();
        assert!(help.contains("Fields: name (text)"));
        assert_eq!(for_filter(&def, &json!({ "limit": 2 }), "boom"), None);
        assert_eq!(for_filter(&def, &filtered, "… Example: `x`"), None);
    }
}
