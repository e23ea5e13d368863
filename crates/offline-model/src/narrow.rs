//! Records narrowed by the answer itself, when the tool could not narrow them: a list
//! tool without a filter returns every record, and the question's comparisons, dates
//! and weekdays are checked on the records that came back.

use chrono::{Datelike, NaiveDate};
use serde_json::{Map, Value};

use super::comparisons::{Operand, weekday_name};
use super::facts::Facts;
use super::fields::{Field, FieldKind};
use super::filter::{self, Condition, date_prefix, lookup, number_text};
use super::roles::Asked;
use super::words::{WEEKDAYS, humanize};

pub(super) struct Narrowed<'v> {
    pub rows: Vec<&'v Map<String, Value>>,
    /// How, in words: "rating < 3", "on saturday".
    pub said: Vec<String>,
}

/// The records that meet what the question asks, when the call did not ask the tool
/// for it; `None` when there is nothing to check, or nothing the records could be
/// checked on.
pub(super) fn narrow<'v>(
    facts: &Facts,
    rows: &[&'v Map<String, Value>],
    asked: &Asked,
) -> Option<Narrowed<'v>> {
    if asked.filter.is_some() || asked.dated || rows.is_empty() {
        return None;
    }
    let fields = filter::fields_of(rows);
    let mut conditions: Vec<Condition> = Vec::new();
    let mut said = Vec::new();
    for c in &facts.comparisons {
        let Some(field) = filter::field_for(c, &fields) else {
            continue;
        };
        said.push(format!(
            "{} {} {}",
            field_words(field),
            c.op.symbol(),
            operand_text(&c.value)
        ));
        conditions.push(Condition {
            field: field.clone(),
            op: c.op,
            value: c.value.clone(),
        });
    }
    let days = days(facts, rows, &fields);
    if let Some(days) = &days {
        said.push(days.said.clone());
    }
    if conditions.is_empty() && days.is_none() {
        return None;
    }
    let kept = rows
        .iter()
        .copied()
        .filter(|row| conditions.iter().all(|c| filter::holds(row, c)))
        .filter(|row| days.as_ref().is_none_or(|d| d.admits(row)))
        .collect();
    Some(Narrowed { rows: kept, said })
}

fn field_words(field: &Field) -> String {
    humanize(&field.path.replace('.', " ")).to_lowercase()
}

fn operand_text(value: &Operand) -> String {
    match value {
        Operand::Number(n) => number_text(*n),
        Operand::Date(d) => d.format("%Y-%m-%d").to_string(),
        Operand::Time(t) => t.clone(),
        Operand::Text(t) => format!("\"{t}\""),
    }
}

/// The days a question names, and how a record shows its day.
struct Days {
    /// Weekdays, 0 for Monday.
    weekdays: Vec<usize>,
    /// Exact dates, when the question names one day rather than every such weekday.
    dates: Vec<NaiveDate>,
    /// A field holding weekday names ("Saturday", ["Mon", "Thu"]), if any.
    named_in: Option<String>,
    /// A field holding dates, if any.
    dated_in: Option<String>,
    said: String,
}

fn days(facts: &Facts, rows: &[&Map<String, Value>], fields: &[Field]) -> Option<Days> {
    let dates = &facts.free_dates;
    let plural = facts.weekdays.iter().any(|(_, plural)| *plural);
    let mut weekdays: Vec<usize> = facts.weekdays.iter().map(|(day, _)| *day).collect();
    if weekdays.is_empty() {
        weekdays = dates
            .iter()
            .map(|d| d.weekday().num_days_from_monday() as usize)
            .collect();
    }
    if weekdays.is_empty() {
        return None;
    }
    let named_in = fields
        .iter()
        .find(|f| {
            rows.iter()
                .any(|row| lookup(row, &f.path).is_some_and(|v| !weekdays_in(v).is_empty()))
        })
        .map(|f| f.path.clone());
    let dated_in = filter::main_date(fields, false)
        .filter(|f| f.kind.is_temporal() || f.kind == FieldKind::Unknown)
        .map(|f| f.path.clone());
    if named_in.is_none() && dated_in.is_none() {
        return None;
    }
    let names: Vec<String> = weekdays.iter().map(|d| humanize(WEEKDAYS[*d])).collect();
    let exact = !plural && named_in.is_none() && !dates.is_empty();
    let said = if exact {
        let days: Vec<String> = dates
            .iter()
            .map(|d| format!("{} {}", humanize(weekday_name(*d)), d.format("%Y-%m-%d")))
            .collect();
        format!("on {}", days.join(" or "))
    } else if plural {
        format!("on {}s", names.join("s or "))
    } else {
        format!("on {}", names.join(" or "))
    };
    Some(Days {
        weekdays,
        dates: if exact { dates.clone() } else { Vec::new() },
        named_in,
        dated_in,
        said,
    })
}

impl Days {
    fn admits(&self, row: &Map<String, Value>) -> bool {
        if let Some(path) = &self.named_in {
            let named = lookup(row, path).map(weekdays_in).unwrap_or_default();
            return named.iter().any(|d| self.weekdays.contains(d));
        }
        let Some(date) = self
            .dated_in
            .as_ref()
            .and_then(|path| lookup(row, path))
            .and_then(Value::as_str)
            .and_then(date_prefix)
        else {
            return false;
        };
        if self.dates.is_empty() {
            self.weekdays
                .contains(&(date.weekday().num_days_from_monday() as usize))
        } else {
            self.dates.contains(&date)
        }
    }
}

/// The weekdays a value names: "Saturday", "sat", ["Mon", "Thu"].
fn weekdays_in(value: &Value) -> Vec<usize> {
    let one = |text: &str| {
        let lower = text.trim().to_lowercase();
        WEEKDAYS
            .iter()
            .position(|w| *w == lower || (lower.len() == 3 && w.starts_with(lower.as_str())))
    };
    match value {
        Value::String(s) => one(s).into_iter().collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(one)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(text: &str) -> Facts {
        Facts::read(text, NaiveDate::from_ymd_opt(2026, 11, 24).unwrap())
    }

    fn names(narrowed: &Narrowed) -> Vec<String> {
        narrowed
            .rows
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn weekday_names_and_dates_pick_their_rows() {
        let suppliers = [
            json!({"name": "Dairy", "delivery_days": ["Mon", "Fri"]}),
            json!({"name": "Fish", "delivery_days": ["Tue"]}),
        ];
        let rows: Vec<&Map<String, Value>> =
            suppliers.iter().filter_map(Value::as_object).collect();
        let narrowed = narrow(&facts("Who delivers on Friday?"), &rows, &Asked::default()).unwrap();
        assert_eq!(names(&narrowed), ["Dairy"]);
        assert_eq!(narrowed.said, ["on Friday"]);

        let hours = [
            json!({"name": "Lunch", "date": "2026-11-28"}),
            json!({"name": "Dinner", "date": "2026-11-29"}),
            json!({"name": "Brunch", "date": "2026-12-05"}),
        ];
        let rows: Vec<&Map<String, Value>> = hours.iter().filter_map(Value::as_object).collect();
        let narrowed = narrow(&facts("hours on Saturday"), &rows, &Asked::default()).unwrap();
        assert_eq!(names(&narrowed), ["Lunch"]);
        assert_eq!(narrowed.said, ["on Saturday 2026-11-28"]);
        let narrowed = narrow(&facts("hours on Saturdays"), &rows, &Asked::default()).unwrap();
        assert_eq!(names(&narrowed), ["Lunch", "Brunch"]);
    }

    #[test]
    fn comparisons_are_checked_unless_the_tool_filtered() {
        let items = [
            json!({"name": "A", "rating": 2}),
            json!({"name": "B", "rating": 4}),
        ];
        let rows: Vec<&Map<String, Value>> = items.iter().filter_map(Value::as_object).collect();
        let question = facts("ratings below 3");
        let narrowed = narrow(&question, &rows, &Asked::default()).unwrap();
        assert_eq!(names(&narrowed), ["A"]);
        assert_eq!(narrowed.said, ["rating < 3"]);
        let filtered = Asked {
            filter: Some("rating < 3".to_owned()),
            ..Asked::default()
        };
        assert!(narrow(&question, &rows, &filtered).is_none());
    }
}
