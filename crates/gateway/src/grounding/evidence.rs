//! What the answer's tool calls returned, as the values an answer may state: every
//! number (and which field held it), the length of every list that is whole, every
//! date, time and text. Structured content is read as JSON; a text result is read
//! as JSON when it is, else with the same finder the answer is read with.

use serde_json::Value;

use super::claims::{self, Stated};
use super::values::{self, Clock, Day};
use maitred_protocol::ids::ToolCallId;

/// One successful call's result.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub call: ToolCallId,
    /// The tool's name ("getCustomers"), whose noun a count may be of.
    pub tool: String,
    pub content: Value,
}

impl Source {
    /// A result as the call returned it: its structured content, else its text
    /// (read as JSON when it is JSON).
    pub(crate) fn new(
        call: ToolCallId,
        tool: &str,
        text: &str,
        structured: Option<&Value>,
    ) -> Self {
        let content = match structured {
            Some(value) => value.clone(),
            None => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        };
        Self {
            call,
            tool: tool.to_owned(),
            content,
        }
    }
}

/// A value one result states.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fact {
    Number {
        n: f64,
        /// The field that holds it (`""` in free text), lowercased.
        key: String,
        /// Inside a list's item, where it counts something of that item only.
        nested: bool,
        /// A list's `total` or `count`: how many records match in all.
        total: bool,
    },
    /// How many items a list holds; `whole`: the list is all there is (no `total`
    /// beyond it, nothing more to fetch).
    Listed {
        n: usize,
        whole: bool,
    },
    Date(Day),
    Time(Clock),
    /// A text, lowercased, or a field's name in words.
    Text(String),
}

/// Paging fields: they say how the page was cut, not anything about the records.
const PAGING: &[&str] = &[
    "skip", "returned", "limit", "offset", "hasmore", "has_more", "page", "pagesize",
];

/// Every result's facts, in the order the calls were made.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    pub sources: Vec<(Source, Vec<Fact>)>,
}

impl Evidence {
    pub(crate) fn new(sources: Vec<Source>) -> Self {
        Self {
            sources: sources
                .into_iter()
                .map(|source| {
                    let mut facts = Vec::new();
                    walk(&source.content, "", false, &mut facts);
                    (source, facts)
                })
                .collect(),
        }
    }

    /// The `total` of every list result, with the result that gave it: what an
    /// answer's count of records should be.
    pub(crate) fn totals(&self) -> Vec<(f64, &Source)> {
        self.sources
            .iter()
            .flat_map(|(source, facts)| {
                facts.iter().filter_map(move |f| match f {
                    Fact::Number { n, total: true, .. } => Some((*n, source)),
                    _ => None,
                })
            })
            .collect()
    }
}

fn walk(value: &Value, key: &str, nested: bool, facts: &mut Vec<Fact>) {
    match value {
        Value::Number(n) => {
            if let Some(n) = n.as_f64()
                && !PAGING.contains(&key)
            {
                facts.push(Fact::Number {
                    n,
                    key: key.to_owned(),
                    nested,
                    total: !nested && (key == "total" || key == "count"),
                });
            }
        }
        Value::String(text) => text_facts(text, key, nested, facts),
        Value::Array(items) => {
            facts.push(Fact::Listed {
                n: items.len(),
                whole: true,
            });
            for item in items {
                walk(item, key, true, facts);
            }
        }
        Value::Object(fields) => {
            let total = ["total", "count"]
                .iter()
                .find_map(|k| fields.get(*k).and_then(Value::as_f64));
            let more = ["hasMore", "has_more"]
                .iter()
                .any(|k| fields.get(*k).and_then(Value::as_bool) == Some(true));
            for (name, field) in fields {
                facts.push(Fact::Text(words_of(name)));
                if let Value::Array(items) = field {
                    let whole =
                        !more && total.is_none_or(|t| values::same_number(t, items.len() as f64));
                    facts.push(Fact::Listed {
                        n: items.len(),
                        whole,
                    });
                    for item in items {
                        walk(item, &name.to_lowercase(), true, facts);
                    }
                } else {
                    walk(field, &name.to_lowercase(), nested, facts);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// A text's own facts: itself, the dates and times inside it, and what the finder
/// reads in it (a number written in a note, a price in a description).
fn text_facts(text: &str, key: &str, nested: bool, facts: &mut Vec<Fact>) {
    facts.push(Fact::Text(text.to_lowercase()));
    for day in embedded_dates(text) {
        facts.push(Fact::Date(day));
        if let Some(year) = day.year {
            facts.push(Fact::Number {
                n: f64::from(year),
                key: "year".to_owned(),
                nested: true,
                total: false,
            });
        }
    }
    facts.extend(embedded_times(text).into_iter().map(Fact::Time));
    if let Some(n) = values::digits(text.trim()) {
        facts.push(Fact::Number {
            n,
            key: key.to_owned(),
            nested,
            total: false,
        });
        return;
    }
    for found in claims::find(text) {
        match found.stated {
            Stated::Count { n, .. } | Stated::Number(n) | Stated::Money(n) => {
                facts.push(Fact::Number {
                    n,
                    key: key.to_owned(),
                    nested,
                    total: false,
                })
            }
            Stated::Date(days) => facts.extend(days.into_iter().map(Fact::Date)),
            Stated::Time {
                clock,
                loose: false,
            } => facts.push(Fact::Time(clock)),
            Stated::Time { loose: true, .. } | Stated::Name(_) => {}
        }
    }
}

/// `YYYY-MM-DD` anywhere in a text (a timestamp's date included).
fn embedded_dates(text: &str) -> Vec<Day> {
    let bytes = text.as_bytes();
    let mut days = Vec::new();
    for i in 0..bytes.len().saturating_sub(9) {
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_digit();
        if before_ok
            && let Some(window) = text.get(i..i + 10)
            && let Some(day) = values::iso_date(window)
        {
            days.push(day);
        }
    }
    days
}

/// `HH:MM` anywhere in a text (a timestamp's time included).
fn embedded_times(text: &str) -> Vec<Clock> {
    let bytes = text.as_bytes();
    let mut clocks = Vec::new();
    for (i, b) in bytes.iter().enumerate() {
        if *b != b':' || i == 0 {
            continue;
        }
        let digit = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_digit);
        if !(digit(i + 1) && digit(i + 2)) || digit(i + 3) || !digit(i - 1) {
            continue;
        }
        let hour_from = if i >= 2 && digit(i - 2) { i - 2 } else { i - 1 };
        if hour_from > 0 && digit(hour_from - 1) {
            continue;
        }
        let hour: Option<u32> = text.get(hour_from..i).and_then(|h| h.parse().ok());
        let minute: Option<u32> = text.get(i + 1..i + 3).and_then(|m| m.parse().ok());
        if let (Some(hour), Some(minute)) = (hour, minute)
            && let Some(clock) = Clock::new(hour, minute)
        {
            clocks.push(clock);
        }
    }
    clocks
}

/// `bookingCount` → "booking count".
fn words_of(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_uppercase() {
            out.push(' ');
            out.extend(c.to_lowercase());
        } else if c == '_' || c == '-' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(value: Value) -> Vec<Fact> {
        let mut facts = Vec::new();
        walk(&value, "", false, &mut facts);
        facts
    }

    #[test]
    fn a_page_of_a_list_is_not_the_whole_list() {
        let page = facts(
            json!({ "items": [{ "name": "Ada" }, { "name": "Bob" }], "total": 60, "returned": 2, "skip": 0, "hasMore": true }),
        );
        assert!(page.contains(&Fact::Listed { n: 2, whole: false }));
        assert!(page.contains(&Fact::Number {
            n: 60.0,
            key: "total".into(),
            nested: false,
            total: true
        }));
        assert!(
            !page
                .iter()
                .any(|f| matches!(f, Fact::Number { key, .. } if key == "returned"))
        );
        let whole = facts(json!({ "items": [1, 2, 3], "total": 3 }));
        assert!(whole.contains(&Fact::Listed { n: 3, whole: true }));
    }

    #[test]
    fn timestamps_give_their_date_and_time() {
        let found = facts(json!({ "dateTime": "2026-11-25T19:00:00Z" }));
        assert!(found.contains(&Fact::Date(Day::new(Some(2026), 11, 25).unwrap())));
        assert!(found.contains(&Fact::Time(Clock::new(19, 0).unwrap())));
        assert!(found.contains(&Fact::Text("date time".into())));
    }

    #[test]
    fn plain_text_results_are_read_like_answers() {
        let source = Source::new(
            ToolCallId::new(),
            "t",
            "There are 20 tables, open from 12:00.",
            None,
        );
        let evidence = Evidence::new(vec![source]);
        let facts = &evidence.sources[0].1;
        assert!(
            facts
                .iter()
                .any(|f| matches!(f, Fact::Number { n, .. } if *n == 20.0))
        );
        assert!(facts.contains(&Fact::Time(Clock::new(12, 0).unwrap())));
    }
}
