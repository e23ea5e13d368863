//! A tool's arguments filled from what a question states: ids, dates, times, party
//! sizes, names and free text; and for a list, its date range, filter, sort and page.

use chrono::{Days, NaiveDate};
use serde_json::{Map, Value};

use super::super::comparisons::{Op, Operand};
use super::super::facts::Facts;
use super::super::fields::Field;
use super::super::filter::{self, Condition};
use super::super::roles::{Role, Side};
use super::super::schema::Property;
use super::super::words::{content_stems, is_stop_word, same_action, split_words, stem};
use super::{Call, Profile};
use maitred_llm::ToolDef;

/// Records asked for when listing: as many as an answer shows.
const PAGE: i64 = 10;

/// The arguments read from a question, and the required ones it does not give.
pub(super) struct Filled {
    pub args: Map<String, Value>,
    pub missing: Vec<Property>,
    /// How many arguments came from the question (a page size does not count: every
    /// list tool would get one).
    pub filled: usize,
    /// How many of them a tool requires: a tool whose every need the question meets
    /// fits it better than one it gives optional details to.
    pub required: usize,
}

impl Filled {
    pub(super) fn call(&self, tool: &ToolDef) -> Call {
        Call {
            name: tool.name.clone(),
            arguments: Value::Object(self.args.clone()).to_string(),
        }
    }
}

pub(super) fn fill(profile: &Profile, facts: &Facts) -> Filled {
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
        // "between 18:00 and 20:00": the window's end is the last time named, and only
        // when two were named, so one time is never both ends.
        Role::Time(Side::To) => (facts.times.len() > 1)
            .then(|| facts.times.last())
            .flatten()
            .map(text),
        Role::Time(_) => facts.times.first().map(text),
        Role::Email => facts.emails.first().map(text),
        Role::Phone => facts.phones.first().map(text),
        Role::PersonName => facts.person.as_ref().map(text),
        Role::Search => search_text(prop, facts).map(Value::String),
        Role::Text => free_text(prop, facts).map(Value::String),
        Role::PartySize => facts.party.map(Value::from),
        Role::Minutes => facts.minutes.map(Value::from),
        Role::Month => facts.months.first().map(text),
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
            if is_stop_word(word) {
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
