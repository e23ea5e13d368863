//! A question's comparisons and orderings matched to the fields of a list: written as
//! the filter text and sort key a tool takes, or checked against records when the
//! tool cannot filter.

use chrono::NaiveDate;
use serde_json::{Map, Value};

use super::comparisons::{Comparison, Op, Operand, Ordering};
use super::fields::{Dialect, Field, FieldKind};
use super::words::{is_stop_word, related, split_words, stem};

/// A comparison made concrete: this field, this operator, this value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Condition {
    pub field: Field,
    pub op: Op,
    pub value: Operand,
}

/// The stems of a field's meaningful words: `on_hand` is "hand", `lastBookingAt` is
/// "last book".
fn field_stems(field: &Field) -> Vec<String> {
    split_words(&field.path)
        .iter()
        .filter(|w| !is_stop_word(w))
        .map(|w| stem(w))
        .collect()
}

fn is_reference(field: &Field) -> bool {
    split_words(&field.path).last().is_some_and(|w| w == "id")
}

/// How well `subject` (likeliest word first) names `field`: nearer words weigh more,
/// a related word a little less, and naming all of a field's words counts extra.
fn score(field: &Field, subject: &[String]) -> f64 {
    let stems = field_stems(field);
    if stems.is_empty() || is_reference(field) {
        return 0.0;
    }
    let mut total = 0.0;
    let mut covered = vec![false; stems.len()];
    for (k, word) in subject.iter().enumerate() {
        let weight = 3.0 / (1.0 + k as f64);
        let near = related(word);
        if let Some(at) = stems.iter().position(|s| s == word) {
            total += weight;
            covered[at] = true;
        } else if let Some(at) = stems.iter().position(|s| near.contains(s)) {
            total += 0.8 * weight;
            covered[at] = true;
        }
    }
    if total > 0.0 && covered.iter().all(|c| *c) {
        total += 1.0;
    }
    total
}

fn fits(kind: FieldKind, value: &Operand) -> bool {
    match value {
        Operand::Number(_) => matches!(kind, FieldKind::Number | FieldKind::Unknown),
        Operand::Date(_) => kind.is_temporal() || kind == FieldKind::Unknown,
        Operand::Time(_) => matches!(kind, FieldKind::Time | FieldKind::Unknown),
        Operand::Text(_) => matches!(kind, FieldKind::Text | FieldKind::Unknown),
    }
}

/// The field a comparison is about; a date nobody named a field for is about the
/// list's main date, a time of day about its first time field.
pub(super) fn field_for<'f>(comparison: &Comparison, fields: &'f [Field]) -> Option<&'f Field> {
    match (&comparison.value, named_field(comparison, fields)) {
        (_, Some(field)) => Some(field),
        (Operand::Date(_), None) => main_date(fields, false),
        (Operand::Time(_), None) => fields.iter().find(|f| f.kind == FieldKind::Time),
        _ => None,
    }
}

/// The field the comparison's own words name, if any.
pub(super) fn named_field<'f>(comparison: &Comparison, fields: &'f [Field]) -> Option<&'f Field> {
    fields
        .iter()
        .filter(|f| fits(f.kind, &comparison.value))
        .map(|f| {
            // "seats more than 6" means the most a table seats, "fewer than 2" the least.
            (
                f,
                leaning(f, score(f, &comparison.subject), comparison.op.upward()),
            )
        })
        .filter(|(_, s)| *s > 0.0)
        .fold(None, |best: Option<(&Field, f64)>, next| match best {
            Some(b) if b.1 >= next.1 => Some(b),
            _ => Some(next),
        })
        .map(|(f, _)| f)
}

/// A score nudged towards a `max` field when large values are wanted, `min` when small.
fn leaning(field: &Field, score: f64, upward: bool) -> f64 {
    let wanted = if upward { "max" } else { "min" };
    if score > 0.0 && field_stems(field).iter().any(|w| w == wanted) {
        score + 0.5
    } else {
        score
    }
}

/// The date a list is about: for "latest" when a record was made, else its own date
/// (a booking's day rather than when it was booked).
pub(super) fn main_date(fields: &[Field], recency: bool) -> Option<&Field> {
    let dated = || fields.iter().filter(|f| f.kind.is_temporal());
    let made = || {
        dated().find(|f| {
            field_stems(f)
                .iter()
                .any(|s| matches!(s.as_str(), "creat" | "add" | "submit" | "post"))
        })
    };
    let own = || dated().find(|f| f.kind == FieldKind::Date);
    if recency {
        made().or_else(own).or_else(|| dated().next())
    } else {
        own().or_else(made).or_else(|| dated().next())
    }
}

/// The field to sort by, and whether highest first.
pub(super) fn sort_for<'f>(ordering: &Ordering, fields: &'f [Field]) -> Option<&'f Field> {
    if ordering.recency {
        return main_date(fields, true);
    }
    // "The most", "the lowest" are amounts: a number field before any other.
    let numeric = |f: &&Field| matches!(f.kind, FieldKind::Number | FieldKind::Unknown);
    let candidates: Vec<&Field> = fields.iter().filter(numeric).collect();
    best_named(&candidates, ordering).or_else(|| {
        let others: Vec<&Field> = fields
            .iter()
            .filter(|f| !numeric(f) && f.kind != FieldKind::Boolean)
            .collect();
        best_named(&others, ordering)
    })
}

fn best_named<'f>(fields: &[&'f Field], ordering: &Ordering) -> Option<&'f Field> {
    fields
        .iter()
        .map(|f| {
            let s = score(f, &ordering.subject);
            (*f, leaning(f, s, ordering.descending))
        })
        .filter(|(_, s)| *s > 0.0)
        .fold(None, |best: Option<(&Field, f64)>, next| match best {
            Some(b) if b.1 >= next.1 => Some(b),
            _ => Some(next),
        })
        .map(|(f, _)| f)
}

/// The conditions written as the tool's filter text: `bookingCount > 3 AND …`.
pub(super) fn render(conditions: &[Condition], dialect: &Dialect) -> String {
    conditions
        .iter()
        .map(|c| match &c.value {
            // Text is matched loosely where the tool allows: "Smith" finds "Ada Smith".
            Operand::Text(text) if dialect.like && c.op == Op::Eq => {
                let q = dialect.quote;
                format!("{} LIKE {q}%{}%{q}", c.field.path, escaped(text, q))
            }
            value => format!(
                "{} {} {}",
                c.field.path,
                c.op.symbol(),
                literal(value, dialect)
            ),
        })
        .collect::<Vec<_>>()
        .join(&dialect.and)
}

fn literal(value: &Operand, dialect: &Dialect) -> String {
    let q = dialect.quote;
    match value {
        Operand::Number(n) => number_text(*n),
        Operand::Date(d) if dialect.bare_dates => d.format("%Y-%m-%d").to_string(),
        Operand::Date(d) => format!("{q}{}{q}", d.format("%Y-%m-%d")),
        Operand::Time(t) => format!("{q}{t}{q}"),
        Operand::Text(t) => format!("{q}{}{q}", escaped(t, q)),
    }
}

/// A quote inside quoted text is written twice, as SQL does.
fn escaped(text: &str, quote: char) -> String {
    text.replace(quote, &format!("{quote}{quote}"))
}

pub(super) fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        n.to_string()
    }
}

// ---------------------------------------------------------------------------------
// Checking records

/// The fields records carry, with kinds read from their values; nested objects give
/// `parent.child` fields one level down.
pub(super) fn fields_of(rows: &[&Map<String, Value>]) -> Vec<Field> {
    let mut fields: Vec<Field> = Vec::new();
    let mut add = |path: String, value: &Value| {
        let Some(kind) = kind_of_value(value) else {
            return;
        };
        match fields.iter_mut().find(|f| f.path == path) {
            Some(known) if known.kind == FieldKind::Unknown => known.kind = kind,
            Some(_) => {}
            None => fields.push(Field { path, kind }),
        }
    };
    for row in rows {
        for (key, value) in row.iter() {
            if let Value::Object(inner) = value {
                for (child, value) in inner {
                    add(format!("{key}.{child}"), value);
                }
            } else {
                add(key.clone(), value);
            }
        }
    }
    fields
}

fn kind_of_value(value: &Value) -> Option<FieldKind> {
    Some(match value {
        Value::Number(_) => FieldKind::Number,
        Value::Bool(_) => FieldKind::Boolean,
        Value::String(s) if date_prefix(s).is_some() && s.len() > 10 => FieldKind::DateTime,
        Value::String(s) if date_prefix(s).is_some() => FieldKind::Date,
        Value::String(s) if is_clock(s) => FieldKind::Time,
        Value::String(_) | Value::Array(_) => FieldKind::Text,
        Value::Null => FieldKind::Unknown,
        Value::Object(_) => return None,
    })
}

pub(super) fn date_prefix(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()
}

fn is_clock(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 5
        && b[2] == b':'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 2 || c.is_ascii_digit())
}

/// The value at a field's path.
pub(super) fn lookup<'v>(row: &'v Map<String, Value>, path: &str) -> Option<&'v Value> {
    if let Some(value) = row.get(path) {
        return Some(value);
    }
    let (parent, child) = path.split_once('.')?;
    row.get(parent)?.get(child)
}

/// Whether a record meets a condition; one without the field does not.
pub(super) fn holds(row: &Map<String, Value>, condition: &Condition) -> bool {
    let Some(value) = lookup(row, &condition.field.path) else {
        return false;
    };
    let order = match (&condition.value, value) {
        (Operand::Number(wanted), Value::Number(n)) => {
            n.as_f64().and_then(|n| n.partial_cmp(wanted))
        }
        (Operand::Number(wanted), Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(|n| n.partial_cmp(wanted)),
        (Operand::Date(wanted), Value::String(s)) => date_prefix(s).map(|d| d.cmp(wanted)),
        (Operand::Time(wanted), Value::String(s)) if is_clock(s) => Some(s.as_str().cmp(wanted)),
        (Operand::Text(wanted), Value::String(s)) => {
            let found = s.to_lowercase().contains(&wanted.to_lowercase());
            return found && condition.op == Op::Eq;
        }
        _ => None,
    };
    order.is_some_and(|o| condition.op.holds(o))
}

#[cfg(test)]
mod tests {
    use super::super::comparisons;
    use super::super::facts::tokens;
    use super::super::fields;
    use super::*;
    use serde_json::json;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    const CUSTOMERS: &str = "Fields: _id (text), name (text), email (text), createdAt \
        (timestamp), lastBookingAt (timestamp), bookingCount (integer), totalSpent (number).";
    const STOCK: &str = "Fields: sku (text), name (text), on_hand (integer), reorder_level \
        (integer), unit_cost (number), expires_on (date).";
    const TABLES: &str = "Fields: name (text), seatsMin (integer), seatsMax (integer).";

    fn condition(question: &str, described: &str) -> Option<String> {
        let fields = fields::read(described, &[]);
        let found = comparisons::read(&tokens(question), today());
        let c = found.first()?;
        let field = field_for(c, &fields)?;
        let dialect = Dialect {
            quote: '\'',
            and: " AND ".to_owned(),
            bare_dates: true,
            like: false,
        };
        Some(render(
            &[Condition {
                field: field.clone(),
                op: c.op,
                value: c.value.clone(),
            }],
            &dialect,
        ))
    }

    #[test]
    fn comparisons_find_their_fields() {
        for (question, described, expected) in [
            (
                "Which customers have made more than 3 bookings?",
                CUSTOMERS,
                "bookingCount > 3",
            ),
            ("Who spent over 500?", CUSTOMERS, "totalSpent > 500"),
            (
                "customers who booked after Friday",
                CUSTOMERS,
                "lastBookingAt > 2026-11-20",
            ),
            (
                "Which items have fewer than 10 units on hand?",
                STOCK,
                "on_hand < 10",
            ),
            ("items that cost more than 20.5", STOCK, "unit_cost > 20.5"),
            (
                "what expires before 1 december",
                STOCK,
                "expires_on < 2026-12-01",
            ),
            ("tables that seat more than 6", TABLES, "seatsMax > 6"),
            ("tables for fewer than 2 people", TABLES, "seatsMin < 2"),
        ] {
            assert_eq!(
                condition(question, described).as_deref(),
                Some(expected),
                "{question}"
            );
        }
        assert_eq!(condition("more than 3 parrots", TABLES), None);
    }

    #[test]
    fn orderings_find_their_fields() {
        let fields = fields::read(CUSTOMERS, &[]);
        let sort = |q: &str| {
            let o = comparisons::ordering(&tokens(q)).unwrap();
            sort_for(&o, &fields).map(|f| (f.path.clone(), o.descending))
        };
        assert_eq!(
            sort("Which customer has the most bookings?"),
            Some(("bookingCount".to_owned(), true))
        );
        assert_eq!(
            sort("Who are our biggest spenders?"),
            Some(("totalSpent".to_owned(), true))
        );
        assert_eq!(
            sort("the newest customers"),
            Some(("createdAt".to_owned(), true))
        );
    }

    #[test]
    fn records_are_checked_against_conditions() {
        let rows = [
            json!({"name": "A", "rating": 2, "at": "2026-11-20T10:00:00Z"}),
            json!({"name": "B", "rating": 5, "at": "2026-11-23T10:00:00Z"}),
        ];
        let maps: Vec<&Map<String, Value>> = rows.iter().filter_map(Value::as_object).collect();
        let fields = fields_of(&maps);
        let rating = fields.iter().find(|f| f.path == "rating").unwrap();
        let low = Condition {
            field: rating.clone(),
            op: Op::Lt,
            value: Operand::Number(3.0),
        };
        assert!(holds(maps[0], &low) && !holds(maps[1], &low));
        let at = fields.iter().find(|f| f.path == "at").unwrap();
        assert_eq!(at.kind, FieldKind::DateTime);
        let on = Condition {
            field: at.clone(),
            op: Op::Eq,
            value: Operand::Date(NaiveDate::from_ymd_opt(2026, 11, 23).unwrap()),
        };
        assert!(holds(maps[1], &on) && !holds(maps[0], &on));
    }
}
