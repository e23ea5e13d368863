//! The answer's last step: its final text checked against the results of its tool
//! calls (`crate::grounding`), and what the model's `grounding` setting does with a
//! figure no result states: mark it (`flag`), ask the model again once (`correct`),
//! or put the figures right from the results (`facts`). Whatever the setting, an
//! answer whose calls all failed says it could not get the data rather than state
//! figures, and the claims go out as a `grounding` event stored with the answer.

use super::turn::Reply;
use super::{Answer, Answerer, Asking, Run, Stop};
use crate::grounding::{self, Evidence};
use maitred_core::settings::GroundingMode;
use maitred_llm::Message;
use maitred_protocol::events::Claim;
use maitred_protocol::ids::{MessageStatus, PartId};

/// Shown under an answer that was asked again before it was shown.
pub(super) const CORRECTED_NOTE: &str =
    "\n\n_Checked against the tool results and corrected before it was shown._";

impl Answerer {
    /// Whether the next turn's text is held back until it is checked: in `correct`
    /// and `facts`, and whenever every call so far has failed.
    pub(super) fn holds_answers(&self, answer: &Answer<'_>) -> bool {
        answer.asking != Asking::Task
            && (self.models.grounding(self.models.primary()) != GroundingMode::Flag
                || answer.recorder.all_calls_failed().is_some())
    }

    /// The model answered without calling a tool: its text is checked, shown when it
    /// was held, and its claims recorded.
    pub(super) async fn conclude(
        &self,
        answer: &Answer<'_>,
        run: &mut Run,
        reply: &Reply,
        turn: u32,
    ) -> Result<(), Stop> {
        // A task's result is posted without a call of this answer to check it by.
        if answer.asking == Asking::Task {
            return self.show_held(answer, reply, &reply.text).await.map(drop);
        }
        let recorder = answer.recorder;
        let question = question(&run.messages);
        let evidence = Evidence::new(recorder.results());
        let mut text = reply.text.clone();
        let mut claims = grounding::check(&text, &question, &evidence);
        let mut note = "";
        let stated = grounding::unsupported(&claims).next().is_some();
        if let Some(failed) = recorder.all_calls_failed().filter(|_| stated) {
            // The gateway's own words, which state no data.
            text = could_not_get_the_data(&failed);
            claims = Vec::new();
        } else if reply.held && stated {
            match self.models.grounding(&reply.model) {
                GroundingMode::Flag => {}
                GroundingMode::Correct => {
                    if let Some(corrected) =
                        self.correct(answer, run, &claims, &evidence, turn).await?
                    {
                        text = corrected;
                        claims = grounding::check(&text, &question, &evidence);
                        note = CORRECTED_NOTE;
                    }
                }
                GroundingMode::Facts => {
                    text = self.facts(run, &text, &question, &evidence);
                    claims = grounding::check(&text, &question, &evidence);
                }
            }
        }
        if reply.held || text != reply.text {
            let shown = format!("{text}{note}");
            if let Some(Message::Assistant { content, .. }) = run.messages.last_mut() {
                *content = Some(shown.clone());
            }
            let part = self.show_held(answer, reply, &shown).await?;
            return self.record_claims(answer, &part, &shown, claims).await;
        }
        self.record_claims(answer, &reply.part, &text, claims).await
    }

    async fn record_claims(
        &self,
        answer: &Answer<'_>,
        part: &PartId,
        text: &str,
        claims: Vec<Claim>,
    ) -> Result<(), Stop> {
        // Nothing to say of an answer that made no call and states nothing.
        if text.trim().is_empty() || (claims.is_empty() && !answer.recorder.made_calls()) {
            return Ok(());
        }
        Ok(answer.recorder.grounding(part, claims).await?)
    }

    /// Shows the text of a held reply as its turn; a reply already shown stays as it is.
    async fn show_held(
        &self,
        answer: &Answer<'_>,
        reply: &Reply,
        text: &str,
    ) -> Result<PartId, Stop> {
        if !reply.held {
            return Ok(reply.part.clone());
        }
        let recorder = answer.recorder;
        recorder.begin_turn(&reply.model);
        if !text.is_empty() {
            recorder.token(text.to_owned()).await?;
        }
        let (part, _) = recorder.end_turn(&[], MessageStatus::Complete).await?;
        Ok(part)
    }

    /// Asks the model once more, its answer's unsupported claims named; its new
    /// answer, unless it has none.
    async fn correct(
        &self,
        answer: &Answer<'_>,
        run: &mut Run,
        claims: &[Claim],
        evidence: &Evidence,
        turn: u32,
    ) -> Result<Option<String>, Stop> {
        let mut messages = run.messages.clone();
        messages.push(Message::User {
            content: discrepancy(claims, evidence),
        });
        let again = self
            .model_turn(answer, &messages, &[], true, turn + 1, true)
            .await?;
        run.usage.add(again.usage);
        let text = again.text.trim();
        Ok((!text.is_empty()).then(|| text.to_owned()))
    }

    /// The answer with its figures put right from the results; where the model's
    /// words keep none of them, what the offline model writes from the results.
    fn facts(&self, run: &Run, text: &str, question: &str, evidence: &Evidence) -> String {
        let rewritten = grounding::rewrite::rewrite(text, question, evidence);
        let keeps_figures = grounding::check(&rewritten, question, evidence)
            .iter()
            .any(|c| c.tool_call_id.is_some());
        if keeps_figures {
            return rewritten;
        }
        match written_from_results(run) {
            Some(facts) if rewritten.trim().is_empty() => facts,
            Some(facts) => format!("{}\n\n{facts}", rewritten.trim_end()),
            None => rewritten,
        }
    }
}

/// The question this answer answers: the last thing the person wrote.
fn question(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// What the model is told of its answer's unsupported claims, with the totals the
/// results give (what a count of records should be).
fn discrepancy(claims: &[Claim], evidence: &Evidence) -> String {
    let named: Vec<String> = grounding::unsupported(claims)
        .map(|c| format!("\"{}\"", c.text))
        .collect();
    let totals: Vec<String> = evidence
        .totals()
        .iter()
        .map(|(n, source)| format!("{} returned total {n}", source.tool))
        .collect();
    let mut message = format!(
        "Your answer states {}, which no tool result contains.",
        named.join(", ")
    );
    if !totals.is_empty() {
        message.push_str(&format!(
            " The results say: {}. A list's total is how many records there are, not the number of items on the page.",
            totals.join("; ")
        ));
    }
    message.push_str(
        " Write the answer again for the user, stating only figures, dates, times and names that the tool results contain; leave out what they do not say.",
    );
    message
}

/// Instead of figures no failed call could have given: that the data could not be had.
fn could_not_get_the_data(failed: &[(String, String)]) -> String {
    let reasons: Vec<String> = failed
        .iter()
        .map(|(tool, why)| format!("{tool}: {why}"))
        .collect();
    format!(
        "I could not get the data to answer this: every tool call failed ({}). Nothing here comes from your data; please try again or ask differently.",
        reasons.join("; ")
    )
}

/// What the offline model writes from the results the conversation ends with (the
/// last turn's, before the model's answer).
#[cfg(feature = "offline-model")]
fn written_from_results(run: &Run) -> Option<String> {
    let until = run
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::Tool { .. }))?;
    maitred_offline_model::OfflineModel::new().write_from_results(&run.messages[..=until], &[])
}

#[cfg(not(feature = "offline-model"))]
fn written_from_results(_: &Run) -> Option<String> {
    None
}
