//! How a request is put to a model's server, and what that server was seen to refuse:
//! a field a strict validator does not know, `tool_choice: "required"`, tools at all.
//! A refusal is met by asking once more in a shape such servers take, and remembered
//! for every request to that model after it.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use serde_json::Value;

use crate::ModelError;

/// How a request is put, beyond what every server needs (an assistant message with
/// tool calls always carries `content`, `""` when it said nothing: llama-cpp-python
/// answers 500 without it, and OpenAI takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// Leave out what a strict validator may refuse as unknown: usage asked for
    /// (`stream_options`) and the tool's `name` on each tool result (which some
    /// servers' templates need, and OpenAI takes).
    pub plain: bool,
    /// `tool_choice: "required"` when the model's profile wants a call first
    /// (llama-cpp-python's `chatml-function-calling` asserts it is `"auto"`).
    pub required: bool,
    /// The tools described in the system prompt and calls read from the text, as
    /// in `text` mode.
    pub text: bool,
}

impl Shape {
    pub(super) const FULL: Self = Self {
        plain: false,
        required: true,
        text: false,
    };

    pub(super) const TEXT: Self = Self {
        plain: true,
        required: false,
        text: true,
    };

    /// The same, without a required call.
    pub(super) fn not_required(self) -> Self {
        Self {
            required: false,
            ..self
        }
    }

    /// A server that says it cannot take tools at all: Ollama's "MODEL does not
    /// support tools" (400), vLLM's "auto" tool choice needing
    /// `--enable-auto-tool-choice` (400), llama.cpp's "tools param requires --jinja"
    /// (500).
    fn tools_refused(refused: &ModelError) -> bool {
        match refused {
            ModelError::Upstream {
                status: 400 | 422 | 500,
                message,
                ..
            } => {
                let message = message.to_ascii_lowercase();
                message.contains("tool") && !message.contains("tool_call_id")
            }
            _ => false,
        }
    }

    /// The shape to ask in once more after `refusal` of a request that asked for
    /// `sent`, if it may be the shape that was refused: a 400 or 422 to a full
    /// request (a field the server does not take), a 500 to one that required a call
    /// (a server whose handler fails on it), or a request the server dropped while it
    /// answers others. Other 5xx say the server is busy or away: the router's retries
    /// are for those, as for a transient 500.
    pub(super) fn after(self, refusal: &Refusal, sent: Sent, auto: bool) -> Option<Self> {
        if refusal.dropped {
            // Closed without a word where others get an answer: the server failed on
            // what it was asked (llama-cpp-python's handlers, when the web framework
            // under them gives up on the error). A required call first, then, where
            // the mode allows, the tools themselves.
            return if sent.required {
                Some(self.not_required())
            } else if auto && sent.tools && !self.text {
                Some(Self::TEXT)
            } else {
                None
            };
        }
        let refused = &refusal.error;
        if auto && !self.text && !sent.required && Self::tools_refused(refused) {
            return Some(Self::TEXT);
        }
        match refused {
            ModelError::Upstream {
                status: 400 | 422, ..
            } if !self.plain => Some(Self {
                plain: true,
                required: false,
                ..self
            }),
            ModelError::Upstream { status: 500, .. } if sent.required => Some(self.not_required()),
            _ => None,
        }
    }
}

/// What a request body asked of the server, of what a server may refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// `tool_choice: "required"`.
    pub required: bool,
    /// Tool definitions in `tools`.
    pub tools: bool,
}

impl Sent {
    pub(super) fn of(body: &Value) -> Self {
        Self {
            required: body["tool_choice"] == "required",
            tools: body.get("tools").is_some_and(|t| !t.is_null()),
        }
    }
}

/// Why a request got no answer to use, as far as its shape may be the cause.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    pub error: ModelError,
    /// The server closed the connection after the request went out, without an
    /// answer, and answers other requests (its list of models) all the same.
    pub dropped: bool,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.dropped {
            write!(
                f,
                "it closed the connection without answering ({}), while it answers other requests",
                self.error
            )
        } else {
            self.error.fmt(f)
        }
    }
}

/// What one model's server was seen to refuse, for every request after: asked again,
/// it is not refused the same way twice.
#[derive(Debug, Default)]
pub(super) struct Quirks {
    /// It refused a full request (400 or 422) and took the plain one.
    plain: AtomicBool,
    /// It failed on `tool_choice: "required"` (a 500, a dropped connection, a stream
    /// that ended before its first chunk) and took `"auto"`.
    no_required: AtomicBool,
    /// In `auto` mode, it refused the tools in the request (a model without tool
    /// support): they go in the prompt.
    tools_in_prompt: AtomicBool,
}

impl Quirks {
    /// The shape its requests are put in now.
    pub(super) fn shape(&self) -> Shape {
        if self.tools_in_prompt.load(Relaxed) {
            Shape::TEXT
        } else if self.plain.load(Relaxed) {
            Shape {
                plain: true,
                required: false,
                text: false,
            }
        } else {
            Shape {
                required: !self.no_required.load(Relaxed),
                ..Shape::FULL
            }
        }
    }

    /// Remembers that `model`'s server took `taken` after refusing the request as it
    /// was (`why`), told once per model and choice, however many asked at once.
    pub(super) fn remember(&self, model: &str, taken: Shape, why: &dyn std::fmt::Display) {
        let (flag, how) = if taken.text {
            (
                &self.tools_in_prompt,
                "with the tools described in the prompt and calls read from the text",
            )
        } else if taken.plain {
            (
                &self.plain,
                "without stream_options, tool result names or a required tool call",
            )
        } else {
            (
                &self.no_required,
                "with tool_choice \"auto\" instead of \"required\"",
            )
        };
        if !flag.swap(true, Relaxed) {
            tracing::warn!(
                model,
                refused = %why,
                request_shape = ?taken,
                "the model's server failed on the request as it was and took it {how}: so from now on"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Shape = Shape {
        plain: true,
        required: false,
        text: false,
    };
    const NOT_REQUIRED: Shape = Shape {
        plain: false,
        required: false,
        text: false,
    };
    const REQUIRED: Sent = Sent {
        required: true,
        tools: true,
    };
    const AUTO: Sent = Sent {
        required: false,
        tools: true,
    };
    const NO_TOOLS: Sent = Sent {
        required: false,
        tools: false,
    };

    fn answered(error: ModelError) -> Refusal {
        Refusal {
            error,
            dropped: false,
        }
    }

    fn upstream(status: u16, message: &str) -> Refusal {
        answered(ModelError::Upstream {
            status,
            message: message.to_owned(),
            retry_after: None,
        })
    }

    fn dropped() -> Refusal {
        Refusal {
            error: ModelError::Connection("connection closed before message completed".into()),
            dropped: true,
        }
    }

    #[test]
    fn the_shape_is_retried_only_for_refusals_it_may_cause() {
        for status in [400, 422] {
            let refused = upstream(status, "");
            assert_eq!(Shape::FULL.after(&refused, AUTO, false), Some(PLAIN));
            assert_eq!(Shape::FULL.after(&refused, REQUIRED, false), Some(PLAIN));
            assert_eq!(NOT_REQUIRED.after(&refused, AUTO, false), Some(PLAIN));
            assert_eq!(PLAIN.after(&refused, AUTO, false), None, "once");
        }
        // A 500 is the shape's only when it asked for a required call; otherwise
        // it is the router's to retry, as a transient failure.
        assert_eq!(
            Shape::FULL.after(&upstream(500, ""), REQUIRED, false),
            Some(NOT_REQUIRED)
        );
        assert_eq!(Shape::FULL.after(&upstream(500, ""), AUTO, false), None);
        for status in [401, 403, 404, 408, 413, 429, 502, 503, 504] {
            assert_eq!(
                Shape::FULL.after(&upstream(status, ""), REQUIRED, false),
                None,
                "{status}"
            );
        }
        // A connection that broke, or never opened, on a server that does not
        // answer either: the router's too.
        for other in [
            ModelError::RateLimited { retry_after: None },
            ModelError::Connection(String::new()),
            ModelError::Timeout(String::new()),
        ] {
            assert_eq!(
                Shape::FULL.after(&answered(other.clone()), REQUIRED, true),
                None,
                "{other}"
            );
        }
    }

    #[test]
    fn a_request_dropped_by_a_server_that_answers_others_is_asked_in_the_next_shape() {
        // A required call first, in every mode.
        for auto in [false, true] {
            assert_eq!(
                Shape::FULL.after(&dropped(), REQUIRED, auto),
                Some(NOT_REQUIRED)
            );
        }
        // Then the tools, where the mode lets them go in the prompt.
        assert_eq!(
            NOT_REQUIRED.after(&dropped(), AUTO, true),
            Some(Shape::TEXT)
        );
        assert_eq!(NOT_REQUIRED.after(&dropped(), AUTO, false), None, "native");
        // Nothing left to leave out: the same body is not sent again.
        assert_eq!(Shape::TEXT.after(&dropped(), NO_TOOLS, true), None);
        assert_eq!(NOT_REQUIRED.after(&dropped(), NO_TOOLS, true), None);
    }

    #[test]
    fn a_server_that_cannot_take_tools_gets_them_in_the_prompt_in_auto_mode_only() {
        for refused in [
            upstream(
                400,
                "registry.ollama.ai/library/gemma:2b does not support tools",
            ),
            upstream(
                400,
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
            ),
            upstream(500, "tools param requires --jinja flag"),
        ] {
            assert_eq!(
                Shape::FULL.after(&refused, AUTO, true),
                Some(Shape::TEXT),
                "{refused}"
            );
            assert_eq!(PLAIN.after(&refused, AUTO, true), Some(Shape::TEXT));
            assert_eq!(Shape::TEXT.after(&refused, AUTO, true), None, "once");
            assert_ne!(
                Shape::FULL.after(&refused, AUTO, false),
                Some(Shape::TEXT),
                "native: {refused}"
            );
        }
        // A message about a tool result's id is a malformed conversation, not this.
        let other = upstream(400, "tool_call_id call_1 has no matching tool call");
        assert_eq!(Shape::FULL.after(&other, AUTO, true), Some(PLAIN));
    }

    #[test]
    fn what_was_refused_is_remembered_per_choice() {
        let quirks = Quirks::default();
        assert_eq!(quirks.shape(), Shape::FULL);
        quirks.remember("m", NOT_REQUIRED, &dropped());
        assert_eq!(quirks.shape(), NOT_REQUIRED);
        quirks.remember("m", PLAIN, &upstream(400, "stream_options"));
        assert_eq!(quirks.shape(), PLAIN);
        quirks.remember("m", Shape::TEXT, &dropped());
        assert_eq!(quirks.shape(), Shape::TEXT);
    }
}
