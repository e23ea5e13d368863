//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, and
//! not at all otherwise: no layer, no exporter, nothing recorded (docs/observability-traces.md).
//!
//! Spans are the `tracing` spans the code already has, named and tagged in the
//! OpenTelemetry conventions (`otel.name`, `otel.kind`, `gen_ai.*`, `mcp.*`, `db.*`),
//! so the log lines keep working. Each role is its own service, also in `maitred all`:
//! a request span carries its role in its OpenTelemetry context ([`ServingRole`]),
//! which every span below it inherits, and the tracer picks that role's provider.
//!
//! No question text, tool arguments or results go into a span unless
//! `MAITRED_OTEL_CAPTURE_CONTENT=true`.

mod bridge;
mod export;
mod sql;

use std::sync::OnceLock;

use tracing::{Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

pub use bridge::{continue_trace, link, set_attribute, set_strings, trace_of};
pub use export::Exporter;

/// The role whose server a span's work belongs to, in its OpenTelemetry context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServingRole(pub &'static str);

/// What the environment asks for, read once at start-up.
#[derive(Debug, Clone)]
pub struct Config {
    /// The roles this process runs (`gateway`, `mcp`, `backend`).
    pub roles: Vec<&'static str>,
    /// `OTEL_SERVICE_NAME`: one role's service name, or with several roles in one
    /// process the prefix of each (`<name>-gateway`).
    pub service_name: Option<String>,
    pub capture_content: bool,
    /// What to warn about once logging runs.
    pub warnings: Vec<String>,
}

/// Set once traces are exported.
static STATE: OnceLock<State> = OnceLock::new();

#[derive(Debug)]
struct State {
    capture_content: bool,
    db_system: OnceLock<&'static str>,
}

/// Whether spans are exported (and so worth tagging).
pub fn enabled() -> bool {
    STATE.get().is_some()
}

/// Whether question text, tool arguments and results may go into spans.
pub fn capture_content() -> bool {
    STATE.get().is_some_and(|s| s.capture_content)
}

/// The database the SQL spans name (`sqlite`, `postgresql`); set when it connects.
pub fn set_db_system(url: &str) {
    if let Some(state) = STATE.get() {
        let system = if url.starts_with("postgres") {
            "postgresql"
        } else {
            "sqlite"
        };
        let _ = state.db_system.set(system);
    }
}

fn db_system() -> &'static str {
    STATE
        .get()
        .and_then(|s| s.db_system.get().copied())
        .unwrap_or("sqlite")
}

impl Config {
    /// `None` when traces are not to be exported: no endpoint, `OTEL_SDK_DISABLED=true`,
    /// `OTEL_TRACES_EXPORTER` other than `otlp`, or no role that serves requests.
    pub fn from_env(roles: &[&'static str]) -> Option<Self> {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if roles.is_empty()
            || var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return None;
        }
        if var("OTEL_TRACES_EXPORTER").is_some_and(|v| !v.eq_ignore_ascii_case("otlp")) {
            return None;
        }
        var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
        let mut warnings = Vec::new();
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol.filter(|p| p != "http/protobuf") {
            warnings.push(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported; traces go as http/protobuf"
            ));
        }
        Some(Self {
            roles: roles.to_vec(),
            service_name: var("OTEL_SERVICE_NAME"),
            capture_content: var("MAITRED_OTEL_CAPTURE_CONTENT")
                .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1"),
            warnings,
        })
    }

    /// The service name of `role`'s spans.
    fn service_name(&self, role: &str) -> String {
        match (&self.service_name, self.roles.len()) {
            (Some(name), 1) => name.clone(),
            (Some(name), _) => format!("{name}-{role}"),
            (None, _) => format!("maitred-{role}"),
        }
    }

    /// The service of spans that belong to no role's request (start-up work, say).
    fn process_name(&self) -> String {
        match (&self.service_name, self.roles.as_slice()) {
            (Some(name), _) => name.clone(),
            (None, [role]) => format!("maitred-{role}"),
            (None, _) => "maitred".to_owned(),
        }
    }
}

/// The layers that export: our own spans (INFO and up) with the warnings and errors
/// logged inside them as span events, and sqlx's statements as SQL spans. Other
/// crates' spans stay out (a span under one of ours that is not exported is skipped
/// over: its children hang from the nearest exported ancestor).
pub(crate) fn layers<S>(exporter: &Exporter) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ours = |meta: &Metadata<'_>| {
        meta.target().starts_with("maitred")
            && if meta.is_span() {
                *meta.level() <= Level::INFO
            } else {
                *meta.level() <= Level::WARN
            }
    };
    let spans = tracing_opentelemetry::layer()
        .with_tracer(exporter.tracer())
        .with_location(false)
        .with_tracked_inactivity(false)
        .with_filter(filter_fn(ours));
    let statements = sql::SqlSpans {
        tracer: exporter.tracer(),
    }
    .with_filter(filter_fn(|meta| meta.target() == "sqlx::query"));
    spans.and_then(statements)
}

/// The roles a command line runs, for the service names.
pub fn roles_of(command: Option<&crate::cli::Command>) -> Vec<&'static str> {
    use crate::cli::Command;
    match command {
        None | Some(Command::All(_)) => vec!["backend", "mcp", "gateway"],
        Some(Command::Backend(_)) => vec!["backend"],
        Some(Command::Mcp(_)) => vec!["mcp"],
        Some(Command::Gateway(_)) => vec!["gateway"],
        Some(Command::Migrate(_) | Command::Token(_) | Command::Eval(_)) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: Option<&str>, roles: &[&'static str]) -> Config {
        Config {
            roles: roles.to_vec(),
            service_name: name.map(str::to_owned),
            capture_content: false,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn each_role_is_its_own_service_even_in_one_process() {
        let all = config(None, &["backend", "mcp", "gateway"]);
        assert_eq!(all.service_name("gateway"), "maitred-gateway");
        assert_eq!(all.service_name("mcp"), "maitred-mcp");
        assert_eq!(all.process_name(), "maitred");
        let named = config(Some("resto"), &["backend", "mcp", "gateway"]);
        assert_eq!(named.service_name("backend"), "resto-backend");
        let one = config(Some("resto-api"), &["backend"]);
        assert_eq!(one.service_name("backend"), "resto-api");
        assert_eq!(config(None, &["mcp"]).process_name(), "maitred-mcp");
    }
}
