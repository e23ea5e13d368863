//! Choosing tools for a question and filling their arguments, from nothing but the
//! tools' names, titles, descriptions and input schemas.

mod fill;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::comparisons::Operand;
use super::facts::Facts;
use super::fields::{self, Dialect, Field, SortStyle};
use super::filter;
use super::roles::{Role, role};
use super::schema::{self, Property};
use super::words::{action_synonyms, bare_tool_name, content_stems, listed, split_words, stem};
use fill::fill;
use maitred_llm::ToolDef;

/// At most this many tool calls in one turn.
const MAX_CALLS: usize = 3;
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
