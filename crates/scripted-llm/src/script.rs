//! The script: which turns to play, in which order, and with which faults.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// What the server answers, in order: each request to `/v1/chat/completions`
/// that passes validation consumes the next [`Turn`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ScriptFile", into = "ScriptFile")]
pub struct Script {
    pub(crate) turns: Vec<Turn>,
    pub(crate) repeat: bool,
    pub(crate) api_key: Option<String>,
    pub(crate) like: Server,
}

/// Whose request checks the server makes on top of OpenAI's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// OpenAI's checks only.
    #[default]
    #[serde(rename = "openai")]
    OpenAi,
    /// Also what llama-cpp-python 0.3 (`--chat_format chatml-function-calling`)
    /// refuses, with its HTTP 500 and error body: an assistant message without
    /// `content` (its template reads `message.content` under `StrictUndefined`), or
    /// with `content: null` (its request type wants a string), and
    /// `tool_choice: "required"` (an `assert` that only `"auto"` is left). Streamed,
    /// it fails those, and a turn that calls a tool, after its headers: the stream
    /// ends with no event and its connection closes a moment later (uvicorn 0.54 with
    /// sse-starlette 3.7, as pinned for the real model).
    LlamaCppPython,
}

impl Script {
    /// Plays `turns` once each, in order; requests after the last one get a 500.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            repeat: false,
            api_key: None,
            like: Server::OpenAi,
        }
    }

    /// Answers every request with `turn` (benchmarks, soak tests).
    pub fn repeat(turn: Turn) -> Self {
        Self {
            turns: vec![turn],
            repeat: true,
            api_key: None,
            like: Server::OpenAi,
        }
    }

    /// Requires `Authorization: Bearer <key>` on every request (401 otherwise).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Refuses what `server` refuses, as it does (see [`Server`]).
    pub fn like(mut self, server: Server) -> Self {
        self.like = server;
        self
    }

    /// Loads a script from its JSON form (see the module documentation).
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }
}

/// One tool call the scripted model makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    pub id: String,
    pub name: String,
    /// The exact argument text streamed to the client. In JSON scripts this may
    /// also be written as a JSON object, which is then sent in compact form.
    #[serde(deserialize_with = "string_or_json")]
    pub arguments: String,
}

impl ToolCallSpec {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

fn string_or_json<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(de)? {
        serde_json::Value::String(s) => Ok(s),
        other => Ok(other.to_string()),
    }
}

/// Pacing and faults shared by every kind of turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnOptions {
    /// Delay between consecutive data lines of a stream.
    pub paced: Duration,
    /// Delay after the response headers and before the first data line (for an
    /// error turn or a non-streaming answer: before the whole response).
    pub first_token_delay: Duration,
    /// `(prompt_tokens, completion_tokens)`; `None` estimates both as chars / 4.
    pub usage: Option<(u32, u32)>,
    /// Send only this many data lines, then abort the connection.
    pub cut_after: Option<usize>,
    /// Replace this data line (1-based, `[DONE]` included) with truncated JSON.
    pub malformed_at: Option<usize>,
    /// Leave `index` out of tool-call deltas.
    pub without_index: bool,
    /// Give every call index 0 and send it whole in one delta, as Ollama streams
    /// parallel calls (only their ids differ).
    pub same_index: bool,
    /// Send the headers, then nothing until the client goes away.
    pub hang: bool,
    /// Close the connection on receiving the request, without an answer.
    pub hang_up: bool,
}

/// How many pieces each tool call's arguments are split into by default.
pub const DEFAULT_ARGUMENT_PIECES: usize = 3;

/// One scripted answer. Build it with the constructors, then chain modifiers;
/// a modifier that does not apply to a kind of turn leaves it unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TurnSpec", into = "TurnSpec")]
pub enum Turn {
    /// Content deltas, one per fragment, then `finish_reason: "stop"`.
    Text {
        fragments: Vec<String>,
        options: TurnOptions,
    },
    /// Optional content, then tool-call deltas, then `finish_reason: "tool_calls"`.
    ToolCalls {
        text: Vec<String>,
        calls: Vec<ToolCallSpec>,
        argument_pieces: usize,
        repeat_ids: bool,
        options: TurnOptions,
    },
    /// Exactly these SSE data payloads, each sent as `data: <line>\n\n`, `[DONE]`
    /// only if it is one of them: a server's stream byte for byte. A non-streaming
    /// request gets the first line as its whole body.
    Raw {
        lines: Vec<String>,
        options: TurnOptions,
    },
    /// An error response in OpenAI's format.
    Status {
        status: u16,
        retry_after: Option<u64>,
        message: Option<String>,
        options: TurnOptions,
    },
}

impl Turn {
    /// Streams `text` split into words, each word carrying its leading whitespace.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            fragments: split_words(&text.into()),
            options: TurnOptions::default(),
        }
    }

    /// Streams exactly these content fragments, one per chunk.
    pub fn text_fragments(fragments: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::Text {
            fragments: fragments.into_iter().map(Into::into).collect(),
            options: TurnOptions::default(),
        }
    }

    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCallSpec>) -> Self {
        Self::ToolCalls {
            text: Vec::new(),
            calls: calls.into_iter().collect(),
            argument_pieces: DEFAULT_ARGUMENT_PIECES,
            repeat_ids: false,
            options: TurnOptions::default(),
        }
    }

    /// Sends exactly these data lines (see [`Turn::Raw`]).
    pub fn raw(lines: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::Raw {
            lines: lines.into_iter().map(Into::into).collect(),
            options: TurnOptions::default(),
        }
    }

    /// An error response with this HTTP status (see [`Turn::retry_after`]).
    pub fn status(status: u16) -> Self {
        Self::Status {
            status,
            retry_after: None,
            message: None,
            options: TurnOptions::default(),
        }
    }

    /// Tool-call turns: stream `text` (split into words) before the calls.
    pub fn with_text(mut self, content: impl Into<String>) -> Self {
        if let Self::ToolCalls { text, .. } = &mut self {
            *text = split_words(&content.into());
        }
        self
    }

    /// Tool-call turns: repeat `id`, `type` and `function.name` in every fragment.
    pub fn repeat_ids(mut self) -> Self {
        if let Self::ToolCalls { repeat_ids, .. } = &mut self {
            *repeat_ids = true;
        }
        self
    }

    /// Tool-call turns: split each call's arguments into `pieces` fragments.
    pub fn argument_pieces(mut self, pieces: usize) -> Self {
        if let Self::ToolCalls {
            argument_pieces, ..
        } = &mut self
        {
            *argument_pieces = pieces.max(1);
        }
        self
    }

    /// Error turns: send a `Retry-After: <secs>` header.
    pub fn retry_after(mut self, secs: u64) -> Self {
        if let Self::Status { retry_after, .. } = &mut self {
            *retry_after = Some(secs);
        }
        self
    }

    /// Error turns: replace the default error message.
    pub fn message(mut self, text: impl Into<String>) -> Self {
        if let Self::Status { message, .. } = &mut self {
            *message = Some(text.into());
        }
        self
    }

    pub fn paced(mut self, delay: Duration) -> Self {
        self.options_mut().paced = delay;
        self
    }

    pub fn first_token_delay(mut self, delay: Duration) -> Self {
        self.options_mut().first_token_delay = delay;
        self
    }

    pub fn usage(mut self, prompt_tokens: u32, completion_tokens: u32) -> Self {
        self.options_mut().usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Sends `n` data lines, then aborts the connection without ending the body.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.options_mut().cut_after = Some(n);
        self
    }

    /// Makes the `n`-th data line (1-based, counting `[DONE]`) invalid JSON.
    pub fn malformed_at(mut self, n: usize) -> Self {
        self.options_mut().malformed_at = Some(n);
        self
    }

    pub fn same_index(mut self) -> Self {
        self.options_mut().same_index = true;
        self
    }

    pub fn without_index(mut self) -> Self {
        self.options_mut().without_index = true;
        self
    }

    /// Sends the headers (a non-streaming or error turn: nothing at all), then
    /// waits until the client disconnects or the server stops.
    pub fn hang(mut self) -> Self {
        self.options_mut().hang = true;
        self
    }

    /// Closes the connection on receiving the request, with no answer at all: what a
    /// client sees as "connection closed before message completed".
    pub fn hang_up(mut self) -> Self {
        self.options_mut().hang_up = true;
        self
    }

    pub fn options(&self) -> &TurnOptions {
        match self {
            Self::Text { options, .. }
            | Self::ToolCalls { options, .. }
            | Self::Raw { options, .. }
            | Self::Status { options, .. } => options,
        }
    }

    fn options_mut(&mut self) -> &mut TurnOptions {
        match self {
            Self::Text { options, .. }
            | Self::ToolCalls { options, .. }
            | Self::Raw { options, .. }
            | Self::Status { options, .. } => options,
        }
    }
}

/// Splits before every run of whitespace that follows a word, the way BPE
/// tokenizers attach the leading space to the next token.
pub(crate) fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev_ws = false;
    let mut seen_word = false;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        if ws && !prev_ws && seen_word && i > start {
            out.push(text[start..i].to_owned());
            start = i;
        }
        seen_word |= !ws;
        prev_ws = ws;
    }
    let tail = &text[start..];
    match out.last_mut() {
        // Trailing whitespace stays with the last word rather than becoming a
        // fragment of its own.
        Some(last) if tail.chars().all(char::is_whitespace) => last.push_str(tail),
        _ if !tail.is_empty() => out.push(tail.to_owned()),
        _ => {}
    }
    out
}

/// Splits `s` into at most `pieces` non-empty parts of nearly equal length,
/// on character boundaries.
pub(crate) fn split_pieces(s: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let pieces = pieces.max(1).min(chars.len());
    if pieces == 0 {
        return Vec::new();
    }
    let (base, extra) = (chars.len() / pieces, chars.len() % pieces);
    let mut out = Vec::with_capacity(pieces);
    let mut at = 0;
    for i in 0..pieces {
        let len = base + usize::from(i < extra);
        out.push(chars[at..at + len].iter().collect());
        at += len;
    }
    out
}

/// The JSON form of a script file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    turns: Option<Vec<Turn>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    repeat: Option<Turn>,
    #[serde(default, skip_serializing_if = "is_openai")]
    like: Server,
}

fn is_openai(server: &Server) -> bool {
    *server == Server::OpenAi
}

impl TryFrom<ScriptFile> for Script {
    type Error = String;

    fn try_from(file: ScriptFile) -> Result<Self, Self::Error> {
        let script = match (file.turns, file.repeat) {
            (Some(turns), None) => Script::new(turns),
            (None, Some(turn)) => Script::repeat(turn),
            _ => return Err("a script needs exactly one of \"turns\" or \"repeat\"".into()),
        };
        Ok(Script {
            api_key: file.api_key,
            like: file.like,
            ..script
        })
    }
}

impl From<Script> for ScriptFile {
    fn from(script: Script) -> Self {
        let mut turns = script.turns;
        let (turns, repeat) = if script.repeat {
            (None, turns.pop())
        } else {
            (Some(turns), None)
        };
        Self {
            api_key: script.api_key,
            turns,
            repeat,
            like: script.like,
        }
    }
}

/// The flat JSON form of a turn; which fields are present decides its kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TurnSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fragments: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<ToolCallSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argument_pieces: Option<usize>,
    #[serde(skip_serializing_if = "is_false")]
    repeat_ids: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    paced_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_token_delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cut_after: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    malformed_at: Option<usize>,
    #[serde(skip_serializing_if = "is_false")]
    without_index: bool,
    #[serde(skip_serializing_if = "is_false")]
    same_index: bool,
    #[serde(skip_serializing_if = "is_false")]
    hang: bool,
    #[serde(skip_serializing_if = "is_false")]
    hang_up: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageSpec {
    prompt_tokens: u32,
    completion_tokens: u32,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn millis(d: Duration) -> Option<u64> {
    (!d.is_zero()).then(|| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl TryFrom<TurnSpec> for Turn {
    type Error = String;

    fn try_from(spec: TurnSpec) -> Result<Self, Self::Error> {
        let text = match (spec.text, spec.fragments) {
            (Some(_), Some(_)) => {
                return Err("a turn takes \"text\" or \"fragments\", not both".into());
            }
            (Some(text), None) => Some(split_words(&text)),
            (None, fragments) => fragments,
        };
        let options = TurnOptions {
            paced: Duration::from_millis(spec.paced_ms.unwrap_or(0)),
            first_token_delay: Duration::from_millis(spec.first_token_delay_ms.unwrap_or(0)),
            usage: spec.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
            cut_after: spec.cut_after,
            malformed_at: spec.malformed_at,
            without_index: spec.without_index,
            same_index: spec.same_index,
            hang: spec.hang,
            hang_up: spec.hang_up,
        };
        let stream_only = spec.argument_pieces.is_some() || spec.repeat_ids;
        if spec.status.is_none() && (spec.retry_after.is_some() || spec.message.is_some()) {
            return Err("\"retry_after\"/\"message\" need \"status\"".into());
        }
        if let Some(lines) = spec.raw {
            if text.is_some() || stream_only || spec.status.is_some() || spec.tool_calls.is_some() {
                return Err("a \"raw\" turn takes no text, tool calls or status".into());
            }
            return Ok(Turn::Raw { lines, options });
        }
        let turn = match (spec.status, spec.tool_calls) {
            (Some(_), Some(_)) => {
                return Err("a turn takes \"status\" or \"tool_calls\", not both".into());
            }
            (Some(status), None) => {
                if text.is_some() || stream_only {
                    return Err("an error turn (\"status\") takes no text or tool options".into());
                }
                if !(100..=999).contains(&status) {
                    return Err(format!("invalid HTTP status {status}"));
                }
                Turn::Status {
                    status,
                    retry_after: spec.retry_after,
                    message: spec.message,
                    options,
                }
            }
            (None, Some(calls)) => Turn::ToolCalls {
                text: text.unwrap_or_default(),
                calls,
                argument_pieces: spec
                    .argument_pieces
                    .unwrap_or(DEFAULT_ARGUMENT_PIECES)
                    .max(1),
                repeat_ids: spec.repeat_ids,
                options,
            },
            (None, None) => {
                if stream_only {
                    return Err("\"argument_pieces\"/\"repeat_ids\" need \"tool_calls\"".into());
                }
                if text.is_none() && !options.hang && !options.hang_up {
                    return Err(
                        "a turn needs \"text\", \"fragments\", \"tool_calls\", \"status\", \"hang\" or \"hang_up\""
                            .into(),
                    );
                }
                Turn::Text {
                    fragments: text.unwrap_or_default(),
                    options,
                }
            }
        };
        Ok(turn)
    }
}

impl From<Turn> for TurnSpec {
    fn from(turn: Turn) -> Self {
        let options = turn.options().clone();
        let mut spec = TurnSpec {
            paced_ms: millis(options.paced),
            first_token_delay_ms: millis(options.first_token_delay),
            usage: options.usage.map(|(p, c)| UsageSpec {
                prompt_tokens: p,
                completion_tokens: c,
            }),
            cut_after: options.cut_after,
            malformed_at: options.malformed_at,
            without_index: options.without_index,
            same_index: options.same_index,
            hang: options.hang,
            hang_up: options.hang_up,
            ..TurnSpec::default()
        };
        match turn {
            Turn::Text { fragments, .. } => spec.fragments = Some(fragments),
            Turn::ToolCalls {
                text,
                calls,
                argument_pieces,
                repeat_ids,
                ..
            } => {
                spec.fragments = (!text.is_empty()).then_some(text);
                spec.tool_calls = Some(calls);
                spec.argument_pieces =
                    (argument_pieces != DEFAULT_ARGUMENT_PIECES).then_some(argument_pieces);
                spec.repeat_ids = repeat_ids;
            }
            Turn::Raw { lines, .. } => spec.raw = Some(lines),
            Turn::Status {
                status,
                retry_after,
                message,
                ..
            } => {
                spec.status = Some(status);
                spec.retry_after = retry_after;
                spec.message = message;
            }
        }
        spec
    }
}
