//! SQL statements as client spans under the span that ran them. sqlx reports each
//! statement once it is done (its `sqlx::query` event: the statement text, with
//! placeholders and never the bound values, and how long it took); this layer makes a
//! span of it, back-dated to when the statement began.

use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanBuilder, SpanKind, TraceContextExt, Tracer};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::export::RoleTracer;

/// Receives only `sqlx::query` events (its filter says so).
pub(crate) struct SqlSpans {
    pub(crate) tracer: RoleTracer,
}

impl<S: Subscriber> Layer<S> for SqlSpans {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        // The span that ran the statement is the current OpenTelemetry context (the
        // tracing layer attaches it on enter; sqlx's SQLite worker enters the
        // caller's span). A statement outside any request (start-up, upkeep) is left out.
        let parent = opentelemetry::Context::current();
        if !parent.has_active_span() {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let text = match fields.statement.trim() {
            "" => fields.summary.trim_end_matches(" …").trim(),
            full => full,
        };
        if text.is_empty() {
            return;
        }
        let end = SystemTime::now();
        let start = end
            .checked_sub(Duration::from_secs_f64(fields.elapsed_secs.max(0.0)))
            .unwrap_or(end);
        let (operation, collection) = operation_and_collection(text);
        let name = match &collection {
            Some(table) => format!("{operation} {table}"),
            None => operation.clone(),
        };
        let mut attributes = vec![
            KeyValue::new("db.system.name", super::db_system()),
            KeyValue::new("db.operation.name", operation),
            KeyValue::new("db.query.text", text.to_owned()),
        ];
        if let Some(table) = collection {
            attributes.push(KeyValue::new("db.collection.name", table));
        }
        let builder = SpanBuilder::from_name(name)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes);
        let mut span = self.tracer.build_with_context(builder, &parent);
        span.end_with_timestamp(end);
    }
}

#[derive(Default)]
struct Fields {
    summary: String,
    statement: String,
    elapsed_secs: f64,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.clone_into(&mut self.statement),
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed_secs = value;
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// The statement's first keyword, and the table it names first (`FROM`, `INTO`,
/// `UPDATE`, `JOIN`), as the span's name: `SELECT tables`.
fn operation_and_collection(sql: &str) -> (String, Option<String>) {
    let words: Vec<&str> = sql.split_whitespace().collect();
    let operation = words
        .first()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_ascii_alphabetic())
                .to_ascii_uppercase()
        })
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "SQL".to_owned());
    let table = words
        .windows(2)
        .find(|pair| {
            ["FROM", "INTO", "UPDATE", "JOIN"]
                .iter()
                .any(|k| pair[0].eq_ignore_ascii_case(k))
        })
        .map(|pair| {
            pair[1]
                .trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .to_owned()
        })
        .filter(|t| !t.is_empty());
    (operation, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_named_by_its_operation_and_first_table() {
        assert_eq!(
            operation_and_collection("SELECT id, name FROM tables WHERE id = ?"),
            ("SELECT".to_owned(), Some("tables".to_owned()))
        );
        assert_eq!(
            operation_and_collection("insert into \"bookings\" (a) values ($1)"),
            ("INSERT".to_owned(), Some("bookings".to_owned()))
        );
        assert_eq!(
            operation_and_collection("BEGIN"),
            ("BEGIN".to_owned(), None)
        );
    }
}
