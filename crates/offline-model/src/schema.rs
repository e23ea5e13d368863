//! What a tool's input schema says about each property, with local `$ref`s,
//! `anyOf`/`oneOf`/`allOf` and nullable types resolved into one flat description.

use serde_json::Value;

/// Schemas nest; a cycle of `$ref`s must not hang the model.
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Unknown,
}

#[derive(Debug, Clone)]
pub(super) struct Property {
    pub name: String,
    pub kind: Kind,
    pub format: Option<String>,
    pub pattern: Option<String>,
    pub description: String,
    /// The allowed values, from `enum` or a `oneOf` of `const`s.
    pub values: Vec<String>,
    pub minimum: Option<i64>,
    pub maximum: Option<i64>,
    pub required: bool,
}

/// The properties of an object schema, in the schema's order.
pub(super) fn properties(schema: &Value) -> Vec<Property> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, node)| {
            let mut property = describe(schema, name, node);
            property.required = required.contains(&name.as_str());
            property
        })
        .collect()
}

fn describe(root: &Value, name: &str, node: &Value) -> Property {
    let mut leaves = Vec::new();
    flatten(root, node, 0, &mut leaves);
    let first_str = |key: &str| {
        leaves
            .iter()
            .find_map(|leaf| leaf.get(key).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let first_int = |key: &str| leaves.iter().find_map(|leaf| leaf.get(key)?.as_i64());
    let description = node
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| first_str("description"))
        .unwrap_or_default();
    Property {
        name: name.to_owned(),
        kind: leaves
            .iter()
            .find_map(|leaf| kind_of(leaf))
            .unwrap_or(Kind::Unknown),
        format: first_str("format"),
        pattern: first_str("pattern"),
        description,
        values: allowed_values(&leaves),
        minimum: first_int("minimum"),
        maximum: first_int("maximum"),
        required: false,
    }
}

/// The schemas a value must match, with references followed and combinators opened.
fn flatten<'a>(root: &'a Value, node: &'a Value, depth: usize, out: &mut Vec<&'a Value>) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(target) = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
    {
        flatten(root, target, depth + 1, out);
    }
    let mut combined = false;
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(options) = node.get(key).and_then(Value::as_array) {
            combined = true;
            for option in options {
                flatten(root, option, depth + 1, out);
            }
        }
    }
    if !combined || node.get("type").is_some() || node.get("enum").is_some() {
        out.push(node);
    }
}

fn kind_of(schema: &Value) -> Option<Kind> {
    let name = match schema.get("type")? {
        Value::String(name) => name.as_str(),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .find(|name| *name != "null")?,
        _ => return None,
    };
    Some(match name {
        "string" => Kind::String,
        "integer" => Kind::Integer,
        "number" => Kind::Number,
        "boolean" => Kind::Boolean,
        "array" => Kind::Array,
        "object" => Kind::Object,
        _ => return None,
    })
}

fn allowed_values(leaves: &[&Value]) -> Vec<String> {
    let mut values = Vec::new();
    for leaf in leaves {
        if let Some(options) = leaf.get("enum").and_then(Value::as_array) {
            values.extend(options.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        if let Some(constant) = leaf.get("const").and_then(Value::as_str) {
            values.push(constant.to_owned());
        }
    }
    values.dedup();
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_refs_nullable_types_and_consts() {
        let schema = json!({
            "$defs": {
                "Status": {"enum": ["request", "approved"], "type": "string"},
                "Visibility": {"oneOf": [
                    {"const": "internal", "type": "string"},
                    {"const": "guest", "type": "string"}
                ]}
            },
            "properties": {
                "status": {
                    "anyOf": [{"$ref": "#/$defs/Status"}, {"type": "null"}],
                    "description": "New status."
                },
                "visibility": {"anyOf": [{"$ref": "#/$defs/Visibility"}, {"type": "null"}]},
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 100}
            },
            "required": ["status"],
            "type": "object"
        });
        let props = properties(&schema);
        let status = props.iter().find(|p| p.name == "status").unwrap();
        assert_eq!(status.values, ["request", "approved"]);
        assert_eq!(status.kind, Kind::String);
        assert!(status.required);
        assert_eq!(status.description, "New status.");
        let visibility = props.iter().find(|p| p.name == "visibility").unwrap();
        assert_eq!(visibility.values, ["internal", "guest"]);
        let limit = props.iter().find(|p| p.name == "limit").unwrap();
        assert_eq!(
            (limit.kind, limit.minimum, limit.maximum),
            (Kind::Integer, Some(1), Some(100))
        );
        assert!(!limit.required);
    }
}
