//! OpenAI's chat.completions wire format.
//!
//! Everything is serialised from structs rather than `serde_json::Value` so the
//! key order is fixed by declaration order and does not depend on whether some
//! other crate in the build turns on serde_json's `preserve_order`.

use axum::body::Bytes;
use serde::Serialize;

use super::script::{ToolCallSpec, Turn, split_pieces};

pub(crate) const CREATED: u64 = 1_700_000_000;
pub(crate) const FINGERPRINT: &str = "fp_scripted";
pub(crate) const MODELS_BODY: &str = r#"{"object":"list","data":[{"id":"scripted","object":"model","created":1700000000,"owned_by":"maitred"}]}"#;

/// What a response needs to know about the request it answers.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub id: String,
    pub model: String,
    pub include_usage: bool,
    /// Estimated from the request's message text, for turns without `.usage()`.
    pub prompt_chars: usize,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    system_fingerprint: &'static str,
    choices: Vec<ChoiceDelta>,
    /// OpenAI sends `"usage":null` on every chunk but the last when usage was
    /// requested, and no `usage` key at all otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<Usage>>,
}

#[derive(Serialize)]
struct ChoiceDelta {
    index: u32,
    delta: Delta,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<Option<String>>,
}

#[derive(Serialize)]
struct ToolCallDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionDelta,
}

#[derive(Serialize)]
struct FunctionDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    arguments: String,
}

fn to_json<T: Serialize>(value: &T) -> String {
    // Serialising these plain structs cannot fail: no maps with non-string
    // keys, no failing Serialize impls.
    serde_json::to_string(value).unwrap_or_default()
}

pub(crate) fn estimate_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(4).max(1)).unwrap_or(u32::MAX)
}

fn usage_for(turn: &Turn, ctx: &Ctx, completion_chars: usize) -> Usage {
    let (prompt_tokens, completion_tokens) = turn.options().usage.unwrap_or((
        estimate_tokens(ctx.prompt_chars),
        estimate_tokens(completion_chars),
    ));
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens.saturating_add(completion_tokens),
    }
}

fn completion_chars(text: &[String], calls: &[ToolCallSpec]) -> usize {
    text.iter().map(|t| t.chars().count()).sum::<usize>()
        + calls
            .iter()
            .map(|c| c.name.chars().count() + c.arguments.chars().count())
            .sum::<usize>()
}

/// Every SSE data line a streaming turn sends, in order, each a complete
/// `data: ...\n\n` event, ending with `data: [DONE]`. Faults that alter the
/// content (`malformed_at`, `without_index`) are already applied; faults of
/// timing and transport are the caller's.
pub(crate) fn stream_events(turn: &Turn, ctx: &Ctx) -> Vec<Bytes> {
    let chunk = |delta: Delta, finish_reason: Option<&'static str>| Chunk {
        id: &ctx.id,
        object: "chat.completion.chunk",
        created: CREATED,
        model: &ctx.model,
        system_fingerprint: FINGERPRINT,
        choices: vec![ChoiceDelta {
            index: 0,
            delta,
            logprobs: None,
            finish_reason,
        }],
        usage: ctx.include_usage.then_some(None),
    };
    let mut lines: Vec<String> = Vec::new();
    let (text, calls, pieces, repeat_ids, finish) = match turn {
        Turn::Text { fragments, .. } => (fragments.as_slice(), &[][..], 1, false, "stop"),
        Turn::ToolCalls {
            text,
            calls,
            argument_pieces,
            repeat_ids,
            ..
        } => (
            text.as_slice(),
            calls.as_slice(),
            *argument_pieces,
            *repeat_ids,
            "tool_calls",
        ),
        Turn::Raw { lines, options } => {
            let mut lines = lines.clone();
            if let Some(n) = options.malformed_at
                && let Some(line) = n.checked_sub(1).and_then(|i| lines.get_mut(i))
            {
                *line = malform(line);
            }
            return lines
                .into_iter()
                .map(|line| Bytes::from(format!("data: {line}\n\n")))
                .collect();
        }
        // Error turns are answered before any stream starts.
        Turn::Status { .. } => return Vec::new(),
    };
    let opts = turn.options();

    let starts_with_calls = text.is_empty() && !calls.is_empty();
    let first = if starts_with_calls {
        Delta {
            role: Some("assistant"),
            content: Some(None),
            refusal: Some(None),
            ..Delta::default()
        }
    } else {
        Delta {
            role: Some("assistant"),
            content: Some(Some(String::new())),
            ..Delta::default()
        }
    };
    lines.push(to_json(&chunk(first, None)));
    for fragment in text {
        let delta = Delta {
            content: Some(Some(fragment.clone())),
            ..Delta::default()
        };
        lines.push(to_json(&chunk(delta, None)));
    }

    // Each call is a header delta followed by its argument pieces; the calls'
    // sequences are interleaved round-robin, as some providers do.
    let per_call: Vec<Vec<ToolCallDelta>> = calls
        .iter()
        .zip(0u32..)
        .map(|(call, index)| {
            let index = (!opts.without_index).then_some(if opts.same_index { 0 } else { index });
            // Ollama sends each of its parallel calls whole, in one delta.
            if opts.same_index {
                return vec![ToolCallDelta {
                    index,
                    id: Some(call.id.clone()),
                    kind: Some("function"),
                    function: FunctionDelta {
                        name: Some(call.name.clone()),
                        arguments: call.arguments.clone(),
                    },
                }];
            }
            let header = ToolCallDelta {
                index,
                id: Some(call.id.clone()),
                kind: Some("function"),
                function: FunctionDelta {
                    name: Some(call.name.clone()),
                    arguments: String::new(),
                },
            };
            let fragments = split_pieces(&call.arguments, pieces)
                .into_iter()
                .map(|arguments| ToolCallDelta {
                    index,
                    id: repeat_ids.then(|| call.id.clone()),
                    kind: repeat_ids.then_some("function"),
                    function: FunctionDelta {
                        name: repeat_ids.then(|| call.name.clone()),
                        arguments,
                    },
                });
            std::iter::once(header).chain(fragments).collect()
        })
        .collect();
    let longest = per_call.iter().map(Vec::len).max().unwrap_or(0);
    let mut queues: Vec<std::vec::IntoIter<ToolCallDelta>> =
        per_call.into_iter().map(Vec::into_iter).collect();
    for _ in 0..longest {
        for queue in &mut queues {
            if let Some(call) = queue.next() {
                let delta = Delta {
                    tool_calls: Some(vec![call]),
                    ..Delta::default()
                };
                lines.push(to_json(&chunk(delta, None)));
            }
        }
    }

    lines.push(to_json(&chunk(Delta::default(), Some(finish))));
    if ctx.include_usage {
        let usage = usage_for(turn, ctx, completion_chars(text, calls));
        lines.push(to_json(&Chunk {
            id: &ctx.id,
            object: "chat.completion.chunk",
            created: CREATED,
            model: &ctx.model,
            system_fingerprint: FINGERPRINT,
            choices: Vec::new(),
            usage: Some(Some(usage)),
        }));
    }
    lines.push("[DONE]".to_owned());

    if let Some(n) = opts.malformed_at
        && let Some(line) = n.checked_sub(1).and_then(|i| lines.get_mut(i))
    {
        *line = malform(line);
    }
    lines
        .into_iter()
        .map(|line| Bytes::from(format!("data: {line}\n\n")))
        .collect()
}

/// Cuts a JSON chunk just inside its `choices` array, the way a line would
/// look if a proxy or provider flushed half of it.
fn malform(line: &str) -> String {
    match line.find("\"choices\":[") {
        Some(at) => line[..at + "\"choices\":[".len()].to_owned(),
        None => line.chars().take(line.chars().count() / 2).collect(),
    }
}

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [CompletionChoice; 1],
    usage: Usage,
    system_fingerprint: &'static str,
}

#[derive(Serialize)]
struct CompletionChoice {
    index: u32,
    message: Message,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct Message {
    role: &'static str,
    content: Option<String>,
    refusal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<MessageToolCall>>,
}

#[derive(Serialize)]
struct MessageToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: MessageFunction,
}

#[derive(Serialize)]
struct MessageFunction {
    name: String,
    arguments: String,
}

/// The body of a non-streaming answer (a `chat.completion` object).
pub(crate) fn completion_body(turn: &Turn, ctx: &Ctx) -> String {
    let (text, calls, finish) = match turn {
        Turn::Text { fragments, .. } => (fragments.as_slice(), &[][..], "stop"),
        Turn::ToolCalls { text, calls, .. } => (text.as_slice(), calls.as_slice(), "tool_calls"),
        Turn::Raw { lines, .. } => return lines.first().cloned().unwrap_or_default(),
        Turn::Status { .. } => return String::new(),
    };
    let content = text.concat();
    let message = Message {
        role: "assistant",
        content: (!content.is_empty() || calls.is_empty()).then_some(content),
        refusal: None,
        tool_calls: (!calls.is_empty()).then(|| {
            calls
                .iter()
                .map(|c| MessageToolCall {
                    id: c.id.clone(),
                    kind: "function",
                    function: MessageFunction {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                })
                .collect()
        }),
    };
    let body = to_json(&Completion {
        id: &ctx.id,
        object: "chat.completion",
        created: CREATED,
        model: &ctx.model,
        choices: [CompletionChoice {
            index: 0,
            message,
            logprobs: None,
            finish_reason: finish,
        }],
        usage: usage_for(turn, ctx, completion_chars(text, calls)),
        system_fingerprint: FINGERPRINT,
    });
    match turn.options().malformed_at {
        Some(_) => malform(&body),
        None => body,
    }
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

/// `{"error":{"message","type","param","code"}}`, OpenAI's error body.
pub(crate) fn error_body(
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> String {
    to_json(&ErrorEnvelope {
        error: ErrorBody {
            message,
            kind,
            param,
            code,
        },
    })
}

/// The error type OpenAI uses for a status.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

pub(crate) fn default_error_message(status: u16) -> &'static str {
    match status {
        429 => "Rate limit reached for requests (scripted). Please try again later.",
        401 => "Incorrect API key provided.",
        400..=499 => "The request was rejected (scripted client error).",
        _ => "The server had an error while processing your request. Sorry about that!",
    }
}

pub(crate) fn default_error_code(status: u16) -> Option<&'static str> {
    match status {
        429 => Some("rate_limit_exceeded"),
        401 => Some("invalid_api_key"),
        _ => None,
    }
}
