//! The `sort` parameter: `field[:asc|desc|1|-1]`, comma-separated.

use super::{QueryError, Resource, check_length, shorten};

const SORT_HINT: &str =
    "sort looks like `name:asc,createdAt:desc` (direction asc, desc, 1 or -1; default asc)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortDir {
    Asc,
    Desc,
}

/// One ORDER BY key: a whitelisted column and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub column: &'static str,
    pub dir: SortDir,
}

impl SortKey {
    /// The key as an ORDER BY item, e.g. `c.name ASC NULLS LAST`. SQLite and
    /// PostgreSQL put NULLs at opposite ends by default; empty values go last on both.
    pub fn to_sql(&self) -> String {
        let dir = match self.dir {
            SortDir::Asc => "ASC NULLS LAST",
            SortDir::Desc => "DESC NULLS LAST",
        };
        format!("{} {dir}", self.column)
    }
}

/// `ORDER BY <keys>, <tiebreaker>`; `tiebreaker` is a trusted SQL ORDER BY item (such as
/// `c.id ASC`) that makes paging stable, or "" for none. Returns "" if there is nothing to
/// order by.
pub fn order_by(keys: &[SortKey], tiebreaker: &str) -> String {
    let mut items: Vec<String> = keys.iter().map(SortKey::to_sql).collect();
    if !tiebreaker.trim().is_empty() {
        items.push(tiebreaker.to_string());
    }
    if items.is_empty() {
        String::new()
    } else {
        format!("ORDER BY {}", items.join(", "))
    }
}

/// `sort` parameter: comma-separated keys `field:asc|desc|1|-1` (direction optional, default asc;
/// case-insensitive asc/desc). Empty input gives no keys.
pub fn parse_sort(input: &str, resource: &Resource) -> Result<Vec<SortKey>, QueryError> {
    check_length(input, "sort")?;
    if input.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut keys: Vec<SortKey> = Vec::new();
    let mut offset = 0;
    for part in input.split(',') {
        let part_start = offset;
        offset += part.chars().count() + 1;
        let start = part_start + leading_ws(part);
        let (name, dir) = match part.split_once(':') {
            Some((name, dir)) => {
                let dir_pos = part_start + name.chars().count() + 1 + leading_ws(dir);
                (name.trim(), Some((dir.trim(), dir_pos)))
            }
            None => (part.trim(), None),
        };
        if name.is_empty() {
            return Err(QueryError::at(
                start,
                format!("missing field name in sort at position {start}; {SORT_HINT}"),
            ));
        }
        let field = resource
            .field(name)
            .ok_or_else(|| QueryError::unknown_field(name, start, resource))?;
        let dir = match dir {
            None => SortDir::Asc,
            Some((d, _)) if d.eq_ignore_ascii_case("asc") || d == "1" => SortDir::Asc,
            Some((d, _)) if d.eq_ignore_ascii_case("desc") || d == "-1" => SortDir::Desc,
            Some((d, at)) => {
                return Err(QueryError::at(
                    at,
                    format!(
                        "invalid sort direction '{}' for '{}' at position {at}; {SORT_HINT}",
                        shorten(d),
                        field.name
                    ),
                ));
            }
        };
        if keys.iter().any(|k| k.column == field.column) {
            return Err(QueryError::at(
                start,
                format!(
                    "'{}' appears more than once in sort (position {start}); list each field once",
                    field.name
                ),
            ));
        }
        keys.push(SortKey {
            column: field.column,
            dir,
        });
    }
    Ok(keys)
}

fn leading_ws(s: &str) -> usize {
    s.chars().take_while(|c| c.is_whitespace()).count()
}
