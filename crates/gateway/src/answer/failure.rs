//! Why an answer stopped early, as the `error` event tells it: a stable code, and a
//! message a person can act on that names no provider internals.

use super::ports::StoreError;
use maitred_llm::ModelError;

/// Why a run ended before the model finished.
#[derive(Debug)]
pub(super) enum Stop {
    /// The person's Stop, nobody watching, or the server going down.
    Cancelled,
    Model(ModelError),
    /// The answer could not be stored: it is not the model's fault, and is not
    /// counted as the model's error.
    Storage(StoreError),
    /// A budget has not enough left for the next model turn: the message says which.
    Budget(String),
}

impl From<StoreError> for Stop {
    fn from(error: StoreError) -> Self {
        Stop::Storage(error)
    }
}

pub(super) fn model_code(error: &ModelError) -> &'static str {
    match error {
        ModelError::RateLimited { .. } => "model_rate_limited",
        ModelError::Upstream { .. } => "model_error",
        ModelError::Connection(_) => "model_unreachable",
        ModelError::Protocol(_) => "model_protocol",
        ModelError::Timeout(_) => "model_timeout",
        ModelError::Busy(_) => "model_busy",
    }
}

pub(super) fn model_message(error: &ModelError) -> String {
    match error {
        ModelError::RateLimited { .. } => {
            "The language model is busy (rate limited). Please try again in a moment.".to_owned()
        }
        ModelError::Upstream { status, .. } => {
            format!("The language model failed (HTTP {status}). Please try again.")
        }
        ModelError::Connection(_) => {
            "The connection to the language model broke off. Please try again.".to_owned()
        }
        ModelError::Protocol(_) => {
            "The language model sent an answer that could not be read. Please try again.".to_owned()
        }
        ModelError::Timeout(_) => {
            "The language model did not answer in time. Please try again.".to_owned()
        }
        ModelError::Busy(_) => {
            "The language model is busy with other questions. Please try again in a moment."
                .to_owned()
        }
    }
}

pub(super) const STORAGE_MESSAGE: &str =
    "The answer could not be saved, so it was stopped. Please try again in a moment.";

pub(super) const INTERRUPTED_MESSAGE: &str =
    "The server is restarting, so this answer was cut short. Please ask again in a moment.";
