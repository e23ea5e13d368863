//! The `customQuery` filter and `sort` parameters of the list endpoints.
//!
//! resOS lets clients filter lists with a small expression language
//! (`people>1,duration>60`). Clients of this API are often LLMs writing such
//! expressions on the fly, so two things matter more than brevity here:
//!
//! * Nothing a client writes may reach the SQL text. The input is parsed into an
//!   AST, every field is checked against a per-resource whitelist that maps it to a
//!   trusted column expression, and every value is bound as a parameter. The SQL
//!   fragment is assembled only from whitelisted column strings, fixed keywords and
//!   `$n` placeholders, so injection is impossible by construction rather than by
//!   escaping.
//! * Every rejection explains itself. Errors say what was wrong, where, and what is
//!   allowed, because the reader is usually a program that will retry with a
//!   corrected query.
//!
//! Values are converted to the representation the columns actually store (0/1
//! booleans, `YYYY-MM-DD` dates, `HH:MM` times, fixed-width UTC timestamps) so that
//! the same comparison works on SQLite and PostgreSQL.
//!
//! `LIKE` is case-insensitive; in its pattern `%` is any run of characters, `_` one
//! character, `\%` and `\_` a literal `%` and `_`, `\\` a literal backslash, and any
//! other backslash (a trailing one included) is itself a literal backslash, so a
//! pattern means the same on both databases and never fails. This applies to the
//! text once unquoted: inside quotes `\\` and `\'` already stand for `\` and `'`, so
//! `name LIKE 'abc\\'` ends with a literal backslash and `name LIKE 'abc\'` is an
//! unterminated text.

mod compile;
mod lexer;
mod parser;
mod sort;

#[cfg(test)]
mod tests;

pub use compile::compile;
pub use parser::{Condition, Expr, Literal, Op, Predicate, parse};
pub use sort::{SortDir, SortKey, order_by, parse_sort};

/// Longest accepted `customQuery` / `sort` value, in characters.
pub const MAX_INPUT_CHARS: usize = 2000;
/// Deepest accepted parenthesis nesting.
pub const MAX_DEPTH: usize = 16;
/// Most conditions accepted in one filter.
pub const MAX_CONDITIONS: usize = 64;

/// How a field's column stores its values, which decides what a client may compare it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Integer,
    Float,
    /// Stored as 0/1.
    Boolean,
    /// Canonical UTC text `YYYY-MM-DDTHH:MM:SS.mmmZ` (fixed width, so text order is time order).
    DateTime,
    /// Text `YYYY-MM-DD`.
    Date,
    /// Text `HH:MM`.
    Time,
}

/// One filterable/sortable field of a resource: `name` is the JSON field name a client writes
/// (e.g. "bookingCount", "guest.email" — dots allowed), `column` the SQL expression it maps to
/// (a trusted static string such as "c.booking_count").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub column: &'static str,
    pub ty: FieldType,
}

/// The whitelist of fields a list endpoint can filter and sort on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub name: &'static str,
    pub fields: &'static [Field],
}

impl Resource {
    /// The field a client calls `name` (exact, case-sensitive match).
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// All field names, in declaration order.
    pub fn field_names(&self) -> Vec<&'static str> {
        self.fields.iter().map(|f| f.name).collect()
    }
}

/// What gets bound. Booleans are bound as Int(0|1) (columns store 0/1), dates/times as canonical Text.
#[derive(Debug, Clone, PartialEq)]
pub enum BindValue {
    Text(String),
    Int(i64),
    Float(f64),
}

/// A compiled filter: a parenthesised SQL boolean expression using `$n` placeholders,
/// and the values for those placeholders in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub sql: String,
    pub binds: Vec<BindValue>,
}

/// A rejected `customQuery` or `sort` value; `message` is meant for the API client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    /// A full sentence saying what is wrong, where, and what is allowed.
    pub message: String,
    /// Character offset in the input where the problem is, when known.
    pub position: Option<usize>,
    /// Filled for unknown-field errors.
    pub allowed_fields: Vec<&'static str>,
}

impl QueryError {
    pub(crate) fn new(message: impl Into<String>, position: Option<usize>) -> Self {
        QueryError {
            message: message.into(),
            position,
            allowed_fields: Vec::new(),
        }
    }

    pub(crate) fn at(position: usize, message: impl Into<String>) -> Self {
        QueryError::new(message, Some(position))
    }

    /// Unknown-field error for `name` (written at `position`) on `resource`.
    pub(crate) fn unknown_field(name: &str, position: usize, resource: &Resource) -> Self {
        let allowed = resource.field_names();
        let hint = allowed
            .iter()
            .find(|f| f.eq_ignore_ascii_case(name))
            .map(|f| format!(" (did you mean '{f}'? field names are case-sensitive)"))
            .unwrap_or_default();
        QueryError {
            message: format!(
                "unknown field '{}' at position {position}{hint}; fields of {} you can use: {}",
                shorten(name),
                resource.name,
                allowed.join(", ")
            ),
            position: Some(position),
            allowed_fields: allowed,
        }
    }
}

/// Parse + compile in one go. `first_placeholder` is the number of the first `$n` to use
/// (the caller may already have bound other parameters). Empty/whitespace-only input => Ok(None).
pub fn compile_filter(
    input: &str,
    resource: &Resource,
    first_placeholder: usize,
) -> Result<Option<Filter>, QueryError> {
    check_length(input, "customQuery")?;
    if input.trim().is_empty() {
        return Ok(None);
    }
    let expr = parse(input)?;
    compile(&expr, resource, first_placeholder).map(Some)
}

fn check_length(input: &str, what: &str) -> Result<(), QueryError> {
    let len = input.chars().count();
    if len > MAX_INPUT_CHARS {
        return Err(QueryError::at(
            MAX_INPUT_CHARS,
            format!(
                "{what} is too long ({len} characters); the maximum is {MAX_INPUT_CHARS} characters"
            ),
        ));
    }
    Ok(())
}

/// Input echoed in messages, cut short so a hostile value cannot bloat the response.
fn shorten(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}
