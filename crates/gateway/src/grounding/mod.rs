//! Answers you can check: the figures, dates, times and names an answer states,
//! each traced to the tool call whose result states it, or marked unsupported.
//! docs/grounding.md says what is checked and what is not.
//!
//! `claims` finds what the answer states (`tokens` cuts it into words, `values`
//! reads each value in its spellings), `evidence` gathers what the answer's results
//! state, `matching` pairs the two, and `rewrite` puts an answer's figures right for
//! the `facts` setting.

mod claims;
mod evidence;
mod matching;
pub(crate) mod rewrite;
mod tokens;
mod values;

pub(crate) use evidence::{Evidence, Source};

use claims::{Found, Stated};
use maitred_protocol::events::{Claim, ClaimStatus};

/// What `answer` states, each claim with the call whose result states it. A value
/// the question itself states ("for 4 people") is the person's, not a claim of the
/// answer, and is left out.
pub(crate) fn check(answer: &str, question: &str, evidence: &Evidence) -> Vec<Claim> {
    let asked = claims::find(question);
    claims::find(answer)
        .into_iter()
        .filter(|found| !asked.iter().any(|q| same_value(&q.stated, &found.stated)))
        .map(|found| claim(after_sentence_start(answer, found, evidence), evidence))
        .collect()
}

/// How many times `text` states the number `n` as a figure (a count, a number or an
/// amount), read in the spellings grounding accepts ("forty", "1,200", "$60").
/// `maitred eval` judges a count answer with it, so an answer is right exactly when
/// grounding would read the true figure in it.
pub fn times_stated(text: &str, n: f64) -> usize {
    claims::find(text)
        .iter()
        .filter(|found| match found.stated {
            Stated::Count { n: stated, .. } | Stated::Number(stated) | Stated::Money(stated) => {
                values::same_number(stated, n)
            }
            _ => false,
        })
        .count()
}

/// A name that opens a sentence may have taken the sentence's first word with it
/// ("Booked Wanda."): when the results do not state it whole but state what follows
/// that word, the claim is what follows.
fn after_sentence_start(answer: &str, found: Found, evidence: &Evidence) -> Found {
    let Stated::Name(name) = &found.stated else {
        return found;
    };
    let before: String = answer.chars().take(found.start).collect();
    let opens = before
        .trim_end_matches(|c: char| c.is_whitespace() || "*_#>-".contains(c))
        .chars()
        .last()
        .is_none_or(|c| ".!?:\n".contains(c));
    let Some((first, rest)) = name.split_once(' ') else {
        return found;
    };
    if !opens || rest.chars().count() < 3 || matching::source_of(&found.stated, evidence).is_some()
    {
        return found;
    }
    let rest_stated = Stated::Name(rest.to_owned());
    if matching::source_of(&rest_stated, evidence).is_none() {
        return found;
    }
    let skipped = found.text.chars().count() - rest.chars().count();
    debug_assert!(skipped > first.chars().count());
    Found {
        start: found.start + skipped,
        end: found.end,
        text: found.text.chars().skip(skipped).collect(),
        stated: rest_stated,
    }
}

fn claim(found: Found, evidence: &Evidence) -> Claim {
    let source = matching::source_of(&found.stated, evidence);
    Claim {
        kind: found.kind(),
        value: found.value(),
        start: found.start as u64,
        end: found.end as u64,
        status: if source.is_some() {
            ClaimStatus::Supported
        } else {
            ClaimStatus::Unsupported
        },
        tool_call_id: source.map(|s| s.call.clone()),
        text: found.text,
    }
}

fn same_value(a: &Stated, b: &Stated) -> bool {
    let number = |s: &Stated| match s {
        Stated::Count { n, .. } | Stated::Number(n) | Stated::Money(n) => Some(*n),
        _ => None,
    };
    match (a, b) {
        (Stated::Date(x), Stated::Date(y)) => x.iter().any(|d| y.iter().any(|e| d.same(e))),
        (Stated::Time { clock: x, .. }, Stated::Time { clock: y, .. }) => x == y,
        (Stated::Name(x), Stated::Name(y)) => x.eq_ignore_ascii_case(y),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => values::same_number(x, y),
            _ => false,
        },
    }
}

/// The claims no result supports.
pub(crate) fn unsupported(claims: &[Claim]) -> impl Iterator<Item = &Claim> {
    claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use maitred_protocol::events::ClaimKind;
    use maitred_protocol::ids::ToolCallId;
    use serde_json::json;

    #[test]
    fn a_misread_count_and_an_invented_figure_are_unsupported() {
        let call = ToolCallId::new();
        let result = json!({ "items": [{ "name": "Ada Lovelace" }], "total": 60, "returned": 1, "hasMore": true });
        let evidence = Evidence::new(vec![Source::new(
            call.clone(),
            "getCustomers",
            "",
            Some(&result),
        )]);
        let claims = check(
            "We have 40 customers, and 7 of them booked this week.",
            "How many customers do we have?",
            &evidence,
        );
        assert_eq!(claims.len(), 2);
        assert_eq!(
            (claims[0].kind, claims[0].value.as_str()),
            (ClaimKind::Count, "40")
        );
        assert_eq!((claims[0].start, claims[0].end), (8, 10));
        assert!(unsupported(&claims).count() == 2);
        let right = check("We have 60 customers.", "How many customers?", &evidence);
        assert_eq!(right[0].status, ClaimStatus::Supported);
        assert_eq!(right[0].tool_call_id, Some(call));
    }

    #[test]
    fn a_sentence_opening_word_is_not_part_of_a_name_the_results_state() {
        let call = ToolCallId::new();
        let booking = json!({ "guest": { "name": "Wanda Maximoff" } });
        let evidence = Evidence::new(vec![Source::new(
            call.clone(),
            "createBooking",
            "",
            Some(&booking),
        )]);
        let claims = check("Done. Booked Wanda Maximoff.", "Book Wanda", &evidence);
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].text, "Wanda Maximoff");
        assert_eq!((claims[0].start, claims[0].end), (13, 27));
        assert_eq!(claims[0].tool_call_id, Some(call));
        let invented = check("Booked Customer Zed.", "Book", &evidence);
        assert_eq!(invented[0].text, "Booked Customer Zed");
        assert_eq!(invented[0].status, ClaimStatus::Unsupported);
    }

    #[test]
    fn a_number_is_stated_in_any_spelling_grounding_reads() {
        assert_eq!(times_stated("We have forty customers.", 40.0), 1);
        assert_eq!(times_stated("Total: 1,200 covers", 1200.0), 1);
        assert_eq!(times_stated("$60 for 60 customers.", 60.0), 2);
        assert_eq!(times_stated("There are 61 customers.", 60.0), 0);
        assert_eq!(times_stated("No customers at all.", 60.0), 0);
    }

    #[test]
    fn what_the_question_states_is_not_a_claim() {
        let evidence = Evidence::new(Vec::new());
        let claims = check(
            "No table is free for 4 people on 25 November at 7pm.",
            "Is a table free for four people on 2026-11-25 at 19:00?",
            &evidence,
        );
        assert!(claims.is_empty(), "{claims:?}");
    }
}
