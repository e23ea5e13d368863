//! The gateway's ids and statuses as types. An id from a URL is parsed once, at the
//! edge; past that, a conversation id cannot be passed where a message id belongs,
//! and a status is one of its few values, never a misspelt string.
//!
//! Ids are a prefix and a UUIDv7 (time-ordered, so rows of one conversation sort by
//! creation): `conv_…` a conversation, `msg_…` a message (a question or an answer, the
//! `message_id` of the chat stream), `part_…` one stored part of a message (the
//! question, a model turn, a tool result), `tc_…` a tool call, `in_…` a tool's request for the person's input.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new, unique id.
            pub fn new() -> Self {
                Self(format!("{}_{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            /// The prefix and 32 lowercase hex digits; anything else names nothing of ours.
            fn from_str(text: &str) -> Result<Self, InvalidId> {
                let well_formed = text
                    .strip_prefix(concat!($prefix, "_"))
                    .is_some_and(|hex| {
                        hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                    });
                if well_formed {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(InvalidId { kind: stringify!($name) })
                }
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// A text that is not an id of the expected kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {kind}")]
pub struct InvalidId {
    pub kind: &'static str,
}

id!(
    /// A conversation: a person's questions and their answers.
    ConversationId,
    "conv"
);
id!(
    /// A question or an answer; the chat stream's `message_id`.
    MessageId,
    "msg"
);
id!(
    /// One stored part of a message: the question, a model turn or a tool result.
    PartId,
    "part"
);
id!(
    /// One tool call; also the id of its approval, when it needs one.
    ToolCallId,
    "tc"
);
id!(
    /// An MCP server's request for the person's input during a tool call.
    InputId,
    "in"
);
id!(
    /// A tool call its MCP server runs as a task (the Tasks extension): the gateway's
    /// own id for it, not the server's.
    TaskId,
    "tsk"
);

/// A stored status that is none of its kind's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {text:?}")]
pub struct UnknownStatus {
    pub kind: &'static str,
    pub text: String,
}

/// Who owns conversations: the token's `sub` (a person, or a client with no person).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct Subject(String);

impl Subject {
    pub fn new(subject: impl Into<String>) -> Self {
        Self(subject.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! status {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownStatus;

            fn from_str(text: &str) -> Result<Self, UnknownStatus> {
                match text {
                    $($text => Ok(Self::$variant),)+
                    other => Err(UnknownStatus {
                        kind: stringify!($name),
                        text: other.to_owned(),
                    }),
                }
            }
        }

        // Stored as its text, so the column stays readable and portable.
        impl sqlx::Type<sqlx::Any> for $name {
            fn type_info() -> sqlx::any::AnyTypeInfo {
                <str as sqlx::Type<sqlx::Any>>::type_info()
            }
        }

        impl<'q> sqlx::Encode<'q, sqlx::Any> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut <sqlx::Any as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Any>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Any> for $name {
            fn decode(
                value: <sqlx::Any as sqlx::Database>::ValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&str as sqlx::Decode<'r, sqlx::Any>>::decode(value)?;
                Ok(text.parse()?)
            }
        }
    };
}

status!(
    /// Who wrote a stored part.
    Role {
        User => "user",
        Assistant => "assistant",
        Tool => "tool",
    }
);

status!(
    /// Where a stored part of an answer stands.
    MessageStatus {
        Streaming => "streaming",
        Complete => "complete",
        Cancelled => "cancelled",
        Interrupted => "interrupted",
        Error => "error",
    }
);

status!(
    /// Where a tool call stands: stored with the call, and (one of [`Self::RESULTS`])
    /// the stream's `tool_result` status.
    CallStatus {
        Running => "running",
        Cancelled => "cancelled",
        Interrupted => "interrupted",
        Ok => "ok",
        Error => "error",
        Denied => "denied",
        Unavailable => "unavailable",
    }
);

status!(
    /// Where a background task (a tool call its server runs as an MCP task) stands.
    TaskStatus {
        Working => "working",
        InputRequired => "input_required",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
);

impl TaskStatus {
    /// Whether it has ended: its result (or why it has none) is final.
    pub fn is_end(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

impl CallStatus {
    /// How a call ends by itself: the statuses a `tool_result` event carries. The
    /// others say where a call stands while it runs (`running`) or why the answer
    /// left it unfinished (`cancelled`, `interrupted`); no event carries those.
    pub const RESULTS: [Self; 4] = [Self::Ok, Self::Error, Self::Denied, Self::Unavailable];

    /// Whether this is one of [`Self::RESULTS`].
    pub fn is_result(self) -> bool {
        Self::RESULTS.contains(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_their_own_kind() {
        let id = MessageId::new();
        assert!(id.as_str().starts_with("msg_"));
        assert_eq!(id.as_str().parse::<MessageId>(), Ok(id.clone()));
        assert!(id.as_str().parse::<ConversationId>().is_err());
        for bad in [
            "",
            "msg_",
            "msg_xyz",
            "msg_0123",
            "../etc/passwd",
            "msg_0190ABCDEF",
        ] {
            assert!(bad.parse::<MessageId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn statuses_read_back_what_they_write() {
        for status in [
            CallStatus::Running,
            CallStatus::Ok,
            CallStatus::Denied,
            CallStatus::Interrupted,
        ] {
            assert_eq!(status.as_str().parse::<CallStatus>(), Ok(status));
        }
        assert_eq!(
            serde_json::to_string(&MessageStatus::Streaming).unwrap(),
            "\"streaming\""
        );
    }
}
