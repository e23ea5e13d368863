//! What a list tool lets a caller filter and sort on, read from what the tool says
//! about itself: the fields it names (`rating (integer)`, `quantity: number`, the
//! fields of a backticked example such as `rating <= 2`) and how its filter and sort
//! texts are written (quotes, the word that joins conditions, `field:desc` or `-field`).

use super::words::{content_stems, split_words};

/// Words that stand for "a field" in a description's grammar, never a field itself.
const PLACEHOLDERS: &str = "field fields key keys value values op operator name_of column";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldKind {
    Number,
    Date,
    /// A timestamp: a date compares with the whole day.
    DateTime,
    Time,
    Text,
    Boolean,
    /// Named, but its type was not said.
    Unknown,
}

impl FieldKind {
    pub(super) fn is_temporal(self) -> bool {
        matches!(self, FieldKind::Date | FieldKind::DateTime)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Field {
    /// As the tool writes it: `bookingCount`, `customer.name`, `on_hand`.
    pub path: String,
    pub kind: FieldKind,
}

/// How the tool wants a filter written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dialect {
    /// The quote around text values.
    pub quote: char,
    /// Between two conditions.
    pub and: String,
    /// Dates written bare (`2026-11-21`) rather than quoted.
    pub bare_dates: bool,
    /// `LIKE` with `%` is understood.
    pub like: bool,
}

/// How the tool wants a sort key written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SortStyle {
    /// `rating:desc`, `rating:asc`.
    Suffix,
    /// `rating desc`, `rating asc`.
    Word,
    /// `-rating` descending, `rating` ascending.
    Minus,
}

impl SortStyle {
    /// The style an example in `text` shows, if any.
    pub(super) fn read(text: &str) -> Option<SortStyle> {
        let lower = text.to_lowercase();
        if lower.contains(":desc") || lower.contains(":asc") {
            Some(SortStyle::Suffix)
        } else if snippets(text).iter().any(|s| starts_with_minus_field(s))
            || lower.contains("-field")
            || lower.contains("minus sign")
        {
            Some(SortStyle::Minus)
        } else if lower.contains(" desc") || lower.contains(" asc") {
            Some(SortStyle::Word)
        } else {
            None
        }
    }

    pub(super) fn key(self, field: &str, descending: bool) -> String {
        match (self, descending) {
            (SortStyle::Suffix, true) => format!("{field}:desc"),
            (SortStyle::Suffix, false) => format!("{field}:asc"),
            (SortStyle::Word, true) => format!("{field} desc"),
            (SortStyle::Word, false) => format!("{field} asc"),
            (SortStyle::Minus, true) => format!("-{field}"),
            (SortStyle::Minus, false) => field.to_owned(),
        }
    }
}

fn starts_with_minus_field(snippet: &str) -> bool {
    let mut chars = snippet.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
}

impl Dialect {
    /// The dialect `text` describes, when it describes comparisons at all: a filter
    /// language that never shows `<` or `>` is not one this model can write.
    pub(super) fn read(text: &str) -> Option<Dialect> {
        let compares = text.contains('<') || text.contains('>');
        if !compares {
            return None;
        }
        let lower = text.to_lowercase();
        let examples = snippets(text);
        let double = lower.contains("double quote")
            || examples
                .iter()
                .any(|s| s.contains('"') && !s.contains('\''));
        let single = lower.contains("single quote") || examples.iter().any(|s| s.contains('\''));
        let quote = if double && !single { '"' } else { '\'' };
        let and = if text.contains(" AND ") || text.contains("AND /") {
            " AND "
        } else if lower.contains(" and ") && examples.iter().any(|s| s.contains(" and ")) {
            " and "
        } else if examples.iter().any(|s| s.contains("&&")) {
            " && "
        } else {
            " AND "
        };
        let quoted_dates = lower.contains("'yyyy-mm-dd'")
            || lower.contains("\"yyyy-mm-dd\"")
            || lower.contains("dates in single quotes")
            || lower.contains("dates in double quotes")
            || lower.contains("quote dates");
        let bare_dates = examples.iter().any(|s| has_bare_date(s))
            || (lower.contains("yyyy-mm-dd") && !quoted_dates);
        Some(Dialect {
            quote,
            and: and.to_owned(),
            bare_dates,
            like: text.contains("LIKE") || lower.contains(" like "),
        })
    }
}

/// A date in an example that is not inside quotes.
fn has_bare_date(snippet: &str) -> bool {
    let mut quoted = false;
    let chars: Vec<char> = snippet.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c == '\'' || *c == '"' {
            quoted = !quoted;
            continue;
        }
        let looks_like_date = !quoted
            && chars.len() >= i + 10
            && chars[i..i + 4].iter().all(char::is_ascii_digit)
            && chars[i + 4] == '-'
            && chars[i + 5..i + 7].iter().all(char::is_ascii_digit);
        if looks_like_date {
            return true;
        }
    }
    false
}

/// The text between backticks.
pub(super) fn snippets(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The fields `text` names, in the order it names them; `params` (the tool's own
/// argument names) are left out, and so are the words that stand for "a field".
pub(super) fn read(text: &str, params: &[String]) -> Vec<Field> {
    let mut fields: Vec<Field> = Vec::new();
    let mut add = |path: &str, kind: FieldKind| {
        let path = path.trim_matches(|c: char| c == '.' || c == '`');
        let plain = split_words(path).join(" ");
        let unusable = path.is_empty()
            || !path.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            || PLACEHOLDERS.split_whitespace().any(|p| p == plain)
            || params.iter().any(|p| p == path);
        if unusable {
            return;
        }
        match fields.iter_mut().find(|f| f.path == path) {
            Some(known) if known.kind == FieldKind::Unknown => known.kind = kind,
            Some(_) => {}
            None => fields.push(Field {
                path: path.to_owned(),
                kind,
            }),
        }
    };
    for (path, kind) in typed_names(text) {
        add(&path, kind);
    }
    for snippet in snippets(text) {
        for (path, kind) in example_fields(snippet) {
            add(&path, kind);
        }
    }
    fields
}

/// `name (type)`, `name: type` and `` `name` type ``, where type is a word for a kind.
fn typed_names(text: &str) -> Vec<(String, FieldKind)> {
    let chars: Vec<char> = text.chars().collect();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && is_ident(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let name: String = chars[start..i].iter().collect();
        let backticked = start > 0 && chars[start - 1] == '`' && chars.get(i) == Some(&'`');
        let j = if backticked { i + 1 } else { i };
        let after = match (chars.get(j), chars.get(j + 1)) {
            (Some('('), _) => j + 1,
            (Some(' '), Some('(')) | (Some(':'), Some(' ')) => j + 2,
            (Some(' '), _) if backticked => j + 1,
            _ => continue,
        };
        let kind_text: String = chars[after..]
            .iter()
            .take_while(|c| !matches!(c, ')' | ',' | ';' | '.' | '\n'))
            .take(24)
            .collect();
        if let Some(kind) = kind_of(&kind_text) {
            found.push((name, kind));
        }
    }
    found
}

/// The kind a type phrase names: only the first word or two count, so that prose in
/// parentheses ("(e.g. Lunch, Dinner)") names nothing.
fn kind_of(phrase: &str) -> Option<FieldKind> {
    let lower = phrase.trim().to_lowercase();
    let head: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .take(2)
        .collect();
    let first = head.first().copied().unwrap_or_default();
    let kind = match first {
        "integer" | "int" | "number" | "numeric" | "float" | "decimal" | "double" | "count"
        | "amount" | "money" => FieldKind::Number,
        "timestamp" | "datetime" | "date-time" | "instant" => FieldKind::DateTime,
        "date" => FieldKind::Date,
        "time" => FieldKind::Time,
        "text" | "string" | "str" => FieldKind::Text,
        "true/false" | "boolean" | "bool" | "yes/no" => FieldKind::Boolean,
        _ => return None,
    };
    Some(kind)
}

/// The fields on the left of comparisons in an example: `rating <= 2 AND createdAt >=
/// 2026-01-01` gives rating (a number) and createdAt (a date).
fn example_fields(snippet: &str) -> Vec<(String, FieldKind)> {
    let words: Vec<&str> = snippet.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, window) in words.windows(3).enumerate() {
        let [field, op, value] = window else {
            continue;
        };
        let is_op = matches!(*op, "=" | "!=" | "<>" | ">" | ">=" | "<" | "<=")
            || op.eq_ignore_ascii_case("like");
        let field = field.trim_start_matches('(');
        if !is_op || i > 0 && matches!(words[i - 1], "=" | ">" | "<") {
            continue;
        }
        let value = value.trim_end_matches(')');
        found.push((field.to_owned(), value_kind(value)));
    }
    found
}

fn value_kind(value: &str) -> FieldKind {
    let unquoted = value.trim_matches(|c| c == '\'' || c == '"');
    if unquoted.len() >= 10 && has_bare_date(&format!(" {unquoted}")) {
        FieldKind::Date
    } else if unquoted.parse::<f64>().is_ok() {
        FieldKind::Number
    } else if unquoted.eq_ignore_ascii_case("true") || unquoted.eq_ignore_ascii_case("false") {
        FieldKind::Boolean
    } else if value.starts_with(['\'', '"']) {
        FieldKind::Text
    } else {
        FieldKind::Unknown
    }
}

/// Whether a parameter's name and description make it a filter expression.
pub(super) fn is_filter_param(name: &str, description: &str) -> bool {
    let words = split_words(name);
    let named = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "filter" | "filters" | "where" | "condition" | "conditions" | "criteria"
        )
    });
    named || content_stems(description).contains("filter")
}

/// Whether a parameter orders the results.
pub(super) fn is_sort_param(name: &str) -> bool {
    split_words(name)
        .iter()
        .any(|w| matches!(w.as_str(), "sort" | "order" | "orderby" | "ordering"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOS: &str = "Filter with customQuery: conditions `field op value` with op one of \
        = != > >= < <= LIKE, or `field IS NULL` / `field IS NOT NULL`, joined with AND / OR and \
        parentheses. Put text in single quotes ('Smith'); dates as YYYY-MM-DD. Example: \
        `rating <= 2 AND createdAt >= 2026-01-01`. Fields: _id (text), bookingId (text), \
        rating (integer), createdAt (timestamp), isPublic (true/false), customer.name (text). \
        Sort with `field:asc` or `field:desc` on the same fields.";

    #[test]
    fn reads_typed_field_lists_and_examples() {
        let fields = read(RESOS, &["limit".to_owned()]);
        let kinds: Vec<(&str, FieldKind)> =
            fields.iter().map(|f| (f.path.as_str(), f.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("_id", FieldKind::Text),
                ("bookingId", FieldKind::Text),
                ("rating", FieldKind::Number),
                ("createdAt", FieldKind::DateTime),
                ("isPublic", FieldKind::Boolean),
                ("customer.name", FieldKind::Text),
            ]
        );
        let dialect = Dialect::read(RESOS).unwrap();
        assert_eq!(dialect.quote, '\'');
        assert_eq!(dialect.and, " AND ");
        assert!(dialect.bare_dates && dialect.like);
        assert_eq!(SortStyle::read(RESOS), Some(SortStyle::Suffix));
    }

    #[test]
    fn reads_other_ways_of_naming_fields() {
        let text = "Fields: `on_hand` integer, `unit_cost` number, supplier: text, \
            expires_on (date). Example: `on_hand < 10 and supplier = \"Acme\"`. Sort: a field, \
            or `-unit_cost` for the largest first.";
        let fields = read(text, &[]);
        let paths: Vec<&str> = fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["on_hand", "unit_cost", "supplier", "expires_on"]);
        let dialect = Dialect::read(text).unwrap();
        assert_eq!((dialect.quote, dialect.and.as_str()), ('"', " and "));
        assert!(!dialect.bare_dates && !dialect.like);
        assert_eq!(SortStyle::read(text), Some(SortStyle::Minus));
        assert_eq!(SortStyle::Minus.key("unit_cost", true), "-unit_cost");
    }

    #[test]
    fn prose_in_parentheses_names_no_field() {
        let fields = read(
            "opening periods (e.g. Lunch, Dinner) and tables (seatsMin)",
            &[],
        );
        assert!(fields.is_empty(), "{fields:?}");
        assert!(Dialect::read("a free-text search").is_none());
    }
}
