//! The comparisons and orderings a question asks for: "more than 3 bookings", "a
//! rating below 3", "spent over 500", "booked after friday", "between 2 and 4",
//! "10 or more", "the most bookings", "the latest". Each keeps the words around it that
//! say what is compared, for matching against the fields a tool names.

use chrono::{Datelike, Days, NaiveDate};

use super::facts::{Token, date_at, number, time_at, word_at};
use super::words::{WEEKDAYS, is_measure_word, is_stop_word, listed, stem};

/// Comparators written before the value, longest first, with what they compare.
const PREFIXES: &[(&str, Op, Scope)] = &[
    ("no more than", Op::Le, Scope::Any),
    ("no less than", Op::Ge, Scope::Any),
    ("not more than", Op::Le, Scope::Any),
    ("not less than", Op::Ge, Scope::Any),
    ("more than", Op::Gt, Scope::Any),
    ("greater than", Op::Gt, Scope::Any),
    ("higher than", Op::Gt, Scope::Any),
    ("larger than", Op::Gt, Scope::Any),
    ("bigger than", Op::Gt, Scope::Any),
    ("later than", Op::Gt, Scope::Moment),
    ("less than", Op::Lt, Scope::Any),
    ("fewer than", Op::Lt, Scope::Any),
    ("lower than", Op::Lt, Scope::Any),
    ("smaller than", Op::Lt, Scope::Any),
    ("earlier than", Op::Lt, Scope::Moment),
    ("at least", Op::Ge, Scope::Any),
    ("at most", Op::Le, Scope::Any),
    ("up to", Op::Le, Scope::Any),
    ("equal to", Op::Eq, Scope::Any),
    ("over", Op::Gt, Scope::Any),
    ("above", Op::Gt, Scope::Any),
    ("exceeding", Op::Gt, Scope::Any),
    ("under", Op::Lt, Scope::Any),
    ("below", Op::Lt, Scope::Any),
    ("exactly", Op::Eq, Scope::Any),
    ("after", Op::Gt, Scope::Moment),
    ("since", Op::Ge, Scope::Moment),
    ("from", Op::Ge, Scope::Date),
    ("before", Op::Lt, Scope::Moment),
    ("until", Op::Le, Scope::Moment),
    ("till", Op::Le, Scope::Moment),
    (">=", Op::Ge, Scope::Any),
    ("<=", Op::Le, Scope::Any),
    (">", Op::Gt, Scope::Any),
    ("<", Op::Lt, Scope::Any),
    ("=", Op::Eq, Scope::Any),
];

/// Written after the value: "3 or more".
const SUFFIXES: &[(&str, Op)] = &[
    ("or more", Op::Ge),
    ("or above", Op::Ge),
    ("or higher", Op::Ge),
    ("or over", Op::Ge),
    ("or greater", Op::Ge),
    ("and up", Op::Ge),
    ("and above", Op::Ge),
    ("plus", Op::Ge),
    ("or less", Op::Le),
    ("or fewer", Op::Le),
    ("or lower", Op::Le),
    ("or below", Op::Le),
    ("or under", Op::Le),
    ("and under", Op::Le),
    ("and below", Op::Le),
];

/// Superlatives: highest first (`true`) or lowest first.
const DESCENDING: &str = "most highest largest biggest greatest best top maximum max";
const ASCENDING: &str = "least fewest lowest smallest worst minimum min cheapest";
const NEWEST: &str = "latest newest recent";
const OLDEST: &str = "oldest earliest";
/// Words after which a verb is in the past, so "friday" is the one gone by.
const PAST_CUES: &str = "last made left came spent was were did had gave";
/// Words that end the words describing a comparison.
const BREAKS: &str = "and or but which who that where whose what when how";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }

    /// Whether `a op b` holds, given how `a` compares with `b`.
    pub(super) fn holds(self, order: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Op::Eq => order == Equal,
            Op::Gt => order == Greater,
            Op::Ge => order != Less,
            Op::Lt => order == Less,
            Op::Le => order != Greater,
        }
    }

    /// Asks for large values: a "max" field fits it better than a "min" one.
    pub(super) fn upward(self) -> bool {
        matches!(self, Op::Gt | Op::Ge)
    }
}

/// What a comparator may compare with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Any,
    /// A date or a time of day ("after friday", "before 8pm").
    Moment,
    /// A date only ("from monday").
    Date,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operand {
    Number(f64),
    Date(NaiveDate),
    /// `HH:MM`, 24-hour.
    Time(String),
    /// Quoted text: `supplier 'Nordic Dairy'`.
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Comparison {
    pub op: Op,
    pub value: Operand,
    /// The stems of the words that say what is compared, the likeliest first: the noun
    /// after the value ("3 bookings"), then the words before the comparator, nearest
    /// first ("spent over 500").
    pub subject: Vec<String>,
    /// The words it takes, as token positions: its dates are not dates of their own.
    pub span: (usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ordering {
    pub descending: bool,
    /// What to order by ("the most bookings"), likeliest first; empty for recency.
    pub subject: Vec<String>,
    /// "latest", "oldest": by when, whatever the subject.
    pub recency: bool,
}

pub(super) fn read(toks: &[Token], today: NaiveDate) -> Vec<Comparison> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if let Some((pair, next)) = between(toks, i, today) {
            found.extend(pair);
            i = next;
        } else if let Some((comparison, next)) = prefixed(toks, i, today, &found) {
            found.push(comparison);
            i = next;
        } else if let Some((comparison, next)) = suffixed(toks, i) {
            found.push(comparison);
            i = next;
        } else {
            i += 1;
        }
    }
    found
}

/// Whether the words from `i` on spell `phrase`.
fn spells(toks: &[Token], i: usize, phrase: &str) -> Option<usize> {
    let words: Vec<&str> = phrase.split_whitespace().collect();
    let matched = words
        .iter()
        .enumerate()
        .all(|(k, w)| toks.get(i + k).is_some_and(|t| t.lower == *w))
        // A clause may not end inside the phrase.
        && (0..words.len().saturating_sub(1)).all(|k| !toks[i + k].ends_clause);
    matched.then_some(words.len())
}

fn prefixed(
    toks: &[Token],
    i: usize,
    today: NaiveDate,
    earlier: &[Comparison],
) -> Option<(Comparison, usize)> {
    if let Some((op, at, used)) = glued_symbol(&toks[i].lower) {
        let value = amount(at)?;
        let end = i + used;
        let subject = subject(toks, i, end);
        return Some((
            Comparison {
                op,
                value: Operand::Number(value),
                subject,
                span: (i, end),
            },
            end,
        ));
    }
    // "to friday" closes a range that "from monday" opened.
    let closes_range = toks[i].lower == "to"
        && earlier
            .last()
            .is_some_and(|c| matches!(c.value, Operand::Date(_)) && c.op == Op::Ge);
    let (op, len, scope) = if closes_range {
        (Op::Le, 1, Scope::Date)
    } else {
        PREFIXES
            .iter()
            .find_map(|(phrase, op, scope)| spells(toks, i, phrase).map(|len| (*op, len, *scope)))?
    };
    if toks[i + len - 1].ends_clause {
        return None;
    }
    let start = i + len;
    // "since friday" is a friday gone by.
    let is_past = toks[i].lower == "since" || past(toks, i);
    let (value, used) = value_at(toks, start, scope, today, is_past)?;
    let end = start + used;
    Some((
        Comparison {
            op,
            value,
            subject: subject(toks, i, end),
            span: (i, end),
        },
        end,
    ))
}

/// `>3`, `>=4.5`, `<10`: a comparator and a number written as one word.
fn glued_symbol(word: &str) -> Option<(Op, &str, usize)> {
    for (symbol, op) in [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)] {
        if let Some(rest) = word.strip_prefix(symbol)
            && !rest.is_empty()
        {
            return Some((op, rest, 1));
        }
    }
    None
}

fn suffixed(toks: &[Token], i: usize) -> Option<(Comparison, usize)> {
    let word = toks[i].lower.as_str();
    if let Some(base) = word.strip_suffix('+') {
        let value = amount(base)?;
        let end = i + 1;
        return Some((
            Comparison {
                op: Op::Ge,
                value: Operand::Number(value),
                subject: subject(toks, i, end),
                span: (i, end),
            },
            end,
        ));
    }
    let value = amount(word)?;
    if toks[i].ends_clause {
        return None;
    }
    let (op, len) = SUFFIXES
        .iter()
        .find_map(|(phrase, op)| spells(toks, i + 1, phrase).map(|len| (*op, len)))?;
    let end = i + 1 + len;
    Some((
        Comparison {
            op,
            value: Operand::Number(value),
            subject: subject(toks, i, end),
            span: (i, end),
        },
        end,
    ))
}

/// "between 2 and 4": at least the one, at most the other.
fn between(toks: &[Token], i: usize, today: NaiveDate) -> Option<(Vec<Comparison>, usize)> {
    if toks[i].lower != "between" || toks[i].ends_clause {
        return None;
    }
    let is_past = past(toks, i);
    let (low, used) = value_at(toks, i + 1, Scope::Any, today, is_past)?;
    let and = i + 1 + used;
    if word_at(toks, Some(and)) != "and" {
        return None;
    }
    let (high, used) = value_at(toks, and + 1, Scope::Any, today, is_past)?;
    let end = and + 1 + used;
    let subject = subject(toks, i, end);
    Some((
        vec![
            Comparison {
                op: Op::Ge,
                value: low,
                subject: subject.clone(),
                span: (i, end),
            },
            Comparison {
                op: Op::Le,
                value: high,
                subject,
                span: (i, end),
            },
        ],
        end,
    ))
}

/// The value at `j` and how many words it takes.
fn value_at(
    toks: &[Token],
    j: usize,
    scope: Scope,
    today: NaiveDate,
    is_past: bool,
) -> Option<(Operand, usize)> {
    let tok = toks.get(j)?;
    let skip = usize::from(matches!(tok.lower.as_str(), "next" | "this" | "last"));
    let at = j + skip;
    let date = || {
        let date = date_at(toks, at, today)?;
        let words = date_words(toks, at);
        let weekday = WEEKDAYS.contains(&word_at(toks, Some(at)));
        let past = is_past || word_at(toks, Some(j)) == "last";
        let date = if past && weekday && date >= today {
            date.checked_sub_days(Days::new(7))?
        } else if past && date > today && words < 3 && !weekday && !has_year(&toks[at].lower) {
            // "21 november" said of the past is this year's, not next year's.
            date.with_year(date.year() - 1)?
        } else {
            date
        };
        Some((Operand::Date(date), skip + words))
    };
    let time = || time_at(toks, j, false).map(|t| (Operand::Time(t), time_words(toks, j)));
    match scope {
        Scope::Date => date(),
        Scope::Moment => date().or_else(time),
        Scope::Any => {
            let unit = word_at(toks, Some(j + 1));
            if matches!(unit, "pm" | "am") || tok.lower.ends_with("pm") {
                return time();
            }
            if let Some(value) = amount(&tok.lower)
                && skip == 0
                && date_at(toks, j, today).is_none()
            {
                return Some((Operand::Number(value), 1));
            }
            date().or_else(time)
        }
    }
}

/// `2026-11-21`, `21/11/2026`: a date that says its year.
fn has_year(word: &str) -> bool {
    word.contains('-') || word.matches('/').count() == 2
}

/// How many words the date at `i` spans: "21 november 2026", "november 21", "friday".
fn date_words(toks: &[Token], i: usize) -> usize {
    let next = word_at(toks, Some(i + 1));
    let is_month = |w: &str| super::words::month_number(w).is_some();
    let is_year = |w: &str| w.len() == 4 && w.bytes().all(|b| b.is_ascii_digit());
    let mut used = 1;
    if is_month(next) || (is_month(&toks[i].lower) && !next.is_empty() && number(next).is_some()) {
        used = 2;
        if is_year(word_at(toks, Some(i + 2))) {
            used = 3;
        }
    } else if next == "of" && is_month(word_at(toks, Some(i + 2))) {
        used = 3;
    }
    used
}

fn time_words(toks: &[Token], i: usize) -> usize {
    if matches!(word_at(toks, Some(i + 1)), "pm" | "am" | "p.m" | "a.m") {
        2
    } else {
        1
    }
}

/// A number as people write amounts: `500`, `4.5`, `€500`, `1,200`, `500kr`, "three".
fn amount(word: &str) -> Option<f64> {
    let trimmed = word
        .trim_start_matches(['€', '$', '£', '¥'])
        .trim_end_matches(['€', '$', '£', '%'])
        .trim_end_matches("kr")
        .trim_end_matches("dkk")
        .trim_end_matches("eur")
        .trim_end_matches("usd");
    let plain: String = trimmed.chars().filter(|c| *c != ',').collect();
    let numeric = !plain.is_empty()
        && plain.chars().all(|c| c.is_ascii_digit() || c == '.')
        && plain.chars().next().is_some_and(|c| c.is_ascii_digit());
    if numeric {
        return plain.parse().ok();
    }
    number(word).map(f64::from)
}

/// Whether the verb before `i` is in the past ("booked after friday").
fn past(toks: &[Token], i: usize) -> bool {
    toks[..i].iter().rev().take(4).any(|t| {
        let w = t.lower.as_str();
        listed(PAST_CUES, w) || (w.len() > 4 && w.ends_with("ed"))
    })
}

/// The stems that say what a comparison between `start` and `end` is about: up to three
/// meaningful words after it, then up to three before it, within its clause.
fn subject(toks: &[Token], start: usize, end: usize) -> Vec<String> {
    let mut stems = Vec::new();
    let meaningful = |t: &Token| {
        t.lower
            .chars()
            .all(|c| c.is_alphabetic() || c == '-' || c == '\'')
            && t.lower.len() > 1
            && !is_stop_word(&t.lower)
            && !is_measure_word(&t.lower)
    };
    let mut k = end;
    let mut after = 0;
    let ends_before = end > 0 && toks.get(end - 1).is_some_and(|t| t.ends_clause);
    while !ends_before && k < toks.len() && after < 3 {
        let t = &toks[k];
        if listed(BREAKS, &t.lower) || amount(&t.lower).is_some() {
            break;
        }
        if meaningful(t) {
            stems.push(stem(&t.lower));
            after += 1;
        }
        if t.ends_clause {
            break;
        }
        k += 1;
    }
    let mut before = 0;
    for t in toks[..start].iter().rev() {
        if t.ends_clause || before == 3 || (listed(BREAKS, &t.lower) && before > 0) {
            break;
        }
        if meaningful(t) {
            stems.push(stem(&t.lower));
            before += 1;
        }
    }
    stems
}

/// "the most bookings", "highest rated", "spent the most", "the latest", "top 5 … by
/// spending".
pub(super) fn ordering(toks: &[Token]) -> Option<Ordering> {
    let at = toks.iter().enumerate().position(|(i, t)| {
        // "at least 4" and "at most 4" bound a value; they rank nothing.
        let bound = i > 0 && toks[i - 1].lower == "at";
        !bound
            && parts(&t.lower).iter().any(|p| {
                listed(DESCENDING, p)
                    || listed(ASCENDING, p)
                    || listed(NEWEST, p)
                    || listed(OLDEST, p)
            })
    })?;
    let word = parts(&toks[at].lower);
    let said = |list: &str| word.iter().any(|p| listed(list, p));
    let next = word_at(toks, Some(at + 1));
    let recent_next = listed(NEWEST, next);
    if said(NEWEST) || said(OLDEST) || recent_next {
        let descending = said(NEWEST) || (recent_next && said("most"));
        return Some(Ordering {
            descending,
            subject: Vec::new(),
            recency: true,
        });
    }
    let descending = said(DESCENDING);
    // The superlative's own other half: "highest-rated" orders by "rated".
    let mut subject: Vec<String> = word
        .iter()
        .filter(|p| !listed(DESCENDING, p) && !listed(ASCENDING, p))
        .map(|p| stem(p))
        .collect();
    if let Some(by) = toks[at..].iter().position(|t| t.lower == "by") {
        subject.extend(self::subject(toks, at + by + 1, at + by + 1));
    }
    // The cheapest is the lowest price, the worst the lowest rating: the word itself counts.
    if said("cheapest best worst") {
        subject.extend(word.iter().map(|p| stem(p)));
    }
    subject.extend(self::subject(toks, at, at + 1));
    subject.dedup();
    Some(Ordering {
        descending,
        subject,
        recency: false,
    })
}

/// A word and the parts of a hyphenated one: "highest-rated" → both halves.
fn parts(word: &str) -> Vec<&str> {
    let mut parts = vec![word];
    if word.contains('-') {
        parts.extend(word.split('-').filter(|p| !p.is_empty()));
    }
    parts
}

/// Quoted text after the words that say what it is: `supplier 'Nordic Dairy'`,
/// `customers named "Smith"`. `quoted` is the text inside the first quotes.
pub(super) fn quoted(question: &str, quoted: &str) -> Option<Comparison> {
    let at = question.find(quoted)?;
    let before = question.get(..at.checked_sub(1)?)?;
    let subject: Vec<String> = before
        .split_whitespace()
        .rev()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| w.len() > 1 && !is_stop_word(w))
        .take(2)
        .map(|w| stem(&w))
        .collect();
    (!subject.is_empty()).then(|| Comparison {
        op: Op::Eq,
        value: Operand::Text(quoted.to_owned()),
        subject,
        span: (0, 0),
    })
}

/// The weekday a date falls on, lowercase.
pub(super) fn weekday_name(date: NaiveDate) -> &'static str {
    WEEKDAYS[date.weekday().num_days_from_monday() as usize]
}

#[cfg(test)]
mod tests {
    use super::super::facts::tokens;
    use super::*;

    fn today() -> NaiveDate {
        // A Tuesday.
        NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    fn date(d: u32) -> Operand {
        Operand::Date(NaiveDate::from_ymd_opt(2026, 11, d).unwrap())
    }

    fn one(text: &str) -> Comparison {
        let found = read(&tokens(text), today());
        assert_eq!(found.len(), 1, "{text}: {found:?}");
        found.into_iter().next().unwrap()
    }

    #[test]
    fn reads_comparisons_with_what_they_are_about() {
        for (text, op, value, first) in [
            (
                "Which customers have made more than 3 bookings?",
                Op::Gt,
                Operand::Number(3.0),
                "book",
            ),
            (
                "feedback with a rating below 3",
                Op::Lt,
                Operand::Number(3.0),
                "rat",
            ),
            (
                "who spent over €500?",
                Op::Gt,
                Operand::Number(500.0),
                "spent",
            ),
            (
                "tables for 4 or more people",
                Op::Ge,
                Operand::Number(4.0),
                "peopl",
            ),
            ("at least 2 stars", Op::Ge, Operand::Number(2.0), "star"),
            (
                "customers who booked after Friday",
                Op::Gt,
                date(20),
                "book",
            ),
            (
                "bookings before 8pm",
                Op::Lt,
                Operand::Time("20:00".into()),
                "book",
            ),
            ("orders since 21 november", Op::Ge, date(21), "order"),
        ] {
            let c = one(text);
            assert_eq!((c.op, &c.value), (op, &value), "{text}");
            assert_eq!(c.subject.first().map(String::as_str), Some(first), "{text}");
        }
    }

    #[test]
    fn reads_ranges() {
        let found = read(&tokens("items costing between 10 and 20 euros"), today());
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].op, found[1].op), (Op::Ge, Op::Le));
        assert_eq!(found[1].value, Operand::Number(20.0));
        let found = read(&tokens("from monday to friday"), today());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].op, found[1].op), (Op::Ge, Op::Le));
        assert!(read(&tokens("what is over there"), today()).is_empty());
        assert!(read(&tokens("book for 2 tomorrow at 19:00"), today()).is_empty());
    }

    #[test]
    fn reads_orderings() {
        let o = ordering(&tokens("Which customer has the most bookings?")).unwrap();
        assert!(o.descending && !o.recency);
        assert_eq!(o.subject.first().map(String::as_str), Some("book"));
        let o = ordering(&tokens("Who spent the most?")).unwrap();
        assert!(o.subject.contains(&"spent".to_owned()), "{o:?}");
        let o = ordering(&tokens("the lowest-rated feedback")).unwrap();
        assert!(
            !o.descending && o.subject.contains(&"rat".to_owned()),
            "{o:?}"
        );
        let o = ordering(&tokens("show the most recent feedback")).unwrap();
        assert!(o.descending && o.recency);
        assert!(ordering(&tokens("show me the tables")).is_none());
    }
}
