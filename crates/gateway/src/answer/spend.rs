//! Budgets around one model turn: its worst case (the estimated prompt plus the
//! output cap) is reserved before it is sent, and settled with what the model says
//! it used once it ends, the rest refunded. A turn that cannot be reserved is not
//! sent: the answer stops with the `budget` error, saying which budget is spent.

use super::ports::{BudgetAsk, Held, Remaining, Reserved};
use super::{Answer, Answerer, Stop};
use maitred_llm::budget::{estimate_tokens, tools_tokens};
use maitred_llm::{ChatRequest, ToolCall, Usage};

/// A turn's reservation, with the prompt estimate it was made with.
pub(super) struct TurnHold {
    held: Held,
    input_tokens: u64,
}

/// What a turn that ended had done, for its settlement.
pub(super) struct Spent<'a> {
    /// The model that answered; `None`: no model was reached, so nothing is owed.
    pub model: Option<&'a str>,
    /// What the model reported (zero when it reports nothing).
    pub usage: Usage,
    pub text: &'a str,
    pub calls: &'a [ToolCall],
}

impl Answerer {
    /// Reserves the turn's worst case; when a budget applies, the request's output is
    /// capped at what was reserved for it.
    pub(super) async fn reserve_turn(
        &self,
        answer: &Answer<'_>,
        request: &mut ChatRequest,
    ) -> Result<Option<TurnHold>, Stop> {
        let input_tokens =
            self.models
                .prompt_size(self.models.primary(), request)
                .map_or_else(|| estimate_request(request), |size| size.total()) as u64;
        let ask = BudgetAsk {
            answer: answer.recorder.answer(),
            roles: &answer.user.roles,
            input_tokens,
            output_tokens: u64::from(self.limits.max_output_tokens),
        };
        match self.budgets.reserve(&ask).await? {
            Reserved::Free => Ok(None),
            Reserved::Held(held) => {
                request.max_tokens = Some(self.limits.max_output_tokens);
                Ok(Some(TurnHold { held, input_tokens }))
            }
            Reserved::Refused(left) => {
                answer.recorder.budget(&left).await?;
                Err(Stop::Budget(refusal(&left)))
            }
        }
    }

    /// Settles the turn with its real usage, or, when the model reported none, with
    /// the estimates of its prompt and what it wrote. A failed settlement leaves the
    /// reservation open, which counts it in full: the budget errs on the safe side.
    pub(super) async fn settle_turn(
        &self,
        answer: &Answer<'_>,
        hold: Option<TurnHold>,
        spent: Spent<'_>,
    ) {
        let Some(hold) = hold else {
            return;
        };
        let (model, input, output) = match spent.model {
            None => (self.models.primary(), 0, 0),
            Some(model) if spent.usage.total_tokens > 0 => (
                model,
                spent.usage.prompt_tokens,
                spent.usage.completion_tokens,
            ),
            Some(model) => {
                let calls: usize = spent
                    .calls
                    .iter()
                    .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments))
                    .sum();
                (
                    model,
                    hold.input_tokens,
                    (estimate_tokens(spent.text) + calls) as u64,
                )
            }
        };
        match self.budgets.settle(&hold.held, model, input, output).await {
            Ok(Some(left)) => {
                if let Err(error) = answer.recorder.budget(&left).await {
                    tracing::warn!(%error, "telling what is left of the budget");
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::error!(%error, reservation = %hold.held.id, "settling a budget reservation");
            }
        }
    }
}

/// The prompt's estimate when the model has none of its own.
fn estimate_request(request: &ChatRequest) -> usize {
    let messages = serde_json::to_string(&request.messages).unwrap_or_default();
    estimate_tokens(&messages) + tools_tokens(&request.tools)
}

/// What the person is told when a turn cannot be reserved.
fn refusal(left: &Remaining) -> String {
    let whose = match left.scope.as_str() {
        "person" => "Your",
        "role" => "Your team's",
        _ => "This conversation's",
    };
    let window = match left.window.as_str() {
        "daily" => " for today",
        "monthly" => " for this month",
        _ => "",
    };
    format!(
        "{whose} budget{window} is spent: the next step of this answer could cost more than is left. Ask an administrator to raise it, or try again when it renews."
    )
}
