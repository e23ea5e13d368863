//! The last step of a tool call, and what people see of it: a short title from the
//! tool and its arguments, a one-line summary of its result, and the text the model
//! is given, cut at the output cap.

use serde_json::Value;

use crate::tools::CallOutcome;
pub(crate) use maitred_llm::output::capped;
use maitred_protocol::ids::CallStatus;

/// What a call came to, for the person (status, summary) and the model (text).
pub(crate) struct Summarised {
    pub status: CallStatus,
    pub summary: String,
    pub text: String,
}

/// What the model is told of a call that became a task.
pub(crate) const TASK_STARTED: &str = "Started. This tool runs in the background: its result will be posted in this conversation as a new message when it is ready, which may take minutes. Tell the user it is running and that they can go on asking meanwhile. Do not call the tool again for this.";

/// Tool output is the server's text: the model gets at most `cap` bytes of it.
pub(crate) fn outcome(outcome: CallOutcome, cap: usize) -> Summarised {
    let (status, summary, text) = match outcome {
        CallOutcome::Ok { text, structured } => {
            let summary = summary(&text, structured.as_ref());
            (CallStatus::Ok, summary, text)
        }
        CallOutcome::ToolError(text) => (
            CallStatus::Error,
            shorten(&text, 160),
            format!("Error: {text}"),
        ),
        CallOutcome::Task(task) => (
            CallStatus::Ok,
            match &task.status_message {
                Some(message) => format!("running in the background: {}", shorten(message, 120)),
                None => "running in the background".to_owned(),
            },
            TASK_STARTED.to_owned(),
        ),
        CallOutcome::Unavailable(reason) => (
            CallStatus::Unavailable,
            shorten(&reason, 160),
            format!(
                "The tool is unavailable right now ({reason}). Tell the user; do not retry it now."
            ),
        ),
    };
    Summarised {
        status,
        summary,
        text: capped(text, cap),
    }
}

/// "Find free times · date 2026-11-25, people 4"
pub(crate) fn title(tool_title: &str, arguments: &Value) -> String {
    let details: Vec<String> = arguments
        .as_object()
        .map(|args| {
            args.iter()
                .filter_map(|(key, value)| {
                    let shown = match value {
                        Value::String(s) if !s.is_empty() => shorten(s, 32),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => return None,
                    };
                    Some(format!("{} {shown}", words(key)))
                })
                .take(3)
                .collect()
        })
        .unwrap_or_default();
    if details.is_empty() {
        tool_title.to_owned()
    } else {
        format!("{tool_title} · {}", details.join(", "))
    }
}

/// For a successful result: "3 of 60 records", or its first line.
pub(crate) fn summary(text: &str, structured: Option<&Value>) -> String {
    if let Some(Value::Object(map)) = structured {
        let listed = map.values().find_map(|v| v.as_array().map(Vec::len));
        let total = ["total", "count"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_u64));
        // A page has its list and a few counters; a record with a list among many
        // fields (a booking's comments) is one record.
        let page = total.is_some() || map.len() <= 4;
        match (listed, total) {
            (Some(listed), Some(total)) if total as usize != listed => {
                return format!("{listed} of {total} records");
            }
            (Some(listed), _) if page => return format!("{listed} records"),
            _ => {}
        }
        if let Some(id) = ["_id", "id"]
            .iter()
            .find_map(|k| map.get(*k))
            .and_then(|id| {
                id.as_str()
                    .map(str::to_owned)
                    .or_else(|| id.as_u64().map(|n| n.to_string()))
            })
        {
            return format!("1 record, id {id}");
        }
    }
    shorten(text.lines().next().unwrap_or_default(), 160)
}

pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `guestName` → "guest name".
fn words(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_uppercase() {
            out.push(' ');
            out.push(c.to_ascii_lowercase());
        } else if c == '_' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn titles_name_the_arguments_that_matter() {
        assert_eq!(
            title(
                "Find free times",
                &json!({ "date": "2026-11-25", "people": 4 })
            ),
            "Find free times · date 2026-11-25, people 4"
        );
        assert_eq!(title("Look up tables", &json!({})), "Look up tables");
        assert_eq!(
            title("Book a table", &json!({ "guestName": "Ada" })),
            "Book a table · guest name Ada"
        );
    }

    #[test]
    fn summaries_count_records() {
        let listed = json!({ "items": [1, 2, 3], "total": 60 });
        assert_eq!(summary("", Some(&listed)), "3 of 60 records");
        assert_eq!(summary("first\nsecond", None), "first");
        let booking = json!({ "_id": "bk_1", "date": "2026-11-25", "time": "19:00",
            "people": 2, "status": "confirmed", "comments": [] });
        assert_eq!(summary("{...}", Some(&booking)), "1 record, id bk_1");
    }
}
