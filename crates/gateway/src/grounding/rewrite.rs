//! The `facts` setting: the model's words kept, its figures put right from the
//! results. A claim no result states is replaced by the one value of its kind the
//! results give for it (a count of records by the total of the list of that thing);
//! where there is no such value, the clause that states it is left out.

use super::claims::{self, Found, Stated};
use super::evidence::{Evidence, Fact};
use super::{matching, same_value, values};

/// `answer` with every claim that no result states put right or left out.
pub(crate) fn rewrite(answer: &str, question: &str, evidence: &Evidence) -> String {
    let asked = claims::find(question);
    let mut chars: Vec<char> = answer.chars().collect();
    let wrong: Vec<Found> = claims::find(answer)
        .into_iter()
        .filter(|f| !asked.iter().any(|q| same_value(&q.stated, &f.stated)))
        .filter(|f| matching::source_of(&f.stated, evidence).is_none())
        .collect();
    // From the end, so the spans before each change stay where they are.
    let mut cut_until = usize::MAX;
    for found in wrong.iter().rev() {
        if found.end > cut_until {
            continue;
        }
        match replacement(&found.stated, evidence) {
            Some(right) => {
                let _replaced: Vec<char> = chars
                    .splice(found.start..found.end, right.chars())
                    .collect();
            }
            None => {
                let (from, to) = clause(&chars, found.start, found.end);
                chars.drain(from..to);
                cut_until = from;
            }
        }
    }
    tidy(&chars.into_iter().collect::<String>())
}

/// The one value the results give in place of `stated`, written as a person would.
fn replacement(stated: &Stated, evidence: &Evidence) -> Option<String> {
    match stated {
        Stated::Count { noun, .. } => {
            let stem = noun.trim_end_matches('s').to_lowercase();
            let mut totals: Vec<f64> = evidence
                .totals()
                .into_iter()
                .filter(|(_, source)| stem.len() >= 3 && source.tool.to_lowercase().contains(&stem))
                .map(|(n, _)| n)
                .collect();
            totals.dedup_by(|a, b| values::same_number(*a, *b));
            match totals.as_slice() {
                [n] => Some(values::written_number(*n)),
                _ => None,
            }
        }
        Stated::Date(_) => only(evidence, |f| match f {
            Fact::Date(day) => Some(day.written()),
            _ => None,
        }),
        Stated::Time { .. } => only(evidence, |f| match f {
            Fact::Time(clock) => Some(clock.written()),
            _ => None,
        }),
        _ => None,
    }
}

/// The value `pick` finds in the results, when they hold exactly one.
fn only(evidence: &Evidence, pick: impl Fn(&Fact) -> Option<String>) -> Option<String> {
    let mut found: Vec<String> = evidence
        .sources
        .iter()
        .flat_map(|(_, facts)| facts.iter().filter_map(&pick))
        .collect();
    found.sort();
    found.dedup();
    match found.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// The clause around `start..end`: from after the punctuation before it to its own
/// ending punctuation (kept when it ends a sentence).
fn clause(chars: &[char], start: usize, end: usize) -> (usize, usize) {
    let boundary = |c: char| matches!(c, ',' | '.' | ';' | '!' | '?' | '\n');
    let from = chars[..start]
        .iter()
        .rposition(|c| boundary(*c))
        .map_or(0, |i| i + 1);
    let to = chars[end..]
        .iter()
        .position(|c| boundary(*c))
        .map_or(chars.len(), |i| end + i);
    // "…, and 7 booked." loses ", and 7 booked" and keeps its full stop.
    let from = if from > 0 && chars[from - 1] == ',' {
        from - 1
    } else {
        from
    };
    (from, to)
}

fn tidy(text: &str) -> String {
    let mut out = text.to_owned();
    for (from, to) in [
        (" .", "."),
        (",.", "."),
        (" ,", ","),
        ("..", "."),
        ("  ", " "),
    ] {
        while out.contains(from) {
            out = out.replace(from, to);
        }
    }
    let lines: Vec<&str> = out
        .lines()
        .map(|line| line.trim_start_matches(['.', ',', ';', ' ']).trim_end())
        .collect();
    lines.join("\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounding::Source;
    use maitred_protocol::ids::ToolCallId;
    use serde_json::json;

    fn customers() -> Evidence {
        let page = json!({ "items": [{ "name": "Ada Lovelace" }], "total": 60, "returned": 1, "hasMore": true });
        Evidence::new(vec![Source::new(
            ToolCallId::new(),
            "getCustomers",
            "",
            Some(&page),
        )])
    }

    #[test]
    fn a_misread_count_is_put_right_and_an_invented_figure_left_out() {
        assert_eq!(
            rewrite(
                "We have 40 customers, and 7 of them booked this week.",
                "How many customers?",
                &customers()
            ),
            "We have 60 customers."
        );
    }

    #[test]
    fn a_sentence_with_nothing_right_goes_and_the_rest_stays() {
        assert_eq!(
            rewrite(
                "Customer A said the pizza was great. Ada Lovelace is a customer.",
                "Who are our customers?",
                &customers()
            ),
            "Ada Lovelace is a customer."
        );
    }

    #[test]
    fn a_count_of_another_thing_is_not_replaced_by_this_total() {
        assert_eq!(
            rewrite("There were 12 bookings.", "Bookings?", &customers()),
            ""
        );
    }
}
