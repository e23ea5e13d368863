//! Choosing tools for a question and filling their arguments, from nothing but the
//! tools' names, titles, descriptions and input schemas.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use chrono::{Days, NaiveDate};

use super::comparisons::{Op, Operand};
use super::facts::Facts;
use super::fields::{self, Dialect, Field, SortStyle};
use super::filter::{self, Condition};
use super::schema::{self, Kind, Property};
use super::words::{
    action_synonyms, bare_tool_name, content_stems, listed, same_action, split_words, stem,
};
use crate::gateway::llm::ToolDef;

/// At most this many tool calls in one turn.
const MAX_CALLS: usize = 3;
/// Records asked for when listing: as many as an answer shows.
pub(super) const PAGE: i64 = 10;
/// The last word of a parameter that holds a record's key.
const KEY_WORDS: &str = "sku code ref reference slug uuid key identifier handle";
/// Verbs that open the name of a tool that only reads.
const READ_VERBS: &str = "get list find search fetch read query lookup look show count check \
    describe browse view";
/// A name or title word says far more about a tool than a word deep in its description.
const HEADING_WEIGHT: f64 = 3.0;
const LEAD_WEIGHT: f64 = 1.5;
const BODY_WEIGHT: f64 = 0.5;
/// The least relevance for a tool to be called at all: one word of its first sentence
/// or one of its parameter names.
const MIN_RELEVANCE: f64 = LEAD_WEIGHT;
/// Each part of a question that asks about several things needs a name or title match.
const MIN_PART_RELEVANCE: f64 = HEADING_WEIGHT;

/// What one turn of planning decided.
pub(super) enum Plan<'a> {
    Calls(Vec<Call>),
    /// The tool fits but needs values the question does not give.
    Ask {
        tool: &'a ToolDef,
        missing: Vec<Property>,
        known: Map<String, Value>,
    },
    /// Nothing fits.
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Call {
    pub name: String,
    /// A JSON object as text.
    pub arguments: String,
}

/// A tool's words, by how much they say about it, and its parameters.
struct Profile<'a> {
    tool: &'a ToolDef,
    heading: BTreeSet<String>,
    lead: BTreeSet<String>,
    body: BTreeSet<String>,
    params: Vec<(Property, Role)>,
    /// The description says the result carries a total or count.
    reports_total: bool,
    /// What a filter parameter can say: the fields, and how conditions are written.
    fields: Vec<Field>,
    dialect: Option<Dialect>,
    sort_style: Option<SortStyle>,
}

impl<'a> Profile<'a> {
    fn new(tool: &'a ToolDef) -> Profile<'a> {
        let props = schema::properties(&tool.parameters);
        let first_sentence = tool
            .description
            .split_once(". ")
            .map_or(tool.description.as_str(), |(first, _)| first);
        let mut lead = content_stems(first_sentence);
        let mut body = content_stems(&tool.description);
        for prop in &props {
            lead.extend(content_stems(&prop.name));
            body.extend(content_stems(&prop.description));
        }
        let description_words: BTreeSet<String> = split_words(&tool.description)
            .iter()
            .map(|w| stem(w))
            .collect();
        let params: Vec<(Property, Role)> = props
            .into_iter()
            .map(|p| {
                let role = role(&p);
                (p, role)
            })
            .collect();
        let about = |wanted: &Role| {
            let own: Vec<&str> = params
                .iter()
                .filter(|(_, r)| r == wanted)
                .map(|(p, _)| p.description.as_str())
                .collect();
            format!("{}\n{}", tool.description, own.join("\n"))
        };
        let filter_text = about(&Role::Filter);
        let names: Vec<String> = params.iter().map(|(p, _)| p.name.clone()).collect();
        let has = |wanted: &Role| params.iter().any(|(_, r)| r == wanted);
        let listed_fields = if has(&Role::Filter) || has(&Role::Sort) {
            fields::read(&filter_text, &names)
        } else {
            Vec::new()
        };
        // What a list can be filtered on says what it lists.
        for field in &listed_fields {
            lead.extend(content_stems(&field.path));
        }
        Profile {
            tool,
            heading: heading_stems(tool),
            lead,
            body,
            reports_total: ["total", "count"]
                .iter()
                .any(|w| description_words.contains(*w)),
            fields: listed_fields,
            dialect: has(&Role::Filter)
                .then(|| Dialect::read(&filter_text))
                .flatten(),
            sort_style: has(&Role::Sort)
                .then(|| SortStyle::read(&about(&Role::Sort)))
                .flatten(),
            params,
        }
    }

    fn reads(&self) -> bool {
        reads(self.tool)
    }

    /// What the question compares or ranks by is a field this tool lists, or a date
    /// range it takes: "who spent the most" is about whatever has a `totalSpent`.
    fn understands(&self, facts: &Facts) -> f64 {
        let dated = self
            .params
            .iter()
            .any(|(_, role)| matches!(role, Role::Date(_)));
        let compared = facts
            .comparisons
            .iter()
            .filter(|c| {
                let by_date = dated && matches!(c.value, Operand::Date(_));
                by_date || filter::named_field(c, &self.fields).is_some()
            })
            .count();
        let ranked = facts
            .ordering
            .as_ref()
            .filter(|o| !o.recency)
            .and_then(|o| filter::sort_for(o, &self.fields))
            .is_some();
        LEAD_WEIGHT * (compared + usize::from(ranked)) as f64
    }

    fn relevance(&self, words: &BTreeSet<String>) -> f64 {
        words
            .iter()
            .map(|w| {
                if self.heading.contains(w) {
                    HEADING_WEIGHT
                } else if self.lead.contains(w) {
                    LEAD_WEIGHT
                } else if self.body.contains(w) {
                    BODY_WEIGHT
                } else {
                    0.0
                }
            })
            .sum()
    }

    fn mentions(&self, stem: &str) -> bool {
        self.heading.contains(stem) || self.lead.contains(stem) || self.body.contains(stem)
    }

    /// The tool fetches one record by an id it requires.
    fn by_id(&self) -> bool {
        self.params
            .iter()
            .any(|(p, role)| p.required && *role == Role::Id)
    }
}

/// Reads, by its annotation or, when a server gives none, by the verb its name opens
/// with ("list_items", "getStock").
pub(super) fn reads(tool: &ToolDef) -> bool {
    let words = split_words(bare_tool_name(&tool.name));
    let verb_reads = words.first().is_some_and(|w| listed(READ_VERBS, w));
    let verb_changes = words.iter().any(|w| action_synonyms(w).is_some());
    tool.read_only || (verb_reads && !verb_changes)
}

/// The stems of a tool's name (without the server prefix) and title.
pub(super) fn heading_stems(tool: &ToolDef) -> BTreeSet<String> {
    let mut stems = content_stems(bare_tool_name(&tool.name));
    stems.extend(content_stems(tool.title.as_deref().unwrap_or_default()));
    stems
}

/// The offered tools, read once per request.
pub(super) struct Planner<'a> {
    profiles: Vec<Profile<'a>>,
}

impl<'a> Planner<'a> {
    pub(super) fn new(tools: &'a [ToolDef]) -> Planner<'a> {
        Planner {
            profiles: tools.iter().map(Profile::new).collect(),
        }
    }

    pub(super) fn plan(&self, question: &str, facts: &Facts) -> Plan<'a> {
        if let Some(plan) = plan_action(&self.profiles, question, facts) {
            return plan;
        }
        plan_reads(&self.profiles, question, facts)
    }

    /// Some tool's name or title shares a word with the question.
    pub(super) fn names_a_tool(&self, question: &str, facts: &Facts) -> bool {
        let words = topic_words(question, facts);
        self.profiles
            .iter()
            .any(|p| p.heading.iter().any(|s| words.contains(s)))
    }

    /// Whether a call changes something, by the tool it names.
    pub(super) fn changes(&self, call: &Call) -> bool {
        self.profiles
            .iter()
            .any(|p| p.tool.name == call.name && !p.tool.read_only)
    }
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

// ---------------------------------------------------------------------------------
// Choosing

/// The question's topic words: no values (numbers, ids, emails, times) and not the
/// person's name, which would only match tools by accident.
fn topic_words(text: &str, facts: &Facts) -> BTreeSet<String> {
    let kept: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !w.chars().any(|c| c.is_ascii_digit() || "@#:/+".contains(c)))
        .collect();
    let mut stems = content_stems(&kept.join(" "));
    if let Some(name) = &facts.person {
        for word in content_stems(name) {
            stems.remove(&word);
        }
    }
    stems
}

/// A change is planned only when the question asks for it with a verb the tool uses.
fn plan_action<'a>(profiles: &[Profile<'a>], question: &str, facts: &Facts) -> Option<Plan<'a>> {
    let words = topic_words(question, facts);
    let verbs: Vec<Vec<String>> = facts
        .actions
        .iter()
        .filter_map(|v| action_synonyms(v))
        .collect();
    let (best, _) = profiles
        .iter()
        .filter(|p| !p.tool.read_only)
        .filter_map(|p| {
            let uses = |s: &String| p.mentions(s);
            let named = |s: &String| p.heading.contains(s);
            if !verbs.iter().any(|group| group.iter().any(uses)) {
                return None;
            }
            let verb_bonus = if verbs.iter().any(|group| group.iter().any(named)) {
                HEADING_WEIGHT
            } else {
                0.0
            };
            let filled = fill(p, facts).filled as f64;
            Some((p, p.relevance(&words) + verb_bonus + 0.5 * filled))
        })
        .fold(None, best_of)?;
    let filled = fill(best, facts);
    Some(if filled.missing.is_empty() {
        Plan::Calls(vec![filled.call(best.tool)])
    } else {
        Plan::Ask {
            tool: best.tool,
            missing: filled.missing,
            known: filled.args,
        }
    })
}

/// The first of the best: ties go to the tool offered first, for determinism.
fn best_of<'p, 'a>(
    best: Option<(&'p Profile<'a>, f64)>,
    next: (&'p Profile<'a>, f64),
) -> Option<(&'p Profile<'a>, f64)> {
    match best {
        Some(b) if b.1 >= next.1 => Some(b),
        _ => Some(next),
    }
}

fn plan_reads<'a>(profiles: &[Profile<'a>], question: &str, facts: &Facts) -> Plan<'a> {
    let readable: Vec<&Profile> = profiles
        .iter()
        .filter(|p| p.reads() && (!facts.ids.is_empty() || !p.by_id()))
        .collect();
    let mut picks: Vec<&Profile> = Vec::new();
    for part in parts(question) {
        if let Some(best) = best_read(
            &readable,
            &topic_words(&part, facts),
            facts,
            MIN_PART_RELEVANCE,
        ) && !picks.iter().any(|p| std::ptr::eq(*p, best))
        {
            picks.push(best);
        }
    }
    if picks.len() < 2 {
        picks = best_read(
            &readable,
            &topic_words(question, facts),
            facts,
            MIN_RELEVANCE,
        )
        .into_iter()
        .collect();
    }
    let mut calls = Vec::new();
    let mut wanting = None;
    for pick in picks.into_iter().take(MAX_CALLS) {
        let filled = fill(pick, facts);
        if filled.missing.is_empty() {
            calls.push(filled.call(pick.tool));
        } else if wanting.is_none() {
            wanting = Some((pick.tool, filled));
        }
    }
    match (calls.is_empty(), wanting) {
        (false, _) => Plan::Calls(calls),
        (true, Some((tool, filled))) => Plan::Ask {
            tool,
            missing: filled.missing,
            known: filled.args,
        },
        (true, None) => Plan::Help,
    }
}

fn best_read<'p, 'a>(
    readable: &[&'p Profile<'a>],
    words: &BTreeSet<String>,
    facts: &Facts,
    threshold: f64,
) -> Option<&'p Profile<'a>> {
    readable
        .iter()
        .filter_map(|p| {
            let relevance = p.relevance(words) + p.understands(facts);
            if relevance < threshold {
                return None;
            }
            let filled = fill(p, facts);
            let id_bonus = if p.by_id() { HEADING_WEIGHT } else { 0.0 };
            // A tool the server marks read-only is surer than one that only sounds so.
            let marked = if p.tool.read_only { 0.25 } else { 0.0 };
            let score =
                relevance + id_bonus + marked + 0.5 * (filled.filled + filled.required) as f64
                    - 2.0 * filled.missing.len() as f64;
            Some((*p, score))
        })
        .fold(None, best_of)
        .map(|(p, _)| p)
}

/// A question in parts, one per thing it asks about: "how many tables and how many
/// customers?" is two.
fn parts(question: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for piece in question.split_whitespace() {
        let word = piece
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '&')
            .to_lowercase();
        if matches!(word.as_str(), "and" | "also" | "plus" | "&") {
            parts.push(current.join(" "));
            current.clear();
            continue;
        }
        current.push(piece);
        if piece.ends_with([',', ';', '?', '!', '.']) {
            parts.push(current.join(" "));
            current.clear();
        }
    }
    parts.push(current.join(" "));
    parts.retain(|p| !p.trim().is_empty());
    parts
}

// ---------------------------------------------------------------------------------
// Filling arguments

/// What a parameter is for, read from its type, format, pattern, name and description.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    Id,
    Choice,
    Date(Side),
    Time,
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
    Flag(BTreeSet<String>),
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Single,
    From,
    To,
}

fn role(p: &Property) -> Role {
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
        _ if string && (format == "time" || has("time") || is_clock_pattern(p)) => Role::Time,
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

/// The arguments read from a question, and the required ones it does not give.
struct Filled {
    args: Map<String, Value>,
    missing: Vec<Property>,
    /// How many arguments came from the question (a page size does not count: every
    /// list tool would get one).
    filled: usize,
    /// How many of them a tool requires: a tool whose every need the question meets
    /// fits it better than one it gives optional details to.
    required: usize,
}

impl Filled {
    fn call(&self, tool: &ToolDef) -> Call {
        Call {
            name: tool.name.clone(),
            arguments: Value::Object(self.args.clone()).to_string(),
        }
    }
}

fn fill(profile: &Profile, facts: &Facts) -> Filled {
    let shape = Shape::of(profile, facts);
    let mut filled = Filled {
        args: Map::new(),
        missing: Vec::new(),
        filled: 0,
        required: 0,
    };
    for (prop, role) in &profile.params {
        let value = match role {
            Role::Date(side) => shape.date(*side),
            Role::Filter => shape.filter.clone().map(Value::String),
            Role::Sort => shape.sort.clone().map(Value::String),
            Role::Limit => limit(prop, facts, profile.reports_total, &shape).map(Value::from),
            _ => value_for(prop, role, facts),
        };
        match value {
            Some(value) => {
                if *role != Role::Limit {
                    filled.filled += 1;
                }
                if prop.required {
                    filled.required += 1;
                }
                filled.args.insert(prop.name.clone(), value);
            }
            None if prop.required => filled.missing.push(prop.clone()),
            None => {}
        }
    }
    filled
}

/// What a list call should return, worked out once for all its parameters: the
/// date range, the filter text, the sort key, and whether the tool itself applies
/// every condition the question states.
struct Shape {
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
    filter: Option<String>,
    sort: Option<String>,
    /// The sort comes from the question's "most", "latest" and the like.
    ranked: bool,
    /// No condition is left for the answer to check on the records.
    complete: bool,
}

impl Shape {
    fn of(profile: &Profile, facts: &Facts) -> Shape {
        let has_dates = profile
            .params
            .iter()
            .any(|(_, role)| matches!(role, Role::Date(_)));
        let plain = &facts.free_dates;
        let mut shape = Shape {
            from: plain.first().copied(),
            to: plain.last().copied(),
            filter: None,
            sort: None,
            ranked: false,
            complete: true,
        };
        let mut conditions: Vec<Condition> = Vec::new();
        let filters = profile.dialect.is_some() && !profile.fields.is_empty();
        for c in &facts.comparisons {
            match (&c.value, has_dates) {
                (Operand::Date(d), true) => shape.bound(c.op, *d),
                _ => match filter::field_for(c, &profile.fields).filter(|_| filters) {
                    Some(field) => conditions.push(Condition {
                        field: field.clone(),
                        op: c.op,
                        value: c.value.clone(),
                    }),
                    None => shape.complete = false,
                },
            }
        }
        if !has_dates && !plain.is_empty() {
            match filter::main_date(&profile.fields, false).filter(|_| filters) {
                Some(field) => conditions.extend(on_dates(field, plain)),
                None => shape.complete = false,
            }
        }
        if let Some(dialect) = &profile.dialect
            && !conditions.is_empty()
        {
            shape.filter = Some(filter::render(&conditions, dialect));
        }
        shape.sort_by(profile, facts, &conditions);
        shape
    }

    fn bound(&mut self, op: Op, date: NaiveDate) {
        let day = Days::new(1);
        match op {
            Op::Gt => self.from = date.checked_add_days(day),
            Op::Ge => self.from = Some(date),
            Op::Lt => self.to = date.checked_sub_days(day),
            Op::Le => self.to = Some(date),
            Op::Eq => (self.from, self.to) = (Some(date), Some(date)),
        }
    }

    fn date(&self, side: Side) -> Option<Value> {
        let date = match side {
            Side::To => self.to,
            Side::From => self.from,
            Side::Single => self.from.or(self.to),
        }?;
        Some(Value::String(date.format("%Y-%m-%d").to_string()))
    }

    /// By what the question ranks ("the most bookings"); else by what it compares, the
    /// records furthest past the bound first.
    fn sort_by(&mut self, profile: &Profile, facts: &Facts, conditions: &[Condition]) {
        let Some(style) = profile.sort_style else {
            return;
        };
        if let Some(ordering) = &facts.ordering {
            if let Some(field) = filter::sort_for(ordering, &profile.fields) {
                self.sort = Some(style.key(&field.path, ordering.descending));
                self.ranked = true;
            }
            return;
        }
        if let Some(c) = conditions
            .iter()
            .find(|c| matches!(c.value, Operand::Number(_)))
        {
            self.sort = Some(style.key(&c.field.path, c.op.upward()));
        }
    }
}

/// One date is that day; several are the range from the first to the last.
fn on_dates(field: &Field, dates: &[NaiveDate]) -> Vec<Condition> {
    let at = |op: Op, date: NaiveDate| Condition {
        field: field.clone(),
        op,
        value: Operand::Date(date),
    };
    match dates {
        [one] => vec![at(Op::Eq, *one)],
        [first, .., last] => vec![at(Op::Ge, *first), at(Op::Le, *last)],
        [] => Vec::new(),
    }
}

fn value_for(prop: &Property, role: &Role, facts: &Facts) -> Option<Value> {
    let text = |s: &String| Value::String(s.clone());
    match role {
        Role::Id => facts.ids.first().map(text),
        Role::Choice => choose(&prop.values, facts).map(Value::String),
        Role::Time => facts.times.first().map(text),
        Role::Email => facts.emails.first().map(text),
        Role::Phone => facts.phones.first().map(text),
        Role::PersonName => facts.person.as_ref().map(text),
        Role::Search => search_text(prop, facts).map(Value::String),
        Role::Text => free_text(prop, facts).map(Value::String),
        Role::PartySize => facts.party.map(Value::from),
        Role::Minutes => facts.minutes.map(Value::from),
        Role::Flag(stems) => {
            let said = !stems.is_empty() && stems.iter().all(|s| facts.stems.contains(s));
            said.then_some(Value::Bool(true))
        }
        Role::Date(_) | Role::Filter | Role::Sort | Role::Limit | Role::Other => None,
    }
}

/// To count, one record is enough when the result reports the total; "top 5" asks for
/// five; "which customer has the most" for one; a plain list for a page an answer
/// shows, when the result says how many there are in all and nothing is left for the
/// answer to check on the records.
fn limit(prop: &Property, facts: &Facts, reports_total: bool, shape: &Shape) -> Option<i64> {
    let wanted = if facts.counting && reports_total {
        1
    } else if let Some(top) = facts.top {
        i64::from(top)
    } else if shape.ranked {
        if facts.singular { 1 } else { PAGE }
    } else if reports_total && shape.complete {
        PAGE
    } else {
        return None;
    };
    let low = prop.minimum.unwrap_or(1);
    let high = prop.maximum.unwrap_or(i64::MAX);
    Some(wanted.clamp(low.min(high), high))
}

/// A free-text search is filled from quotes, or from the question's meaningful words,
/// only when the tool cannot do without it.
fn search_text(prop: &Property, facts: &Facts) -> Option<String> {
    if !prop.required {
        return None;
    }
    facts
        .quoted
        .clone()
        .or_else(|| (!facts.keywords.is_empty()).then(|| facts.keywords.join(" ")))
}

/// Quoted text, or text after a colon when the word before it names this parameter or
/// the tool needs the text.
fn free_text(prop: &Property, facts: &Facts) -> Option<String> {
    if let Some(quoted) = &facts.quoted {
        return Some(quoted.clone());
    }
    let labelled = facts.labelled.as_ref()?;
    let names = content_stems(&prop.name);
    let named = content_stems(&labelled.label)
        .iter()
        .any(|s| names.contains(s));
    (named || prop.required).then(|| labelled.text.clone())
}

/// The allowed value the question names last ("from request to approved" means approved).
fn choose(values: &[String], facts: &Facts) -> Option<String> {
    values
        .iter()
        .filter_map(|value| Some((position(value, facts)?, value)))
        .fold(None, |best: Option<(usize, &String)>, next| match best {
            Some(b) if b.0 >= next.0 => Some(b),
            _ => Some(next),
        })
        .map(|(_, value)| value.clone())
}

/// Where a value appears in the question, as a word index.
fn position(value: &str, facts: &Facts) -> Option<usize> {
    let words = split_words(value);
    match words.as_slice() {
        [] => None,
        [word] => {
            if super::words::is_stop_word(word) {
                return None;
            }
            let wanted = stem(word);
            facts.stems.iter().rposition(|s| same_action(s, &wanted))
        }
        _ => {
            let at = facts.phrase.rfind(&format!(" {} ", words.join(" ")))?;
            Some(facts.phrase[..at].split_whitespace().count())
        }
    }
}
