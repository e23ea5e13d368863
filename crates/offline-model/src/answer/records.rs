//! A page of records as an answer: how many there are, what the list was narrowed to
//! and ordered by, and a table of the first few; or the count alone.

use chrono::NaiveDate;
use serde_json::{Map, Value};

use super::super::comparisons::weekday_name;
use super::super::narrow::{self, Narrowed};
use super::super::roles::Asked;
use super::super::words::{humanize, listed, split_words};
use super::{
    COLLECTION_KEYS, Context, MAX_ROWS, Outcome, bullets, count, describe, looks_temporal, noun,
    singular, table,
};

pub(super) struct Records<'v> {
    pub rows: Vec<&'v Map<String, Value>>,
    pub total: Option<u64>,
}

impl Records<'_> {
    fn total(&self) -> u64 {
        self.total.unwrap_or(0).max(self.rows.len() as u64)
    }
}

/// An array of objects, on its own or in a field, with a total when the result has one.
pub(super) fn records(value: &Value) -> Option<Records<'_>> {
    match value {
        Value::Array(items) if items.iter().all(Value::is_object) => Some(Records {
            rows: items.iter().filter_map(Value::as_object).collect(),
            total: None,
        }),
        Value::Object(fields) => {
            let total = fields
                .iter()
                .find(|(k, v)| is_total_key(k) && v.is_u64())
                .and_then(|(_, v)| v.as_u64());
            let arrays: Vec<(&String, &Vec<Value>)> = fields
                .iter()
                .filter_map(|(k, v)| Some((k, v.as_array()?)))
                .collect();
            let of_objects =
                |(_, a): &&(&String, &Vec<Value>)| !a.is_empty() && a.iter().all(Value::is_object);
            let preferred = |(k, _): &&(&String, &Vec<Value>)| {
                listed(COLLECTION_KEYS, k.to_lowercase().as_str())
            };
            let chosen = arrays
                .iter()
                .filter(of_objects)
                .find(preferred)
                .or_else(|| arrays.iter().find(of_objects))
                .or_else(|| {
                    let empty = arrays.iter().filter(|(_, a)| a.is_empty());
                    total.and_then(|_| empty.clone().find(preferred).or(empty.clone().next()))
                })?;
            // A record that holds a list (a booking and its tables) is not a page of records.
            let page = preferred(&chosen) || total.is_some() || only_paging(fields, chosen.0);
            if !page {
                return None;
            }
            Some(Records {
                rows: chosen.1.iter().filter_map(Value::as_object).collect(),
                total,
            })
        }
        _ => None,
    }
}

/// Besides the list, nothing but numbers and flags: the metadata of a page.
fn only_paging(fields: &Map<String, Value>, list_key: &str) -> bool {
    fields
        .iter()
        .filter(|(k, _)| *k != list_key)
        .all(|(_, v)| v.is_number() || v.is_boolean() || v.is_null())
}

fn is_total_key(key: &str) -> bool {
    let words = split_words(key);
    words.iter().any(|w| w == "total") || key.eq_ignore_ascii_case("count")
}

/// The records as an answer. `cut`: the result arrived cut short, so only the records
/// that arrived whole are known.
pub(super) fn answer(ctx: &Context, o: &Outcome, records: &Records, cut: bool) -> String {
    let asked = Asked::of(o.tool, o.arguments.as_ref());
    let narrowed = narrow::narrow(ctx.facts, &records.rows, &asked);
    let noun = noun(ctx, o);
    let (rows, total, which) = match &narrowed {
        Some(Narrowed { rows, said }) => (
            rows.clone(),
            rows.len() as u64,
            format!(" {}", said_as_where(said)),
        ),
        None => {
            let filtered = asked
                .filter
                .as_deref()
                .map(|f| format!(" where {}", readable_filter(f)));
            let which: String = [filtered, days(&asked)].into_iter().flatten().collect();
            (records.rows.clone(), records.total(), which)
        }
    };
    let mut notes = Vec::new();
    if cut {
        notes.push(
            "The result was cut short by the gateway's size limit, so only the records that \
             arrived whole are counted here; ask for fewer (a filter, or \"top 10\")."
                .to_owned(),
        );
    }
    if narrowed.is_some() && records.total() > records.rows.len() as u64 {
        notes.push(format!(
            "I checked the {} {noun} the tool returned, of {} in all.",
            records.rows.len(),
            records.total()
        ));
    }
    let body = if ctx.facts.counting {
        let sentence = count(&noun, total);
        format!("{}{which}.", sentence.trim_end_matches('.'))
    } else {
        listing(ctx, o, &rows, total, &which, &asked)
    };
    if notes.is_empty() {
        body
    } else {
        format!("{body}\n\n_{}_", notes.join(" "))
    }
}

fn listing(
    ctx: &Context,
    o: &Outcome,
    rows: &[&Map<String, Value>],
    total: u64,
    which: &str,
    asked: &Asked,
) -> String {
    let noun = noun(ctx, o);
    let shown = rows.len().min(MAX_ROWS);
    if shown == 0 {
        let found = if which.is_empty() {
            conditions(o, asked)
        } else {
            which.to_owned()
        };
        return format!("No {noun} found{found}.");
    }
    // The columns the list was filtered and sorted on are the ones to see.
    let mut shaped = ctx.clone();
    shaped.wanted = field_names(asked);
    let sorted = asked.sort.as_deref().map(|s| sort_words(s, rows));
    if let (Some((field, extreme)), true) = (&sorted, shown == 1 && asked.limit == Some(1)) {
        return format!(
            "The {} with the {extreme} {field}{which}:\n\n{}",
            singular(&noun),
            bullets(&shaped, rows[0], false)
        );
    }
    let called = |n: u64| {
        if n == 1 {
            singular(&noun)
        } else {
            noun.clone()
        }
    };
    let order = sorted
        .map(|(field, extreme)| format!(", {extreme} {field} first"))
        .unwrap_or_default();
    let intro = if total > shown as u64 {
        format!(
            "There are **{total}** {}{which} in all; here are the first {shown}{order}:",
            called(total)
        )
    } else {
        format!("Found **{total}** {}{which}{order}:", called(total))
    };
    let mut out = format!("{intro}\n\n{}", table(&shaped, &rows[..shown]));
    if total > shown as u64 {
        out.push_str(&format!("\n\n…and {} more.", total - shown as u64));
    }
    out
}

/// "rating < 3", "on saturday" → "where rating < 3 on saturday".
fn said_as_where(said: &[String]) -> String {
    let (days, conditions): (Vec<&String>, Vec<&String>) =
        said.iter().partition(|s| s.starts_with("on "));
    let mut parts = Vec::new();
    if !conditions.is_empty() {
        parts.push(format!(
            "where {}",
            conditions
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }
    parts.extend(days.iter().map(|s| s.to_string()));
    parts.join(" ")
}

/// A word of a filter text, as a reader takes it.
#[derive(PartialEq)]
enum FilterWord {
    Field,
    Keyword,
    Value,
}

/// The words of a filter, each with what it is; quoted text is a value throughout.
fn filter_words(filter: &str) -> Vec<(&str, FilterWord)> {
    let mut words = Vec::new();
    let mut quoted = false;
    for word in filter.split_whitespace() {
        let quotes = word.matches(['\'', '"']).count();
        let keyword = ["AND", "OR", "NOT", "LIKE", "IS", "NULL", "true", "false"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(word));
        let name = !quoted
            && quotes == 0
            && word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        let kind = match (keyword && !quoted, name) {
            (true, _) => FilterWord::Keyword,
            (false, true) => FilterWord::Field,
            (false, false) => FilterWord::Value,
        };
        words.push((word, kind));
        if quotes % 2 == 1 {
            quoted = !quoted;
        }
    }
    words
}

/// A filter as a person reads it: `bookingCount > 3 AND date = 2026-11-28` → "booking
/// count > 3 and date = Saturday 2026-11-28". Quoted text stays as written.
fn readable_filter(filter: &str) -> String {
    filter_words(filter)
        .into_iter()
        .map(|(word, kind)| {
            let unquoted = word.trim_matches(|c| c == '\'' || c == '"');
            match (kind, day_name(unquoted)) {
                (FilterWord::Keyword, _) => word.to_lowercase(),
                (_, Some(day)) => format!("{day} {unquoted}"),
                (FilterWord::Field, None) => humanize(&word.replace('.', " ")).to_lowercase(),
                (FilterWord::Value, None) => word.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// "Saturday" for `2026-11-28`.
fn day_name(text: &str) -> Option<String> {
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(humanize(weekday_name(date)))
}

fn day_text(text: &str) -> String {
    match day_name(text) {
        Some(day) => format!("{day} {text}"),
        None => text.to_owned(),
    }
}

/// " on Saturday 2026-11-28", " from … to …": the dates the call asked for.
fn days(asked: &Asked) -> Option<String> {
    let on = asked.on.as_deref();
    Some(match (asked.from.as_deref().or(on), asked.to.as_deref()) {
        (Some(a), Some(b)) if a == b => format!(" on {}", day_text(a)),
        (Some(a), Some(b)) => format!(" from {} to {}", day_text(a), day_text(b)),
        (Some(a), None) if on.is_some() => format!(" on {}", day_text(a)),
        (Some(a), None) => format!(" from {}", day_text(a)),
        (None, Some(b)) => format!(" until {}", day_text(b)),
        (None, None) => return None,
    })
}

/// The fields a filter and a sort name: `rating < 3` and `createdAt:desc` give
/// rating and createdAt.
fn field_names(asked: &Asked) -> Vec<String> {
    let mut names: Vec<String> = asked
        .filter
        .as_deref()
        .map(filter_words)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, kind)| *kind == FilterWord::Field)
        .map(|(word, _)| word.to_owned())
        .collect();
    if let Some(sort) = &asked.sort {
        for key in sort.split(',') {
            let key = key.trim().trim_start_matches('-');
            let field = key.split([':', ' ']).next().unwrap_or_default();
            if !field.is_empty() {
                names.push(field.to_owned());
            }
        }
    }
    names
}

/// The first sort key in words: the field, and "highest"/"lowest" or, for dates,
/// "latest"/"earliest".
fn sort_words(sort: &str, rows: &[&Map<String, Value>]) -> (String, &'static str) {
    let first = sort.split(',').next().unwrap_or_default().trim();
    let (field, descending) = if let Some(field) = first.strip_prefix('-') {
        (field, true)
    } else if let Some((field, direction)) = first.split_once([':', ' ']) {
        let direction = direction.trim().to_lowercase();
        (field, direction.starts_with("desc") || direction == "-1")
    } else {
        (first, false)
    };
    let dated = rows.iter().any(|row| {
        super::super::filter::lookup(row, field)
            .and_then(Value::as_str)
            .is_some_and(looks_temporal)
    });
    let extreme = match (dated, descending) {
        (true, true) => "latest",
        (true, false) => "earliest",
        (false, true) => "highest",
        (false, false) => "lowest",
    };
    (humanize(&field.replace('.', " ")).to_lowercase(), extreme)
}

/// " for date 2026-11-25 and people 4": the call's scalar arguments, paging, filter and
/// sort left out.
fn conditions(o: &Outcome, asked: &Asked) -> String {
    let Some(Value::Object(args)) = &o.arguments else {
        return String::new();
    };
    let shaping = |v: &Value| {
        let text = v.as_str();
        text.is_some() && (text == asked.filter.as_deref() || text == asked.sort.as_deref())
    };
    let pairs: Vec<(&str, &Value)> = args
        .iter()
        .filter(|(k, v)| !v.is_object() && !v.is_array() && !is_paging(k) && !shaping(v))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!(" for {}", describe(&pairs))
    }
}

fn is_paging(key: &str) -> bool {
    ["limit", "skip", "offset", "sort", "page"]
        .iter()
        .any(|w| split_words(key).iter().any(|k| k == w))
}
