//! What each parameter of a tool is for, read from its type, format, pattern, name and
//! description; and, by those roles, what a call's arguments asked of a list.

use std::collections::BTreeSet;

use serde_json::Value;

use super::fields;
use super::schema::{self, Kind, Property};
use super::words::{content_stems, listed, split_words};
use maitred_llm::ToolDef;

/// The last word of a parameter that holds a record's key.
const KEY_WORDS: &str = "sku code ref reference slug uuid key identifier handle";

/// What a parameter is for, read from its type, format, pattern, name and description.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Role {
    Id,
    Choice,
    Date(Side),
    /// A clock time; a window's two ends (`fromTime`, `toTime`) have a side.
    Time(Side),
    Email,
    Phone,
    PersonName,
    Search,
    /// A filter expression: `rating < 3 AND …`.
    Filter,
    /// Sort keys: `rating:desc`.
    Sort,
    Text,
    Limit,
    PartySize,
    Minutes,
    /// A whole month, `YYYY-MM`.
    Month,
    Flag(BTreeSet<String>),
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Single,
    From,
    To,
}

pub(super) fn role(p: &Property) -> Role {
    let words = split_words(&p.name);
    let has = |w: &str| words.iter().any(|x| x == w);
    let last = words.last().map_or("", String::as_str);
    let format = p.format.as_deref().unwrap_or_default();
    let about = content_stems(&format!("{} {}", p.name, p.description));
    let mentions = |stems: &[&str]| stems.iter().any(|s| about.contains(*s));
    let numeric = matches!(p.kind, Kind::Integer | Kind::Number);
    let string = p.kind == Kind::String;
    match () {
        _ if string && last == "id" => Role::Id,
        // A required code that names one record: `sku`, `code`, `slug`.
        _ if string && p.required && listed(KEY_WORDS, last) => Role::Id,
        _ if !p.values.is_empty() => Role::Choice,
        _ if string && fields::is_filter_param(&p.name, &p.description) => Role::Filter,
        _ if string && fields::is_sort_param(&p.name) => Role::Sort,
        _ if string && format == "date-time" => Role::Other,
        _ if string && (format == "date" || has("date") || has("day")) => Role::Date(side(&words)),
        _ if string && has("month") => Role::Month,
        _ if string && (format == "time" || has("time") || is_clock_pattern(p)) => {
            Role::Time(side(&words))
        }
        _ if string && (format == "email" || has("email") || has("mail")) => Role::Email,
        _ if string && (has("phone") || has("mobile") || has("tel")) => Role::Phone,
        _ if string && (has("name") || has("fullname")) => Role::PersonName,
        _ if string
            && ["query", "search", "keyword", "keywords", "term", "q"]
                .iter()
                .any(|w| has(w)) =>
        {
            Role::Search
        }
        _ if string
            && [
                "text", "note", "comment", "message", "content", "body", "remark",
            ]
            .iter()
            .any(|w| has(w)) =>
        {
            Role::Text
        }
        _ if numeric && is_limit(&words, &p.description) => Role::Limit,
        _ if numeric
            && mentions(&[
                "peopl", "person", "guest", "party", "pax", "cover", "diner", "adult",
            ]) =>
        {
            Role::PartySize
        }
        _ if numeric && mentions(&["duration", "minute", "length"]) => Role::Minutes,
        _ if p.kind == Kind::Boolean => Role::Flag(content_stems(&p.name)),
        _ => Role::Other,
    }
}

fn is_clock_pattern(p: &Property) -> bool {
    p.pattern
        .as_deref()
        .is_some_and(|pattern| pattern.contains(':'))
}

fn side(words: &[String]) -> Side {
    let any = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if any(&[
        "from", "start", "since", "after", "begin", "min", "earliest",
    ]) {
        Side::From
    } else if any(&["to", "end", "until", "till", "before", "max", "latest"]) {
        Side::To
    } else {
        Side::Single
    }
}

fn is_limit(words: &[String], description: &str) -> bool {
    let has = |w: &str| words.iter().any(|x| x == w);
    let description = description.to_lowercase();
    has("limit")
        || has("top")
        || has("take")
        || (has("page") && has("size"))
        || (has("per") && has("page"))
        || (has("max") && has("results"))
        || ["records to return", "results to return", "items to return"]
            .iter()
            .any(|p| description.contains(p))
}

/// What a call's arguments asked of a list, by the roles of the parameters they fill.
#[derive(Debug, Default)]
pub(super) struct Asked {
    pub filter: Option<String>,
    pub sort: Option<String>,
    pub limit: Option<u64>,
    /// A date parameter narrowed the list.
    pub dated: bool,
    /// The dates asked for: one day, or the first and last of a range.
    pub on: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
}

impl Asked {
    pub(super) fn of(tool: Option<&ToolDef>, arguments: Option<&Value>) -> Asked {
        let (Some(tool), Some(Value::Object(args))) = (tool, arguments) else {
            return Asked::default();
        };
        let mut asked = Asked::default();
        for prop in schema::properties(&tool.parameters) {
            let Some(value) = args.get(&prop.name).filter(|v| !v.is_null()) else {
                continue;
            };
            match role(&prop) {
                Role::Filter => asked.filter = value.as_str().map(str::to_owned),
                Role::Sort => asked.sort = value.as_str().map(str::to_owned),
                Role::Limit => asked.limit = value.as_u64(),
                Role::Date(side) => {
                    asked.dated = true;
                    let text = value.as_str().map(str::to_owned);
                    match side {
                        Side::Single => asked.on = text,
                        Side::From => asked.from = text,
                        Side::To => asked.to = text,
                    }
                }
                _ => {}
            }
        }
        asked
    }
}
