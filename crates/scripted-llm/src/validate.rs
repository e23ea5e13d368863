//! The request checks a real provider makes, with OpenAI's wording, so a
//! gateway bug in how it builds requests fails here instead of in production.

use serde_json::{Map, Value};

/// A 400 `invalid_request_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

fn invalid(
    message: impl Into<String>,
    param: Option<String>,
    code: Option<&'static str>,
) -> Invalid {
    Invalid {
        message: message.into(),
        param,
        code,
    }
}

fn missing(param: String) -> Invalid {
    invalid(
        format!("Missing required parameter: '{param}'."),
        Some(param),
        Some("missing_required_parameter"),
    )
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(param: String, expected: &str, got: &Value) -> Invalid {
    invalid(
        format!(
            "Invalid type for '{param}': expected {expected}, but got {} instead.",
            type_name(got)
        ),
        Some(param),
        Some("invalid_type"),
    )
}

const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

pub(crate) fn validate(body: &Value) -> Result<(), Invalid> {
    let Some(obj) = body.as_object() else {
        return Err(invalid(
            format!(
                "Invalid type for request body: expected an object, but got {} instead.",
                type_name(body)
            ),
            None,
            None,
        ));
    };
    match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        _ => return Err(invalid("you must provide a model parameter", None, None)),
    }
    let messages = match obj.get("messages") {
        None | Some(Value::Null) => return Err(missing("messages".into())),
        Some(Value::Array(m)) => m,
        Some(other) => return Err(wrong_type("messages".into(), "an array", other)),
    };
    if messages.is_empty() {
        return Err(invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            Some("messages".into()),
            Some("empty_array"),
        ));
    }
    let streaming = matches!(obj.get("stream"), Some(Value::Bool(true)));
    if !streaming && obj.get("stream_options").is_some_and(|v| !v.is_null()) {
        return Err(invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            Some("stream_options".into()),
            None,
        ));
    }
    validate_messages(messages)?;
    match obj.get("tools") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(tools)) => validate_tools(tools),
        Some(other) => Err(wrong_type("tools".into(), "an array", other)),
    }
}

fn validate_messages(messages: &[Value]) -> Result<(), Invalid> {
    // Tool-call ids of the latest assistant message still waiting for their
    // tool message, and that message's index (for the error text).
    let mut pending: Vec<String> = Vec::new();
    let mut pending_from = 0;
    // Whether tool messages are allowed here: right after an assistant message
    // with tool calls, or after another tool message answering it.
    let mut in_tool_block = false;
    for (i, message) in messages.iter().enumerate() {
        let Some(m) = message.as_object() else {
            return Err(wrong_type(format!("messages[{i}]"), "an object", message));
        };
        let role = match m.get("role") {
            None | Some(Value::Null) => return Err(missing(format!("messages[{i}].role"))),
            Some(Value::String(r)) if ROLES.contains(&r.as_str()) => r.as_str(),
            Some(other) => {
                let shown = other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_owned);
                return Err(invalid(
                    format!(
                        "Invalid value: '{shown}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                    ),
                    Some(format!("messages[{i}].role")),
                    Some("invalid_value"),
                ));
            }
        };
        if role != "tool" && !pending.is_empty() {
            return Err(unanswered(pending_from, &pending));
        }
        match role {
            "tool" => {
                if !in_tool_block {
                    return Err(invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                        Some(format!("messages.[{i}].role")),
                        None,
                    ));
                }
                let id = required(
                    m,
                    &format!("messages[{i}]"),
                    "tool_call_id",
                    "a string",
                    Value::as_str,
                )?;
                let Some(at) = pending.iter().position(|p| p == id) else {
                    return Err(invalid(
                        format!(
                            "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
                        ),
                        Some(format!("messages.[{i}].tool_call_id")),
                        None,
                    ));
                };
                pending.remove(at);
                require_content(m, i)?;
            }
            "assistant" => {
                in_tool_block = false;
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(calls)) if calls.is_empty() => {
                        return Err(invalid(
                            format!(
                                "Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead."
                            ),
                            Some(format!("messages[{i}].tool_calls")),
                            Some("empty_array"),
                        ));
                    }
                    Some(Value::Array(calls)) => Some(calls),
                    Some(other) => {
                        return Err(wrong_type(
                            format!("messages[{i}].tool_calls"),
                            "an array",
                            other,
                        ));
                    }
                };
                match calls {
                    Some(calls) => {
                        for (j, call) in calls.iter().enumerate() {
                            pending.push(validate_tool_call(call, i, j)?);
                        }
                        pending_from = i;
                        in_tool_block = true;
                    }
                    None => {
                        let has_content = m.get("content").is_some_and(|c| !c.is_null());
                        let has_other = ["refusal", "function_call", "audio"]
                            .iter()
                            .any(|k| m.get(*k).is_some_and(|v| !v.is_null()));
                        if !has_content && !has_other {
                            return Err(invalid(
                                "Invalid value for 'content': expected a string, got null.",
                                Some(format!("messages.[{i}].content")),
                                None,
                            ));
                        }
                    }
                }
            }
            _ => {
                in_tool_block = false;
                require_content(m, i)?;
            }
        }
    }
    if !pending.is_empty() {
        return Err(unanswered(pending_from, &pending));
    }
    Ok(())
}

fn unanswered(index: usize, ids: &[String]) -> Invalid {
    invalid(
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            ids.join(", ")
        ),
        Some(format!("messages.[{index}].role")),
        None,
    )
}

fn require_content(m: &Map<String, Value>, i: usize) -> Result<(), Invalid> {
    match m.get("content") {
        None | Some(Value::Null) => Err(missing(format!("messages[{i}].content"))),
        Some(Value::String(_) | Value::Array(_)) => Ok(()),
        Some(other) => Err(wrong_type(
            format!("messages[{i}].content"),
            "one of a string or array of objects",
            other,
        )),
    }
}

/// Checks one entry of an assistant message's `tool_calls` and returns its id.
fn validate_tool_call(call: &Value, i: usize, j: usize) -> Result<String, Invalid> {
    let at = format!("messages[{i}].tool_calls[{j}]");
    let Some(c) = call.as_object() else {
        return Err(wrong_type(at, "an object", call));
    };
    let id = required(c, &at, "id", "a string", Value::as_str)?.to_owned();
    require_function_type(c, &at)?;
    let function = required(c, &at, "function", "an object", Value::as_object)?;
    let at = format!("{at}.function");
    required(function, &at, "name", "a string", Value::as_str)?;
    required(function, &at, "arguments", "a string", Value::as_str)?;
    Ok(id)
}

/// `object[key]`, which must be there, not null, and what `pick` takes (`expected`,
/// as the error says); `at` is the object's own parameter path.
fn required<'v, T>(
    object: &'v Map<String, Value>,
    at: &str,
    key: &str,
    expected: &str,
    pick: impl FnOnce(&'v Value) -> Option<T>,
) -> Result<T, Invalid> {
    let param = format!("{at}.{key}");
    match object.get(key) {
        None | Some(Value::Null) => Err(missing(param)),
        Some(value) => pick(value).ok_or_else(|| wrong_type(param, expected, value)),
    }
}

/// A tool call's or a tool's `type`, which must be `"function"`.
fn require_function_type(object: &Map<String, Value>, at: &str) -> Result<(), Invalid> {
    match object.get("type") {
        Some(Value::String(kind)) if kind == "function" => Ok(()),
        None | Some(Value::Null) => Err(missing(format!("{at}.type"))),
        Some(other) => Err(invalid(
            format!("Invalid value: {other}. Supported values are: 'function'."),
            Some(format!("{at}.type")),
            Some("invalid_value"),
        )),
    }
}

fn valid_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn validate_tools(tools: &[Value]) -> Result<(), Invalid> {
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(t) = tool.as_object() else {
            return Err(wrong_type(at, "an object", tool));
        };
        require_function_type(t, &at)?;
        let function = required(t, &at, "function", "an object", Value::as_object)?;
        let name = required(
            function,
            &format!("{at}.function"),
            "name",
            "a string",
            Value::as_str,
        )?;
        let param = format!("{at}.function.name");
        if name.chars().count() > 64 {
            return Err(invalid(
                format!(
                    "Invalid '{param}': string too long. Expected a string with maximum length 64, but got a string with length {} instead.",
                    name.chars().count()
                ),
                Some(param),
                Some("string_above_max_length"),
            ));
        }
        if name.is_empty() || !name.chars().all(valid_name_char) {
            return Err(invalid(
                format!(
                    "Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ),
                Some(param),
                Some("invalid_value"),
            ));
        }
        // OpenAI accepts a function without `parameters` (no arguments), but
        // not one whose schema is anything other than an object.
        match function.get("parameters") {
            None | Some(Value::Object(_)) => {}
            Some(other) => {
                return Err(wrong_type(
                    format!("{at}.function.parameters"),
                    "an object",
                    other,
                ));
            }
        }
    }
    Ok(())
}

/// What llama-cpp-python 0.3 with `--chat_format chatml-function-calling` fails on
/// where OpenAI does not: the message of the HTTP 500 it answers with, if any. Its
/// request type wants each assistant message's `content` to be a string when it is
/// there (`null` fails validation); its template reads `message.content` of every
/// assistant message under Jinja's `StrictUndefined` (a missing one raises); and
/// with tools, any `tool_choice` but `"none"`, `"auto"` or a named function trips an
/// `assert`, whose message is empty.
pub(crate) fn llama_cpp_python(body: &Value) -> Option<String> {
    let messages = body.get("messages").and_then(Value::as_array)?;
    for (i, message) in messages.iter().enumerate() {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        match message.get("content") {
            None => return Some("'dict object' has no attribute 'content'".to_owned()),
            Some(Value::Null) => {
                return Some(format!(
                    "1 validation error: messages.{i}.content: Input should be a valid string"
                ));
            }
            Some(_) => {}
        }
    }
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty());
    let choice_ok = match body.get("tool_choice") {
        None | Some(Value::Null | Value::Object(_)) => true,
        Some(Value::String(choice)) => choice == "auto" || choice == "none",
        Some(_) => false,
    };
    (tools && !choice_ok).then(String::new)
}
