//! `POST /v1/chat/completions`'s body, as OpenAI defines it, and what maitred makes of
//! it: the caller's last user message is the question, the messages before it are
//! the history the model sees. Fields that only tune sampling (`temperature`,
//! `max_tokens`, `user`…) are accepted and ignored: the gateway's configured settings
//! apply. Client-side tools are refused, since maitred runs its own.

use serde::Deserialize;
use serde_json::Value;

use super::errors::OpenAiError;
use maitred_llm::Message;

#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<RequestMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub functions: Option<Vec<Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct RequestMessage {
    pub role: String,
    /// A string, an array of content parts, or null (an assistant message with tool calls).
    #[serde(default)]
    pub content: Option<Content>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// The request, as the answer loop takes it.
#[derive(Debug, PartialEq)]
pub struct Conversation {
    pub history: Vec<Message>,
    pub question: String,
}

impl ChatCompletionRequest {
    pub fn streams(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub fn include_usage(&self) -> bool {
        self.streams()
            && self
                .stream_options
                .as_ref()
                .and_then(|o| o.include_usage)
                .unwrap_or(false)
    }

    /// The history and the question; `budget` characters of history at most (the
    /// newest messages, and every system message), as the chat API's context budget.
    pub fn conversation(&self, budget: usize) -> Result<Conversation, OpenAiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(OpenAiError::invalid("n", "only n = 1 is supported"));
        }
        if self.tools.as_ref().is_some_and(|t| !t.is_empty())
            || self.functions.as_ref().is_some_and(|f| !f.is_empty())
        {
            return Err(OpenAiError::invalid(
                "tools",
                "maitred runs its own tools (its MCP servers'); client-side tools are not supported",
            ));
        }
        let mut messages = Vec::with_capacity(self.messages.len());
        for message in &self.messages {
            let text = message.text()?;
            messages.push(match message.role.as_str() {
                "system" | "developer" => Message::System { content: text },
                "user" => Message::User { content: text },
                "assistant" => Message::Assistant {
                    content: Some(text),
                    tool_calls: Vec::new(),
                },
                "tool" | "function" => {
                    return Err(OpenAiError::invalid(
                        "messages",
                        "tool messages are not supported: maitred runs its own tools",
                    ));
                }
                other => {
                    return Err(OpenAiError::invalid(
                        "messages",
                        format!("unknown message role {other:?}"),
                    ));
                }
            });
        }
        let question = match messages.pop() {
            Some(Message::User { content }) if !content.trim().is_empty() => {
                content.trim().to_owned()
            }
            _ => {
                return Err(OpenAiError::invalid(
                    "messages",
                    "the last message must be the user's question, and not empty",
                ));
            }
        };
        Ok(Conversation {
            history: within(messages, budget),
            question,
        })
    }
}

impl RequestMessage {
    /// The message's text: a string, or its text parts joined.
    fn text(&self) -> Result<String, OpenAiError> {
        match &self.content {
            None => Ok(String::new()),
            Some(Content::Text(text)) => Ok(text.clone()),
            Some(Content::Parts(parts)) => parts
                .iter()
                .map(|part| match (part.kind.as_str(), &part.text) {
                    ("text", Some(text)) => Ok(text.as_str()),
                    (kind, _) => Err(OpenAiError::invalid(
                        "messages",
                        format!("content parts of type {kind:?} are not supported; send text"),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|texts| texts.join("\n")),
        }
    }
}

/// Every system message, and the newest of the others that fit in `budget` characters.
pub(super) fn within(messages: Vec<Message>, budget: usize) -> Vec<Message> {
    let size = |m: &Message| match m {
        Message::System { content } | Message::User { content } => content.len(),
        Message::Assistant { content, .. } => content.as_deref().map_or(0, str::len),
        Message::Tool { content, .. } => content.len(),
    };
    let mut used = 0usize;
    let mut full = false;
    let mut keep = vec![false; messages.len()];
    for (i, message) in messages.iter().enumerate().rev() {
        if matches!(message, Message::System { .. }) {
            keep[i] = true;
        } else if !full && used + size(message) <= budget {
            used += size(message);
            keep[i] = true;
        } else {
            // Older turns would leave a gap in the conversation: none of them.
            full = true;
        }
    }
    messages
        .into_iter()
        .zip(keep)
        .filter_map(|(m, k)| k.then_some(m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: serde_json::Value) -> ChatCompletionRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_last_user_message_is_the_question_and_the_rest_history() {
        let conversation = request(serde_json::json!({
            "model": "maitred",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi, I am Ada."},
                {"role": "assistant", "content": "Hello Ada."},
                {"role": "user", "content": [{"type": "text", "text": " Who am I? "}]}
            ],
            "temperature": 0.2
        }))
        .conversation(10_000)
        .unwrap();
        assert_eq!(conversation.question, "Who am I?");
        assert_eq!(conversation.history.len(), 3);
        assert_eq!(
            conversation.history[2],
            Message::Assistant {
                content: Some("Hello Ada.".into()),
                tool_calls: Vec::new()
            }
        );
    }

    #[test]
    fn history_beyond_the_budget_loses_its_oldest_turns_not_its_system_messages() {
        let conversation = request(serde_json::json!({
            "model": "maitred",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "an old question"},
                {"role": "assistant", "content": "an old answer"},
                {"role": "user", "content": "now"}
            ]
        }))
        .conversation(20)
        .unwrap();
        assert_eq!(
            conversation.history,
            vec![
                Message::System {
                    content: "Be brief.".into()
                },
                Message::Assistant {
                    content: Some("an old answer".into()),
                    tool_calls: Vec::new()
                }
            ]
        );
    }

    #[test]
    fn requests_this_api_cannot_honour_are_refused() {
        for body in [
            serde_json::json!({"model": "maitred", "messages": []}),
            serde_json::json!({"model": "maitred", "messages": [{"role": "assistant", "content": "x"}]}),
            serde_json::json!({"model": "maitred", "messages": [{"role": "user", "content": "x"}], "n": 2}),
            serde_json::json!({"model": "maitred", "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "f"}}]}),
            serde_json::json!({"model": "maitred", "messages": [{"role": "user", "content":
                [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
        ] {
            assert!(request(body).conversation(1000).is_err());
        }
    }
}
