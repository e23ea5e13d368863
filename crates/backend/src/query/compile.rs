//! AST -> SQL fragment with `$n` placeholders and bind values.
//!
//! The SQL text is built only from `Field::column` strings, the fixed operator and
//! keyword strings below, parentheses and placeholders; every client-supplied value
//! goes into `binds`.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, Utc};

use super::lexer::{Temporal, parse_temporal};
use super::parser::{Condition, Expr, Literal, Op, Predicate};
use super::{BindValue, Field, FieldType, Filter, QueryError, Resource, shorten};

/// Checks `expr` against `resource` and renders it as a parenthesised SQL boolean
/// expression whose placeholders start at `$first_placeholder`.
pub fn compile(
    expr: &Expr,
    resource: &Resource,
    first_placeholder: usize,
) -> Result<Filter, QueryError> {
    let mut c = Compiler {
        resource,
        first_placeholder,
        binds: Vec::new(),
    };
    let (sql, wrapped) = c.expr(expr)?;
    Ok(Filter {
        sql: if wrapped { sql } else { format!("({sql})") },
        binds: c.binds,
    })
}

struct Compiler<'r> {
    resource: &'r Resource,
    first_placeholder: usize,
    binds: Vec<BindValue>,
}

/// A rendered piece of SQL and whether it is already enclosed in parentheses.
type Sql = (String, bool);

impl Compiler<'_> {
    /// Adds a bind value and returns its placeholder.
    fn bind(&mut self, v: BindValue) -> String {
        let n = self.first_placeholder + self.binds.len();
        self.binds.push(v);
        format!("${n}")
    }

    fn expr(&mut self, e: &Expr) -> Result<Sql, QueryError> {
        let (items, sep) = match e {
            Expr::Cond(c) => return self.condition(c),
            Expr::And(items) => (items, " AND "),
            Expr::Or(items) => (items, " OR "),
        };
        match items.as_slice() {
            [] => Err(QueryError::new("an AND/OR group has no conditions", None)),
            [only] => self.expr(only),
            _ => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    // Compound items come back parenthesised, so nesting is preserved.
                    parts.push(self.expr(item)?.0);
                }
                Ok((format!("({})", parts.join(sep)), true))
            }
        }
    }

    fn condition(&mut self, c: &Condition) -> Result<Sql, QueryError> {
        let field = *self
            .resource
            .field(&c.field)
            .ok_or_else(|| QueryError::unknown_field(&c.field, c.pos, self.resource))?;
        let col = field.column;
        let (op, value, value_pos) = match &c.pred {
            Predicate::IsNull => return Ok((format!("{col} IS NULL"), false)),
            Predicate::IsNotNull => return Ok((format!("{col} IS NOT NULL"), false)),
            Predicate::Compare {
                op,
                value,
                value_pos,
            } => (*op, value, *value_pos),
        };
        let bad = |why: &str| type_error(&field, c.pos, value, value_pos, why);

        if op == Op::Like {
            return match (field.ty, value) {
                (FieldType::Text, Literal::Str(s)) => {
                    let ph = self.bind(BindValue::Text(like_pattern(s)));
                    Ok((format!("LOWER({col}) LIKE LOWER({ph}) ESCAPE '\\'"), false))
                }
                (FieldType::Text, _) => Err(bad(
                    "a LIKE pattern must be quoted text, with % for any run of characters, _ for one character, and \\% or \\_ for a literal % or _",
                )),
                _ => Err(QueryError::at(
                    c.pos,
                    format!(
                        "LIKE only works on text fields, and '{}' (position {}) is {}; use = != > >= < <= instead",
                        field.name,
                        c.pos,
                        type_name(field.ty)
                    ),
                )),
            };
        }

        let bind = match field.ty {
            FieldType::Text => match value {
                Literal::Str(s) => BindValue::Text(s.clone()),
                _ => return Err(bad("text values must be in quotes")),
            },
            FieldType::Integer => match value {
                Literal::Int(i) => BindValue::Int(*i),
                Literal::Str(s) => BindValue::Int(
                    s.trim()
                        .parse()
                        .map_err(|_| bad("that is not a whole number"))?,
                ),
                _ => return Err(bad("that is not a whole number")),
            },
            FieldType::Float => match value {
                Literal::Int(i) => BindValue::Float(*i as f64),
                Literal::Float(x) => BindValue::Float(*x),
                Literal::Str(s) => match s.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() => BindValue::Float(x),
                    _ => return Err(bad("that is not a number")),
                },
                _ => return Err(bad("that is not a number")),
            },
            FieldType::Boolean => {
                if !matches!(op, Op::Eq | Op::Ne) {
                    return Err(QueryError::at(
                        c.pos,
                        format!(
                            "'{}' (position {}) is a true/false field; only = and != can be used with it, e.g. {} = true",
                            field.name, c.pos, field.name
                        ),
                    ));
                }
                let b = match value {
                    Literal::Bool(b) => *b,
                    Literal::Str(s) if s.eq_ignore_ascii_case("true") => true,
                    Literal::Str(s) if s.eq_ignore_ascii_case("false") => false,
                    _ => return Err(bad("only true or false can be used")),
                };
                BindValue::Int(i64::from(b))
            }
            FieldType::Date => match temporal(value) {
                Some(Temporal::Date(d)) => BindValue::Text(d.format("%Y-%m-%d").to_string()),
                Some(Temporal::DateTime(_)) => {
                    return Err(bad(
                        "the field holds a date only, so give a date without a time",
                    ));
                }
                _ => return Err(bad("that is not a date")),
            },
            FieldType::Time => match temporal(value) {
                Some(Temporal::Time(t)) => BindValue::Text(t.format("%H:%M").to_string()),
                _ => return Err(bad("that is not a time of day")),
            },
            FieldType::DateTime => match temporal(value) {
                Some(Temporal::DateTime(dt)) => BindValue::Text(
                    canonical_utc(dt).ok_or_else(|| bad("the date is out of range"))?,
                ),
                Some(Temporal::Date(d)) => {
                    return self
                        .whole_day(col, op, d)
                        .ok_or_else(|| bad("the date is out of range"));
                }
                _ => return Err(bad("that is not a date or date-time")),
            },
        };
        let ph = self.bind(bind);
        Ok((format!("{col} {} {ph}", sql_op(op)), false))
    }

    /// A date-only value on a date-time field stands for that whole UTC day.
    fn whole_day(&mut self, col: &str, op: Op, day: NaiveDate) -> Option<Sql> {
        let start = canonical_utc(midnight(day)?)?;
        let end = canonical_utc(midnight(day.succ_opt()?)?)?;
        Some(match op {
            Op::Eq => {
                let (a, b) = (self.text(start), self.text(end));
                (format!("({col} >= {a} AND {col} < {b})"), true)
            }
            Op::Ne => {
                let (a, b) = (self.text(start), self.text(end));
                (format!("({col} < {a} OR {col} >= {b})"), true)
            }
            Op::Gt => (format!("{col} >= {}", self.text(end)), false),
            Op::Ge => (format!("{col} >= {}", self.text(start)), false),
            Op::Lt => (format!("{col} < {}", self.text(start)), false),
            Op::Le => (format!("{col} < {}", self.text(end)), false),
            Op::Like => return None,
        })
    }

    fn text(&mut self, s: String) -> String {
        self.bind(BindValue::Text(s))
    }
}

/// A client's LIKE pattern as both databases read it alike under `ESCAPE '\'`:
/// `\%`, `\_` and `\\` stay escapes, and any other backslash (a trailing one too) is
/// made a literal backslash. Left alone, a trailing backslash is an error on
/// PostgreSQL but matches nothing on SQLite, and `\x` silently means `x`.
pub(super) fn like_pattern(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 2);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some(&next @ ('%' | '_' | '\\')) => {
                out.push('\\');
                out.push(next);
                chars.next();
            }
            _ => out.push_str("\\\\"),
        }
    }
    out
}

fn midnight(day: NaiveDate) -> Option<DateTime<FixedOffset>> {
    day.and_time(NaiveTime::MIN)
        .and_local_timezone(FixedOffset::east_opt(0)?)
        .single()
}

/// The fixed-width UTC form date-time columns store; `None` outside years 0000–9999,
/// where the width would change.
fn canonical_utc(dt: DateTime<FixedOffset>) -> Option<String> {
    let utc = dt.with_timezone(&Utc);
    (0..=9999)
        .contains(&utc.year())
        .then(|| utc.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

/// A literal as a date/time, whether written unquoted or in quotes.
fn temporal(value: &Literal) -> Option<Temporal> {
    match value {
        Literal::Date(d) => Some(Temporal::Date(*d)),
        Literal::DateTime(dt) => Some(Temporal::DateTime(*dt)),
        Literal::Time(t) => Some(Temporal::Time(*t)),
        Literal::Str(s) => parse_temporal(s.trim()),
        _ => None,
    }
}

fn sql_op(op: Op) -> &'static str {
    match op {
        Op::Eq => "=",
        Op::Ne => "<>",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Like => "LIKE",
    }
}

fn type_name(ty: FieldType) -> &'static str {
    match ty {
        FieldType::Text => "a text field",
        FieldType::Integer => "a whole-number field",
        FieldType::Float => "a number field",
        FieldType::Boolean => "a true/false field",
        FieldType::DateTime => "a date-time field",
        FieldType::Date => "a date field",
        FieldType::Time => "a time-of-day field",
    }
}

/// An example of a valid condition on `field`.
fn example(field: &Field) -> String {
    let n = field.name;
    match field.ty {
        FieldType::Text => format!("{n} = 'Smith' or {n} LIKE '%smi%'"),
        FieldType::Integer => format!("{n} > 2"),
        FieldType::Float => format!("{n} >= 12.5"),
        FieldType::Boolean => format!("{n} = true"),
        FieldType::DateTime => {
            format!("{n} >= 2026-11-21T18:30:00Z, or {n} = 2026-11-21 for a whole (UTC) day")
        }
        FieldType::Date => format!("{n} >= 2026-11-21"),
        FieldType::Time => format!("{n} >= '18:30'"),
    }
}

fn type_error(
    field: &Field,
    field_pos: usize,
    value: &Literal,
    value_pos: usize,
    why: &str,
) -> QueryError {
    QueryError::at(
        value_pos,
        format!(
            "invalid value {} at position {value_pos} for '{}' (position {field_pos}), {}: {why}; e.g. {}",
            shorten(&value.to_string()),
            field.name,
            type_name(field.ty),
            example(field)
        ),
    )
}
