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
    /// What this model needs beyond its address: a local model's limits.
    pub profile: ModelProfile,
}

/// What a model needs from the gateway beyond its address, per model: the
/// `MAITRED_LLM_*` variables for the primary, a fallback's own keys for each fallback.
/// The defaults suit a hosted model; a small local one (Ollama, llama.cpp, vLLM on a
/// laptop) wants `small`, and often `require_tool_call` and a longer first-token wait.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelProfile {
    /// A small model: tool definitions go to it compact (short descriptions, schemas
    /// without prose), within `tool_budget`.
    pub small: bool,
    /// Tokens the model takes in all (prompt and answer), if known: the history and
    /// the tool definitions are fitted within it.
    pub context_window: Option<u32>,
    /// Most tokens the tool definitions may take in the prompt (default: none for a
    /// model not marked small, 2,000 for a small one).
    pub tool_budget: Option<u32>,
    /// Most tokens one tool result may take in the prompt: long lists are cut, with
    /// a note of what is not shown (default: none for a model not marked small, 600
    /// for a small one).
    pub result_budget: Option<u32>,
    /// The first turn of each question must call a tool (`tool_choice: "required"`),
    /// for models that otherwise answer from what they imagine.
    pub require_tool_call: bool,
    /// At start, send the model the prompt every question begins with (the system
    /// prompt and the tools) for one token: a local server keeps what it read, so the
    /// first question does not wait for it.
    pub warm_up: bool,
    /// How long to wait for this model's first token, instead of the resilience
    /// setting's (slow hardware: a small model on two cores reads a prompt at
    /// 50-100 tokens a second).
    #[serde(default, deserialize_with = "super::span::optional_seconds")]
    pub first_token_timeout: Option<std::time::Duration>,
    /// What the gateway does with figures of this model's answers that no tool
    /// result states (docs/grounding.md).
    pub grounding: GroundingMode,
}

/// What becomes of an answer's figures, dates, times and names that no tool result
/// of the answer states (`grounding` per model).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GroundingMode {
    /// They are marked; the answer streams as the model writes it.
    #[default]
    Flag,
    /// An answer with any is held back and asked again once, the discrepancy named;
    /// the person sees the corrected answer, with a note that it was corrected.
    Correct,
    /// For small models: the gateway writes the figures from the results, the model
    /// only the words around them; a figure it cannot put right is left out.
    Facts,
}

/// How a model's tool calls are read (`tool_calls` per model in the gateway config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallMode {
    /// The tools are sent in the request, as in `Native`; a server that refuses
    /// them (a model without tool support) is then asked with them in the prompt,
    /// as in `Text`, from then on.
    #[default]
    Auto,
    /// The tools are sent in the request, and calls come as `tool_calls` deltas.
    /// In every mode, text that is nothing but calls naming offered tools is read as
    /// those calls (a server's grammar or a small model may write them as text).
    Native,
    /// The tools are described in the system prompt; calls come as text.
    Text,
}
