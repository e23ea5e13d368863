//! SQL text built together with its bound values, so a placeholder's number always
//! is the position of its value: nothing is numbered by hand.
//!
//! This is `sqlx::QueryBuilder`'s idea for the `Any` driver: `QueryBuilder<Any>`
//! writes `?` placeholders, which PostgreSQL rejects, while both databases accept
//! `$n`. Only trusted text (column lists, keywords, the filter compiler's output)
//! is ever pushed as text; every value goes through [`Sql::push_bind`].

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, FromRow};

use super::query::BindValue;

#[derive(Debug, Default)]
pub(super) struct Sql {
    text: String,
    binds: Vec<BindValue>,
}

impl Sql {
    pub(super) fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            binds: Vec::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Appends trusted SQL text.
    pub(super) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder for `value`.
    pub(super) fn push_bind(&mut self, value: BindValue) -> &mut Self {
        self.binds.push(value);
        self.text.push('$');
        self.text.push_str(&self.binds.len().to_string());
        self
    }

    /// Appends `(p1, p2, …)` over `values`.
    pub(super) fn push_list(&mut self, values: impl IntoIterator<Item = BindValue>) -> &mut Self {
        self.push("(");
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push_bind(value);
        }
        self.push(")")
    }

    /// The number the next placeholder gets, for text rendered elsewhere whose
    /// placeholders continue this builder's (the `customQuery` compiler's).
    pub(super) fn next_placeholder(&self) -> usize {
        self.binds.len() + 1
    }

    /// Appends text whose placeholders were numbered from [`Sql::next_placeholder`],
    /// with its values in order.
    pub(super) fn push_numbered(&mut self, text: &str, binds: Vec<BindValue>) -> &mut Self {
        self.text.push_str(text);
        self.binds.extend(binds);
        self
    }

    /// Trusted text without values, then `rest`: its placeholders keep their numbers.
    pub(super) fn prefixed(prefix: &str, rest: &Sql) -> Self {
        Self {
            text: format!("{prefix}{}", rest.text),
            binds: rest.binds.clone(),
        }
    }

    #[cfg(test)]
    fn text(&self) -> &str {
        &self.text
    }

    pub(super) fn query_as<'q, R>(&self) -> sqlx::query::QueryAs<'q, Any, R, AnyArguments>
    where
        R: for<'r> FromRow<'r, AnyRow>,
    {
        let mut query = sqlx::query_as::<_, R>(sqlx::AssertSqlSafe(self.text.clone()));
        for bind in &self.binds {
            query = match bind {
                BindValue::Text(text) => query.bind(text.clone()),
                BindValue::Int(int) => query.bind(*int),
                BindValue::Float(float) => query.bind(*float),
            };
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_values() {
        let mut conditions = Sql::new("WHERE a = ");
        conditions
            .push_bind(BindValue::Int(1))
            .push(" AND b IN ")
            .push_list([BindValue::Int(2), BindValue::Int(3)]);
        let mut query = Sql::prefixed("SELECT x FROM t ", &conditions);
        query.push(" LIMIT ").push_bind(BindValue::Int(10));
        assert_eq!(
            query.text(),
            "SELECT x FROM t WHERE a = $1 AND b IN ($2, $3) LIMIT $4"
        );
        assert_eq!(query.binds.len(), 4);
    }
}
