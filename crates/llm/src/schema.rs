//! Tool names and input schemas as OpenAI-style function calling wants them: names
//! within `^[a-zA-Z0-9_-]{1,64}$`, and schemas with every `$ref` inlined (several
//! OpenAI-compatible servers reject references) and no meta keywords.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `server__tool`, made valid and unique-preserving when it has to be shortened.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let raw = format!("{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= 64 && clean == raw {
        return clean;
    }
    // Changed or too long: keep a readable prefix and a hash of the original.
    let digest = hex::encode(&Sha256::digest(raw.as_bytes())[..4]);
    let keep = clean.len().min(64 - digest.len() - 1);
    format!("{}_{digest}", &clean[..keep])
}

/// The schema with `$ref`s to `$defs`/`definitions` replaced by their targets.
pub fn for_model(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = inline(schema, &defs, 0);
    if let Value::Object(map) = &mut out {
        for key in ["$schema", "$defs", "definitions", "$id", "title"] {
            map.remove(key);
        }
        map.entry("type").or_insert_with(|| Value::from("object"));
        map.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    } else {
        out = serde_json::json!({ "type": "object", "properties": {} });
    }
    out
}

/// References deeper than this are cut to `{}` (a recursive type would never end).
const MAX_DEPTH: usize = 12;

fn inline(value: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    match value {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                let name = reference.rsplit('/').next().unwrap_or_default();
                return match defs.get(name) {
                    Some(target) if depth < MAX_DEPTH => inline(target, defs, depth + 1),
                    _ => Value::Object(Map::new()),
                };
            }
            Value::Object(
                map.iter()
                    .filter(|(k, _)| k.as_str() != "$defs" && k.as_str() != "definitions")
                    .map(|(k, v)| (k.clone(), inline(v, defs, depth)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline(v, defs, depth)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_stay_valid_and_distinct() {
        assert_eq!(exposed_name("resos", "getCustomers"), "resos__getCustomers");
        let odd = exposed_name("files", "read.file/v2");
        assert!(odd.starts_with("files__read_file_v2_"), "{odd}");
        assert_ne!(odd, exposed_name("files", "read_file_v2"));
        let long = exposed_name("server", &"x".repeat(100));
        assert!(long.len() <= 64);
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }

    #[test]
    fn references_are_inlined() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "status": { "$ref": "#/$defs/Status" } },
            "$defs": { "Status": { "type": "string", "enum": ["a", "b"] } }
        });
        assert_eq!(
            for_model(&schema),
            json!({ "type": "object", "properties": { "status": { "type": "string", "enum": ["a", "b"] } } })
        );
        assert_eq!(
            for_model(&json!({})),
            json!({ "type": "object", "properties": {} })
        );
    }
}
