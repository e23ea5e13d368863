//! Answers written from tool results, in markdown: a count, a table of records, the
//! fields of one record, a confirmation of a change, or what a failing tool said.

mod records;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::MODEL_NAME;
use super::facts::Facts;
use super::plan::{heading_stems, reads};
use super::salvage::salvage;
use super::schema::Property;
use super::words::{
    bare_tool_name, content_stems, humanize, is_name_like, listed, split_words, stem,
};
use maitred_llm::ToolDef;

const MAX_ROWS: usize = 10;
const MAX_COLUMNS: usize = 6;
const MAX_FIELDS: usize = 8;
const MAX_CELL_CHARS: usize = 60;
const MAX_LISTED: usize = 40;
const MAX_QUOTE_CHARS: usize = 1500;

/// Field names under which a result usually keeps its records.
const COLLECTION_KEYS: &str = "items results data records rows entries list hits values";
const LEADING_VERBS: &str = "get list find search fetch read query lookup look show";
const DATE_WORDS: &str = "date time day at on hour opens closes start end from to until since";
/// When a record was created or changed: rarely what a question is about.
const AUDIT_WORDS: &str = "created updated modified deleted activity";
const STATUS_WORDS: &str = "status state type kind category stage phase role visibility level";
const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "not ",
    "invalid",
    "unknown",
    "refused",
    "denied",
    "unavailable",
    "taken",
    "closed",
    "missing",
    "required",
    "must",
    "no such",
];

/// One tool call and what came back.
pub(super) struct Outcome<'a> {
    pub tool: Option<&'a ToolDef>,
    /// The name the call used: the tool may no longer be on offer.
    pub name: &'a str,
    pub arguments: Option<Value>,
    pub content: &'a str,
}

#[derive(Clone)]
struct Context<'a> {
    question: &'a str,
    facts: &'a Facts,
    /// The question's topic stems: columns named by them come first.
    asked: BTreeSet<String>,
    /// Fields the call filtered or sorted on (`rating`, `customer.name`): shown first.
    wanted: Vec<String>,
}

pub(super) fn answer(question: &str, facts: &Facts, outcomes: &[Outcome]) -> String {
    let ctx = Context {
        question,
        facts,
        asked: content_stems(question),
        wanted: Vec::new(),
    };
    match outcomes {
        [] => "There are no tool results to report.".to_owned(),
        [one] => section(&ctx, one),
        many => many
            .iter()
            .map(|o| format!("### {}\n\n{}", title(o), section(&ctx, o)))
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

fn title(o: &Outcome) -> String {
    match o.tool {
        Some(tool) => tool_title(tool),
        None if o.name.is_empty() => "The tool".to_owned(),
        None => humanize(bare_tool_name(o.name)),
    }
}

fn section(ctx: &Context, o: &Outcome) -> String {
    let content = o.content.trim();
    let (value, cut) = match serde_json::from_str::<Value>(content) {
        Ok(value) => (value, false),
        Err(_) => match salvage(content) {
            Some(value) => (value, true),
            // Data that cannot be read is described, never pasted into the chat.
            None if content.starts_with(['{', '[']) => {
                return format!(
                    "**{}** returned {} bytes of data that I could not read.",
                    title(o),
                    content.len()
                );
            }
            None => return reported(o, content, looks_like_error(content)),
        },
    };
    if let Some(message) = error_message(&value) {
        return reported(o, &message, true);
    }
    if let Some(found) = records::records(&value) {
        return records::answer(ctx, o, &found, cut);
    }
    if let Some(scalars) = scalar_list(&value) {
        return listed_values(ctx, o, &scalars);
    }
    match &value {
        Value::Object(fields) if o.tool.is_some_and(|t| !reads(t)) => {
            format!(
                "Done: **{}** went through.\n\n{}",
                title(o),
                bullets(ctx, fields, true)
            )
        }
        Value::Object(fields) => bullets(ctx, fields, false),
        Value::String(text) => reported(o, text, looks_like_error(text)),
        Value::Null => format!("**{}** returned nothing.", title(o)),
        other => format!("**{}** answered **{}**.", title(o), cell(other)),
    }
}

// ---------------------------------------------------------------------------------
// Replies without results

/// What a tool still needs, named as its schema names it.
pub(super) fn ask(tool: &ToolDef, missing: &[Property], known: &Map<String, Value>) -> String {
    let needs: Vec<String> = missing
        .iter()
        .map(|p| {
            let name = humanize(&p.name).to_lowercase();
            let about = p.description.trim().trim_end_matches('.');
            if about.is_empty() {
                format!("- **{name}**")
            } else {
                format!("- **{name}**: {about}")
            }
        })
        .collect();
    let mut out = format!(
        "To do that (**{}**) I still need:\n\n{}",
        tool_title(tool),
        needs.join("\n")
    );
    if !known.is_empty() {
        let pairs: Vec<(&str, &Value)> = known.iter().map(|(k, v)| (k.as_str(), v)).collect();
        out.push_str(&format!("\n\nSo far I have {}.", describe(&pairs)));
    }
    out.push_str("\n\nReply with these and I will go ahead.");
    out
}

/// Who is answering, and what the tools on offer can do.
pub(super) fn help(tools: &[ToolDef]) -> String {
    let mut out = format!(
        "I'm **{MODEL_NAME}**, the gateway's built-in offline model: no LLM is configured, so \
I match your words against the tools on offer and understand only short, direct requests. \
I could not match this one to a tool."
    );
    let mut offered: Vec<String> = Vec::new();
    for tool in tools {
        let mut line = format!("- {}", tool_title(tool));
        if !tool.read_only {
            line.push_str(" (makes changes)");
        }
        if !offered.contains(&line) {
            offered.push(line);
        }
    }
    if offered.is_empty() {
        out.push_str("\n\nNo tools are available right now, so there is nothing I can look up.");
    } else {
        out.push_str(&format!("\n\nI can help with:\n\n{}", offered.join("\n")));
    }
    out.push_str(
        "\n\nFor free-form questions, configure a real LLM endpoint (any OpenAI-compatible API) \
for the gateway.",
    );
    out
}

fn tool_title(tool: &ToolDef) -> String {
    tool.title
        .clone()
        .unwrap_or_else(|| humanize(bare_tool_name(&tool.name)))
}

// ---------------------------------------------------------------------------------
// Counts and nouns

fn count(noun: &str, n: u64) -> String {
    if n == 1 {
        format!("There is **1** {}.", singular(noun))
    } else {
        format!("There are **{n}** {noun}.")
    }
}

/// What the records are called: the question's own words when they name the tool,
/// else the tool's name ("people" in "how many people can we seat" may not be what the
/// tool lists).
fn noun(ctx: &Context, o: &Outcome) -> String {
    let heading = o
        .tool
        .map(heading_stems)
        .unwrap_or_else(|| content_stems(bare_tool_name(o.name)));
    let names_tool = |phrase: &str| content_stems(phrase).iter().any(|s| heading.contains(s));
    let counted = &ctx.facts.counted;
    if let Some(phrase) = counted.iter().find(|p| names_tool(p)) {
        return phrase.clone();
    }
    let plural = split_words(ctx.question)
        .into_iter()
        .find(|w| w.len() > 3 && w.ends_with('s') && heading.contains(&stem(w)));
    let own = tool_noun(o.name);
    if let Some(word) = plural {
        // "hours" is better said as the tool says it: "opening hours".
        return if own.ends_with(&word) { own } else { word };
    }
    if own.ends_with('s') {
        own
    } else if own.is_empty() {
        "records".to_owned()
    } else {
        format!("{own} records")
    }
}

/// `getOpeningHours` → "opening hours", `getCustomerById` → "customer".
fn tool_noun(name: &str) -> String {
    let mut words = split_words(bare_tool_name(name));
    if words
        .first()
        .is_some_and(|w| listed(LEADING_VERBS, w.as_str()))
    {
        words.remove(0);
    }
    if words.ends_with(&["by".to_owned(), "id".to_owned()]) {
        words.truncate(words.len() - 2);
    }
    words.join(" ")
}

fn singular(noun: &str) -> String {
    let (head, last) = noun.rsplit_once(' ').unwrap_or(("", noun));
    let one = if let Some(base) = last.strip_suffix("ies") {
        format!("{base}y")
    } else if ["ses", "xes", "ches", "shes"]
        .iter()
        .any(|e| last.ends_with(e))
    {
        last[..last.len() - 2].to_owned()
    } else if last.ends_with('s') && !last.ends_with("ss") {
        last[..last.len() - 1].to_owned()
    } else {
        last.to_owned()
    };
    if head.is_empty() {
        one
    } else {
        format!("{head} {one}")
    }
}

fn describe(pairs: &[(&str, &Value)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{} {}", humanize(k).to_lowercase(), cell(v)))
        .collect();
    match parts.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => parts.join(""),
    }
}

// ---------------------------------------------------------------------------------
// Lists of plain values

struct ScalarList<'v> {
    key: Option<&'v str>,
    items: &'v [Value],
    context: Vec<(&'v str, &'v Value)>,
}

fn scalar_list(value: &Value) -> Option<ScalarList<'_>> {
    let plain = |items: &[Value]| items.iter().all(|v| !v.is_object() && !v.is_array());
    match value {
        Value::Array(items) if plain(items) => Some(ScalarList {
            key: None,
            items,
            context: Vec::new(),
        }),
        // A record with a list among many fields (a booking's `comments`) is a
        // record, not a list; a list answer carries at most a few words of context.
        Value::Object(fields) if fields.len() <= 4 => {
            let (key, items) = fields
                .iter()
                .filter_map(|(k, v)| Some((k, v.as_array()?)))
                .find(|(_, items)| plain(items))?;
            let context = fields
                .iter()
                .filter(|(k, v)| *k != key && !v.is_null() && !v.is_object() && !v.is_array())
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            Some(ScalarList {
                key: Some(key),
                items,
                context,
            })
        }
        _ => None,
    }
}

fn listed_values(ctx: &Context, o: &Outcome, list: &ScalarList) -> String {
    let noun = list
        .key
        .map(|k| humanize(k).to_lowercase())
        .unwrap_or_else(|| noun(ctx, o));
    let about = if list.context.is_empty() {
        String::new()
    } else {
        format!(" for {}", describe(&list.context))
    };
    let n = list.items.len();
    if ctx.facts.counting {
        let sentence = count(&noun, n as u64);
        return format!("{}{about}.", sentence.trim_end_matches('.'));
    }
    if n == 0 {
        return format!("No {noun} found{about}.");
    }
    let mut shown: Vec<String> = list.items.iter().take(MAX_LISTED).map(cell).collect();
    if n > MAX_LISTED {
        shown.push(format!("…and {} more", n - MAX_LISTED));
    }
    format!("Found **{n}** {noun}{about}:\n\n{}", shown.join(", "))
}

// ---------------------------------------------------------------------------------
// Columns: which fields of a record to show, and how

struct Column {
    key: String,
    child: Option<String>,
}

impl Column {
    fn get<'v>(&self, row: &'v Map<String, Value>) -> Option<&'v Value> {
        let value = row.get(&self.key)?;
        match &self.child {
            Some(child) => value.get(child),
            None => Some(value),
        }
    }

    /// `key`, or `key.child` for a field of a nested object.
    fn path(&self) -> String {
        match &self.child {
            Some(child) => format!("{}.{child}", self.key),
            None => self.key.clone(),
        }
    }

    fn leaf(&self) -> &str {
        self.child.as_deref().unwrap_or(&self.key)
    }

    fn label(&self) -> String {
        match &self.child {
            Some(child) if is_name_like(child) => humanize(&self.key),
            Some(child) => format!("{} {}", humanize(&self.key), humanize(child).to_lowercase()),
            None => humanize(&self.key),
        }
    }

    fn is_id(&self) -> bool {
        split_words(self.leaf()).last().is_some_and(|w| w == "id")
    }
}

/// The fields worth showing, best first: asked for, then names, dates and times,
/// statuses, numbers, the rest, and last when a record was created or changed. Nested
/// objects give their names (and what was asked).
fn columns(
    ctx: &Context,
    rows: &[&Map<String, Value>],
    top_level_ids: bool,
    max: usize,
) -> Vec<Column> {
    let wants_ids = ctx.asked.contains("id");
    let mut found: Vec<Column> = Vec::new();
    for row in rows {
        for (key, value) in row.iter() {
            for child in children(ctx, key, value) {
                let known = found
                    .iter()
                    .any(|c| c.key == *key && c.child.as_deref() == child);
                if !known {
                    found.push(Column {
                        key: key.clone(),
                        child: child.map(str::to_owned),
                    });
                }
            }
        }
    }
    let mut ranked: Vec<(u8, usize, Column)> = found
        .into_iter()
        .filter(|c| !c.is_id() || wants_ids || (top_level_ids && c.child.is_none()))
        .filter_map(|c| {
            let sample = rows.iter().filter_map(|r| c.get(r)).find(|v| !blank(v))?;
            let reference = top_level_ids && c.child.is_none() && c.is_id();
            // A value every row shares says nothing about any one of them.
            let constant = rows.len() >= 3 && rows.iter().all(|r| c.get(r) == Some(sample));
            let rank = if ctx.wanted.contains(&c.path()) {
                0
            } else if reference {
                1
            } else if constant {
                7
            } else {
                rank(ctx, &c, sample)
            };
            Some((rank, usize::from(c.child.is_some()), c))
        })
        .collect();
    ranked.sort_by_key(|(rank, depth, _)| (*rank, *depth));
    ranked.into_iter().take(max).map(|(_, _, c)| c).collect()
}

/// `None` for the value itself, or the fields of a nested object worth a column.
fn children<'v>(ctx: &Context, key: &str, value: &'v Value) -> Vec<Option<&'v str>> {
    match value {
        Value::Object(fields) => fields
            .iter()
            .filter(|(k, v)| {
                let wanted = ctx.wanted.contains(&format!("{key}.{k}"));
                !v.is_object()
                    && !v.is_array()
                    && (is_name_like(k) || asked_about(ctx, k) || wanted)
            })
            .map(|(k, _)| Some(k.as_str()))
            .collect(),
        _ => vec![None],
    }
}

fn asked_about(ctx: &Context, key: &str) -> bool {
    content_stems(key).iter().any(|s| ctx.asked.contains(s))
}

fn rank(ctx: &Context, column: &Column, sample: &Value) -> u8 {
    let leaf = column.leaf();
    let words = split_words(leaf);
    let has = |list: &str| words.iter().any(|w| listed(list, w));
    if asked_about(ctx, leaf) {
        0
    } else if is_name_like(leaf) {
        1
    } else if has(AUDIT_WORDS) {
        6
    } else if has(DATE_WORDS) || sample.as_str().is_some_and(looks_temporal) {
        2
    } else if has(STATUS_WORDS) {
        3
    } else if sample.is_number() {
        4
    } else {
        5
    }
}

fn looks_temporal(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    let date = digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7);
    let clock = b.len() == 5 && digits(0..2) && b.get(2) == Some(&b':') && digits(3..5);
    date || clock
}

fn blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(_) => cell(value).is_empty(),
        _ => false,
    }
}

fn table(ctx: &Context, rows: &[&Map<String, Value>]) -> String {
    let columns = columns(ctx, rows, false, MAX_COLUMNS);
    if columns.is_empty() {
        return format!("({} records without fields to show)", rows.len());
    }
    let line = |cells: Vec<String>| format!("| {} |", cells.join(" | "));
    let mut lines = vec![
        line(columns.iter().map(|c| escape(&c.label())).collect()),
        line(columns.iter().map(|_| "---".to_owned()).collect()),
    ];
    for row in rows {
        let cells = columns
            .iter()
            .map(|c| {
                c.get(row)
                    .map_or_else(|| "—".to_owned(), |v| escape(&cell(v)))
            })
            .map(|text| {
                if text.is_empty() {
                    "—".to_owned()
                } else {
                    text
                }
            })
            .collect();
        lines.push(line(cells));
    }
    lines.join("\n")
}

fn bullets(ctx: &Context, fields: &Map<String, Value>, with_ids: bool) -> String {
    let columns = columns(ctx, &[fields], with_ids, MAX_FIELDS);
    if columns.is_empty() {
        return "(no details were returned)".to_owned();
    }
    columns
        .iter()
        .filter_map(|c| Some(format!("- **{}**: {}", c.label(), cell(c.get(fields)?))))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------
// Cells

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "—".to_owned(),
        Value::Bool(true) => "yes".to_owned(),
        Value::Bool(false) => "no".to_owned(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        Value::String(s) => inert(&shorten(&timestamp(s).unwrap_or_else(|| s.clone()))),
        Value::Array(items) => shorten(&array_cell(items)),
        Value::Object(fields) => fields
            .iter()
            .find(|(k, _)| is_name_like(k))
            .map_or_else(String::new, |(_, v)| cell(v)),
    }
}

/// Plain values joined; objects by their names; nothing when they have none.
fn array_cell(items: &[Value]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|item| match item {
            Value::Object(_) => cell(item),
            Value::Array(_) => String::new(),
            _ => cell(item),
        })
        .filter(|p| !p.is_empty())
        .collect();
    parts.join(", ")
}

/// `2026-09-19T18:48:00.000Z` → `2026-09-19 18:48`; midnight → the date alone.
fn timestamp(text: &str) -> Option<String> {
    let date = text.get(..10)?;
    let clock = text.get(11..16)?;
    let shaped =
        looks_temporal(date) && text.as_bytes().get(10) == Some(&b'T') && looks_temporal(clock);
    if !shaped {
        return None;
    }
    Some(if clock == "00:00" {
        date.to_owned()
    } else {
        format!("{date} {clock}")
    })
}

fn shorten(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_CELL_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(MAX_CELL_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// Text from a tool, made unable to load anything when the answer is shown: a
/// Markdown image (`![…](…)`) loses its `!` role and an HTML tag its `<`, so both read
/// as the text they are. Links stay links: they open only when the person clicks.
fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('!', Some('[')) => {
                out.push_str("!\\");
                continue;
            }
            ('<', Some(next)) if next.is_ascii_alphabetic() || matches!(next, '/' | '!' | '?') => {
                out.push_str("&lt;");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

// ---------------------------------------------------------------------------------
// Errors and plain text

fn error_message(value: &Value) -> Option<String> {
    let fields = value.as_object()?;
    let flagged = fields.get("isError").and_then(Value::as_bool) == Some(true);
    match fields.get("error") {
        Some(Value::String(message)) => Some(message.clone()),
        Some(Value::Object(error)) => Some(
            error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| Value::Object(error.clone()).to_string(), str::to_owned),
        ),
        _ if flagged => Some(
            fields
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| value.to_string(), str::to_owned),
        ),
        _ => None,
    }
}

/// A tool message that reports a failure rather than a result.
pub(super) fn is_failure(content: &str) -> bool {
    match serde_json::from_str::<Value>(content.trim()) {
        Ok(Value::String(text)) => looks_like_error(&text),
        Ok(value) => error_message(&value).is_some(),
        Err(_) => looks_like_error(content),
    }
}

fn looks_like_error(text: &str) -> bool {
    let lower = text.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// What a tool said in words, quoted; for a failure, the times it offers instead.
fn reported(o: &Outcome, text: &str, failed: bool) -> String {
    let title = title(o);
    let text = text.trim();
    if text.is_empty() {
        return format!("**{title}** returned nothing.");
    }
    let mut out = if failed {
        format!(
            "**{title}** did not work. The tool reported:\n\n{}",
            quote(text)
        )
    } else {
        format!("**{title}** answered:\n\n{}", quote(text))
    };
    let offered = offered_times(o, text);
    if failed && !offered.is_empty() {
        let times: Vec<String> = offered.iter().map(|t| format!("**{t}**")).collect();
        out.push_str(&format!(
            "\n\nIt mentions these times: {}. Reply with the one you prefer.",
            times.join(", ")
        ));
    }
    out
}

fn quote(text: &str) -> String {
    let mut kept: String = text.chars().take(MAX_QUOTE_CHARS).collect();
    if kept.len() < text.len() {
        kept.push('…');
    }
    inert(&kept)
        .lines()
        .map(|line| format!("> {line}").trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `HH:MM` times in a message, leaving out the ones the call itself asked for.
fn offered_times(o: &Outcome, text: &str) -> Vec<String> {
    let asked: Vec<String> = match &o.arguments {
        Some(Value::Object(args)) => args
            .values()
            .filter_map(Value::as_str)
            .flat_map(clock_times)
            .collect(),
        _ => Vec::new(),
    };
    let mut times = Vec::new();
    for time in clock_times(text) {
        if !asked.contains(&time) && !times.contains(&time) {
            times.push(time);
        }
    }
    times
}

fn clock_times(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let mut times = Vec::new();
    for (i, _) in text.match_indices(':') {
        let two_before = i >= 2 && digit(i - 2);
        let start = if two_before {
            i - 2
        } else {
            i.saturating_sub(1)
        };
        let bounded_left = start == 0 || !digit(start - 1);
        if i == 0
            || !digit(i - 1)
            || !bounded_left
            || !digit(i + 1)
            || !digit(i + 2)
            || digit(i + 3)
        {
            continue;
        }
        let hour: u32 = text[start..i].parse().unwrap_or(99);
        let minute: u32 = text[i + 1..i + 3].parse().unwrap_or(99);
        if hour < 24 && minute < 60 {
            times.push(format!("{hour:02}:{minute:02}"));
        }
    }
    times
}
