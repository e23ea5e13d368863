//! Whether a result states what a claim states: the same number (a count only from
//! a list's total, a whole list's length or a field about the counted thing), the
//! same amount, day, time or name, however each was written.

use super::claims::Stated;
use super::evidence::{Evidence, Fact, Source};
use super::values::{self, Clock};

/// The first result that states `stated`, in the order the calls were made.
pub(crate) fn source_of<'e>(stated: &Stated, evidence: &'e Evidence) -> Option<&'e Source> {
    evidence
        .sources
        .iter()
        .find(|(_, facts)| facts.iter().any(|fact| supports(fact, stated)))
        .map(|(source, _)| source)
}

fn supports(fact: &Fact, stated: &Stated) -> bool {
    match (stated, fact) {
        (
            Stated::Count { n, noun },
            Fact::Number {
                n: m, key, nested, ..
            },
        ) => values::same_number(*n, *m) && (!nested || about(key, noun)),
        (Stated::Count { n, .. }, Fact::Listed { n: m, whole }) => {
            *whole && values::same_number(*n, *m as f64)
        }
        (Stated::Number(n) | Stated::Money(n), Fact::Number { n: m, .. }) => {
            values::same_number(*n, *m)
        }
        (Stated::Number(n), Fact::Listed { n: m, .. }) => values::same_number(*n, *m as f64),
        (Stated::Date(days), Fact::Date(day)) => days.iter().any(|d| d.same(day)),
        (Stated::Time { clock, loose }, Fact::Time(other)) => {
            clock == other || (*loose && afternoon(*clock) == Some(*other))
        }
        (Stated::Name(name), Fact::Text(text)) => names(name, text),
        _ => false,
    }
}

/// "7" read as the evening.
fn afternoon(clock: Clock) -> Option<Clock> {
    Clock::new(clock.hour + 12, clock.minute)
}

/// Kinds of things a count is of, and the fields that count them.
const KINDS: &[(&[&str], &[&str])] = &[
    (
        &[
            "people", "person", "persons", "guests", "guest", "covers", "diners", "pax", "adults",
        ],
        &[
            "people", "guest", "party", "cover", "pax", "size", "persons",
        ],
    ),
    (
        &["seats", "seat", "places", "chairs"],
        &["seat", "capacity", "places"],
    ),
    (&["minutes", "mins"], &["duration", "minutes"]),
];

/// A field inside a record counts the claim's noun: `bookingCount` for "bookings",
/// `people` for "guests".
fn about(key: &str, noun: &str) -> bool {
    let stem = noun.trim_end_matches('s');
    if stem.len() >= 3 && (key.contains(stem) || (key.len() >= 3 && stem.contains(key))) {
        return true;
    }
    KINDS
        .iter()
        .any(|(nouns, keys)| nouns.contains(&noun) && keys.iter().any(|k| key.contains(k)))
}

/// A result's text holds the name as whole words (an email or id exactly); a phone
/// number matches by its digits.
fn names(name: &str, text: &str) -> bool {
    let digits: String = name.chars().filter(char::is_ascii_digit).collect();
    if digits.len() >= 7 && !name.chars().any(char::is_alphabetic) {
        let theirs: String = text.chars().filter(char::is_ascii_digit).collect();
        return theirs.ends_with(&digits) || (digits.ends_with(&theirs) && theirs.len() >= 7);
    }
    let wanted = normalise(name);
    let text = normalise(text);
    let mut from = 0;
    while let Some(at) = text[from..].find(&wanted) {
        let start = from + at;
        let end = start + wanted.len();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if edge(text[..start].chars().last()) && edge(text[end..].chars().next()) {
            return true;
        }
        from = start + wanted.chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounding::claims::find;
    use crate::grounding::evidence::Source;
    use maitred_protocol::ids::ToolCallId;
    use serde_json::json;

    fn evidence(results: &[serde_json::Value]) -> (Evidence, Vec<ToolCallId>) {
        let ids: Vec<ToolCallId> = results.iter().map(|_| ToolCallId::new()).collect();
        let sources = results
            .iter()
            .zip(&ids)
            .map(|(r, id)| Source::new(id.clone(), "getCustomers", "", Some(r)))
            .collect();
        (Evidence::new(sources), ids)
    }

    fn supported(text: &str, evidence: &Evidence) -> Vec<(String, Option<ToolCallId>)> {
        find(text)
            .into_iter()
            .map(|f| {
                let source = source_of(&f.stated, evidence).map(|s| s.call.clone());
                (f.text, source)
            })
            .collect()
    }

    fn page() -> serde_json::Value {
        json!({
            "items": [
                { "name": "Ada Lovelace", "email": "ada@example.com", "bookingCount": 7, "phone": "+44 20 7946 0958" },
                { "name": "Bob Stone", "email": "bob@example.com", "bookingCount": 2, "phone": null }
            ],
            "total": 60, "returned": 2, "skip": 0, "hasMore": true
        })
    }

    #[test]
    fn a_count_comes_from_the_total_not_the_page() {
        let (evidence, ids) = evidence(&[page()]);
        let found = supported(
            "We have sixty customers; 2 customers are listed; forty customers.",
            &evidence,
        );
        assert_eq!(found[0], ("sixty".into(), Some(ids[0].clone())));
        assert_eq!(
            found[1],
            ("2".into(), None),
            "a page's length is no count of customers"
        );
        assert_eq!(found[2], ("forty".into(), None));
    }

    #[test]
    fn a_field_of_a_record_counts_only_its_own_thing() {
        let (evidence, ids) = evidence(&[page()]);
        let found = supported(
            "Ada Lovelace has 7 bookings. We have 7 customers.",
            &evidence,
        );
        assert_eq!(found[0].1, Some(ids[0].clone()));
        assert_eq!(found[1], ("7".into(), Some(ids[0].clone())));
        assert_eq!(found[2], ("7".into(), None));
    }

    #[test]
    fn names_emails_and_phones() {
        let (evidence, _) = evidence(&[page()]);
        let found = supported(
            "Ask ADA@example.com or call +44 20 7946 0958; Customer A wrote, not Bob Stone.",
            &evidence,
        );
        let statuses: Vec<bool> = found.iter().map(|(_, s)| s.is_some()).collect();
        assert_eq!(statuses, [true, true, false, true], "{found:?}");
    }

    #[test]
    fn the_first_of_two_results_that_state_a_figure_is_its_source() {
        let (evidence, ids) = evidence(&[json!({ "total": 12 }), json!({ "count": 12 })]);
        assert_eq!(
            supported("12 bookings", &evidence)[0].1,
            Some(ids[0].clone())
        );
    }

    #[test]
    fn dates_times_and_money_written_differently() {
        let (evidence, ids) = evidence(&[json!({
            "date": "2026-11-25", "time": "19:00", "price": 1200.5, "startsAt": "2026-11-26T12:30:00Z"
        })]);
        let found = supported(
            "On 25 November at 7pm (or 11/26/2026 at 12:30) for $1,200.50, not 24/11 at 8pm or €12.",
            &evidence,
        );
        let sources: Vec<bool> = found
            .iter()
            .map(|(_, s)| s.as_ref() == Some(&ids[0]))
            .collect();
        assert_eq!(
            sources,
            [true, true, true, true, true, false, false, false],
            "{found:?}"
        );
    }
}
