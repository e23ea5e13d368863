//! The language model the gateway talks to.

use secrecy::SecretString;

#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub model: String,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// How the model's tool calls are read: native deltas, text, or either.
    pub tool_calls: ToolCallMode,
}

/// How a model's tool calls are read (`tool_calls` per model in the gateway config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallMode {
    /// Native `tool_calls` deltas, and text that is one call naming an offered tool.
    #[default]
    Auto,
    /// Native `tool_calls` deltas only.
    Native,
    /// The tools are described in the system prompt; calls come as text.
    Text,
}
