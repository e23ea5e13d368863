//! What model turns cost, for budgets in money, and how much one turn may write:
//! the `[prices."<model>"]` and `[budgets]` sections of the gateway's config file.
//!
//! ```toml
//! [prices."gpt-4o-mini"]                # US dollars per million tokens
//! input_per_million = 0.15
//! output_per_million = 0.60
//!
//! [budgets]
//! max_output_tokens = 4096              # a turn's cap, reserved up front
//! ```
//!
//! Money is kept in millionths of a unit (micro-dollars) as integers, so sums over
//! the ledger are exact; a token at $0.60 a million costs 0.6 micro-dollars, so the
//! cost of a turn is rounded up to the next micro-dollar.

use serde::Deserialize;

/// One model's prices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    pub input_per_million: f64,
    #[serde(default)]
    pub output_per_million: f64,
}

impl Price {
    /// The cost of a turn in micro-units: a price per million tokens is a price in
    /// micro-units per token.
    pub fn cost_micros(&self, input_tokens: u64, output_tokens: u64) -> i64 {
        let cost = input_tokens as f64 * self.input_per_million
            + output_tokens as f64 * self.output_per_million;
        cost.max(0.0).ceil() as i64
    }
}

/// How budgets are spent.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetSettings {
    /// A model turn's output cap when a budget applies: sent to the model as
    /// `max_tokens`, and reserved as the worst case before the turn.
    pub max_output_tokens: u32,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        Self {
            max_output_tokens: 4_096,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_rounds_up_to_the_next_micro_unit() {
        let price = Price {
            input_per_million: 0.15,
            output_per_million: 0.60,
        };
        assert_eq!(price.cost_micros(1_000_000, 0), 150_000);
        assert_eq!(price.cost_micros(0, 1), 1);
        assert_eq!(price.cost_micros(10, 10), 8);
        assert_eq!(Price::default().cost_micros(5, 5), 0);
    }
}
