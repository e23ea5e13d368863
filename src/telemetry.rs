//! Logging: human-readable text by default, one JSON object per line for log shippers.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

use crate::cli::LogFormat;

const DEFAULT_FILTER: &str = "info,sqlx=warn,rmcp=warn";

/// Installs the global subscriber; `RUST_LOG` overrides the default filter.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    // A second init (tests start many apps in one process) is harmless.
    let _ = match format {
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_target(false)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
}
