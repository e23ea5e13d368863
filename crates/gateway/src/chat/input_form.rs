//! Checks a person's answer to a tool's form against the schema the MCP server sent,
//! before it goes back to the server. MCP restricts that schema to a flat object of
//! simple fields: strings (with `minLength`, `maxLength` and the formats `email`,
//! `uri`, `date`, `date-time`), numbers and integers (`minimum`, `maximum`),
//! booleans, and choices (`enum`, or `oneOf` / `anyOf` of `const`s; an array of them
//! for several). Each problem names its field: "party_size: must be at most 12".

use serde_json::{Map, Value};

/// What is wrong with one field of an answer; shown after the field's name.
#[derive(Debug, thiserror::Error)]
enum Unfit {
    #[error("is required")]
    Missing,
    #[error("is not a field of this form")]
    NotAField,
    #[error("has the type {0}, which a form cannot ask for")]
    UnaskableType(String),
    #[error("has no type in the form")]
    NoType,
    #[error("must be true or false")]
    NotBoolean,
    #[error("must be one of {}", .0.join(", "))]
    NotAChoice(Vec<String>),
    #[error("must be a text")]
    NotText,
    #[error("must be at least {0} characters long")]
    TooShort(u64),
    #[error("must be at most {0} characters long")]
    TooLong(u64),
    #[error("must be an email address")]
    NotEmail,
    #[error("must be a URI")]
    NotUri,
    #[error("must be a date (YYYY-MM-DD)")]
    NotDate,
    #[error("must be a date and time (RFC 3339)")]
    NotDateTime,
    #[error("must be a number")]
    NotNumber,
    #[error("must be a whole number")]
    NotWhole,
    #[error("must be at least {0}")]
    BelowMinimum(f64),
    #[error("must be at most {0}")]
    AboveMaximum(f64),
    #[error("must be a list of choices")]
    NotAList,
    #[error("must have at least {0} choices")]
    TooFewChoices(u64),
    #[error("must have at most {0} choices")]
    TooManyChoices(u64),
}

/// Every problem with `content`, one per field at most; empty when it fits.
pub(crate) fn problems(schema: &Value, content: &Map<String, Value>) -> Vec<String> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    let mut found = |name: &str, unfit: Unfit| problems.push(format!("{name}: {unfit}"));
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !content.contains_key(name) {
                found(name, Unfit::Missing);
            }
        }
    }
    for (name, value) in content {
        match properties.get(name) {
            None => found(name, Unfit::NotAField),
            Some(field) => {
                if let Err(unfit) = check(field, value) {
                    found(name, unfit);
                }
            }
        }
    }
    problems
}

fn check(field: &Value, value: &Value) -> Result<(), Unfit> {
    if let Some(choices) = choices(field) {
        return one_of(&choices, value);
    }
    match field.get("type").and_then(Value::as_str) {
        Some("string") => string(field, value),
        Some("number") => number(field, value, false),
        Some("integer") => number(field, value, true),
        Some("boolean") => value.is_boolean().then_some(()).ok_or(Unfit::NotBoolean),
        Some("array") => several(field, value),
        Some(other) => Err(Unfit::UnaskableType(other.to_owned())),
        None => Err(Unfit::NoType),
    }
}

/// The allowed values of a choice field: `enum`, or `oneOf`/`anyOf` of `const`s.
fn choices(field: &Value) -> Option<Vec<Value>> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        return Some(values.clone());
    }
    ["oneOf", "anyOf"].iter().find_map(|key| {
        let options = field.get(*key)?.as_array()?;
        Some(
            options
                .iter()
                .filter_map(|option| option.get("const").cloned())
                .collect(),
        )
    })
}

fn one_of(choices: &[Value], value: &Value) -> Result<(), Unfit> {
    if choices.contains(value) {
        return Ok(());
    }
    Err(Unfit::NotAChoice(
        choices.iter().map(Value::to_string).collect(),
    ))
}

fn string(field: &Value, value: &Value) -> Result<(), Unfit> {
    let Some(text) = value.as_str() else {
        return Err(Unfit::NotText);
    };
    let length = text.chars().count() as u64;
    if let Some(min) = field.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        return Err(Unfit::TooShort(min));
    }
    if let Some(max) = field.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        return Err(Unfit::TooLong(max));
    }
    match field.get("format").and_then(Value::as_str) {
        Some("email") if !is_email(text) => Err(Unfit::NotEmail),
        Some("uri") if url::Url::parse(text).is_err() => Err(Unfit::NotUri),
        Some("date") if chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_err() => {
            Err(Unfit::NotDate)
        }
        Some("date-time") if chrono::DateTime::parse_from_rfc3339(text).is_err() => {
            Err(Unfit::NotDateTime)
        }
        _ => Ok(()),
    }
}

/// One `@`, something before it, and a dotted domain after it: what a form can check.
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && !text.chars().any(char::is_whitespace)
        && domain.split('.').filter(|part| !part.is_empty()).count() >= 2
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

fn number(field: &Value, value: &Value, integer: bool) -> Result<(), Unfit> {
    let Some(n) = value.as_f64().filter(|_| value.is_number()) else {
        return Err(if integer {
            Unfit::NotWhole
        } else {
            Unfit::NotNumber
        });
    };
    if integer && n.fract() != 0.0 {
        return Err(Unfit::NotWhole);
    }
    if let Some(min) = field.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        return Err(Unfit::BelowMinimum(min));
    }
    if let Some(max) = field.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        return Err(Unfit::AboveMaximum(max));
    }
    Ok(())
}

/// Several choices: an array of the item choices, within `minItems`/`maxItems`.
fn several(field: &Value, value: &Value) -> Result<(), Unfit> {
    let Some(items) = value.as_array() else {
        return Err(Unfit::NotAList);
    };
    let choices = field.get("items").and_then(choices).unwrap_or_default();
    for item in items {
        one_of(&choices, item)?;
    }
    let count = items.len() as u64;
    if let Some(min) = field.get("minItems").and_then(Value::as_u64)
        && count < min
    {
        return Err(Unfit::TooFewChoices(min));
    }
    if let Some(max) = field.get("maxItems").and_then(Value::as_u64)
        && count > max
    {
        return Err(Unfit::TooManyChoices(max));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 20},
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "day": {"type": "string", "format": "date"},
                "at": {"type": "string", "format": "date-time"},
                "party": {"type": "integer", "minimum": 1, "maximum": 12},
                "budget": {"type": "number", "maximum": 99.5},
                "terrace": {"type": "boolean"},
                "seating": {"type": "string", "enum": ["inside", "outside"]},
                "course": {"type": "string", "oneOf": [{"const": "fish", "title": "Fish"}, {"const": "meat", "title": "Meat"}]},
                "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "wine"]}, "maxItems": 1}
            },
            "required": ["name", "party"]
        })
    }

    fn content(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_fitting_answer_has_no_problems() {
        let answer = content(json!({
            "name": "Ada", "email": "ada@example.com", "site": "https://example.com",
            "day": "2026-12-24", "at": "2026-12-24T19:30:00Z", "party": 4, "budget": 50.25,
            "terrace": true, "seating": "outside", "course": "fish", "extras": ["wine"]
        }));
        assert_eq!(problems(&schema(), &answer), Vec::<String>::new());
    }

    #[test]
    fn each_problem_names_its_field() {
        let answer = content(json!({
            "name": "A", "email": "ada at example", "site": "not a uri", "day": "24/12/2026",
            "at": "tomorrow", "party": 13, "budget": 100, "terrace": "yes",
            "seating": "roof", "course": "veggie", "extras": ["cake", "wine"], "secret": 1
        }));
        let found = problems(&schema(), &answer);
        for expected in [
            "name: must be at least 2 characters long",
            "email: must be an email address",
            "site: must be a URI",
            "day: must be a date (YYYY-MM-DD)",
            "at: must be a date and time (RFC 3339)",
            "party: must be at most 12",
            "budget: must be at most 99.5",
            "terrace: must be true or false",
            "seating: must be one of \"inside\", \"outside\"",
            "course: must be one of \"fish\", \"meat\"",
            "extras: must have at most 1 choices",
            "secret: is not a field of this form",
        ] {
            assert!(
                found.contains(&expected.to_owned()),
                "{expected} not in {found:?}"
            );
        }
        assert_eq!(found.len(), 12);
    }

    #[test]
    fn required_fields_must_be_there_and_integers_whole() {
        let found = problems(&schema(), &content(json!({"party": 2.5})));
        assert_eq!(
            found,
            vec!["name: is required", "party: must be a whole number"]
        );
    }
}
