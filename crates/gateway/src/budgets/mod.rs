//! Budgets in tokens and money per person, per role and per conversation, reserved
//! before each model turn and settled after it (the answer loop's
//! [`crate::answer::ports::Budgets`]). The database is the one truth for every
//! replica: a reservation checks what is left and writes its ledger rows in one
//! transaction, serialized per budget (PostgreSQL: the budget rows locked `FOR
//! UPDATE`; SQLite: its single writer, `BEGIN IMMEDIATE`), so parallel questions
//! cannot overshoot a cap, on one process or many.

mod ledger;
pub(crate) mod routes;

pub use ledger::DbBudgets;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Whose spending a budget caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One person (their owner key; `*`: each person, counted apart).
    Person,
    /// Everyone with a role, together: a team.
    Role,
    /// One conversation (`*`: each conversation, counted apart).
    Conversation,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Person => "person",
            Self::Role => "role",
            Self::Conversation => "conversation",
        }
    }

    /// A subject as this scope keys it. Role names are compared without regard to
    /// ASCII case, as the tool policy (`[policy.ROLE]`) and the issuer's role checks
    /// compare them: a role budget is kept under the upper-case name, so
    /// `role/operator` is the budget of everyone with OPERATOR, not of nobody.
    pub fn subject(self, subject: &str) -> String {
        match self {
            Self::Role => subject.to_ascii_uppercase(),
            Self::Person | Self::Conversation => subject.to_owned(),
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "person" => Some(Self::Person),
            "role" => Some(Self::Role),
            "conversation" => Some(Self::Conversation),
            _ => None,
        }
    }
}

/// When a budget starts again: never, each UTC day, or each UTC month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    #[default]
    Total,
    Daily,
    Monthly,
}

impl Window {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::Daily => "daily",
            Self::Monthly => "monthly",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "total" => Some(Self::Total),
            "daily" => Some(Self::Daily),
            "monthly" => Some(Self::Monthly),
            _ => None,
        }
    }

    /// The period `at` falls in, as the ledger keys it.
    pub fn period(self, at: DateTime<Utc>) -> String {
        match self {
            Self::Total => "total".to_owned(),
            Self::Daily => at.format("%Y-%m-%d").to_string(),
            Self::Monthly => at.format("%Y-%m").to_string(),
        }
    }
}

/// A budget as an ADMIN sets it. `None`: no cap of that kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub scope: Scope,
    pub subject: String,
    pub window: Window,
    pub max_tokens: Option<i64>,
    pub max_cost_micros: Option<i64>,
}

#[cfg(test)]
mod tests;
