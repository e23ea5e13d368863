//! Logging: human-readable text by default, one JSON object per line for log shippers.
//!
//! Log lines carry strings from outside (tool names, token subjects, model output in
//! errors). Fields are logged with `?` where they come from outside, and, as a second
//! line of defence, the text format's writer escapes every line break inside an event,
//! so no string can start a forged log line. JSON escapes them by itself.

use std::io::{self, IsTerminal, Write};

use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::otel;
use crate::settings::LogFormat;

const DEFAULT_FILTER: &str = "info,sqlx=warn,rmcp=warn";

/// What [`init`] started that needs stopping: the trace export, flushed at shutdown.
#[must_use = "call shutdown at the end, so the last spans are sent"]
pub struct Telemetry {
    traces: Option<otel::Exporter>,
}

impl Telemetry {
    /// Sends the spans still batched (a no-op without trace export).
    pub async fn shutdown(self) {
        if let Some(traces) = self.traces {
            traces.shutdown().await;
        }
    }
}

/// Installs the global subscriber; `RUST_LOG` overrides the default filter. With a
/// `config` (the `OTEL_*` environment asks for traces), spans are also exported.
pub fn init(format: LogFormat, config: Option<otel::Config>) -> Telemetry {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = io::stderr().is_terminal();
    let log: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(move || OneLine {
                out: io::stderr(),
                ansi,
            })
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let exporter = config.as_ref().map(otel::Exporter::start);
    let (traces, failed) = match exporter {
        Some(Ok(exporter)) => (Some(exporter), None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    // A second init (tests start many apps in one process) is harmless.
    let _ = match &traces {
        // The log's filter is the log's alone: the exporter sees what it needs
        // (sqlx's statements) whatever RUST_LOG says.
        Some(exporter) => tracing_subscriber::registry()
            .with(log.with_filter(filter))
            .with(otel::layers(exporter))
            .try_init(),
        // The filter is global: disabled callsites cost nothing anywhere.
        None => tracing_subscriber::registry()
            .with(log)
            .with(filter)
            .try_init(),
    };
    if let Some(error) = failed {
        tracing::warn!("traces are not exported: {error:#}");
    }
    if let (Some(config), Some(_)) = (&config, &traces) {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        tracing::info!(
            capture_content = config.capture_content,
            "exporting traces over OTLP/HTTP"
        );
    }
    Telemetry { traces }
}

/// Writes each event (one `write` call of the formatted event, ending in a newline) as
/// exactly one line: line breaks and other control characters inside it are escaped.
/// With `ansi`, ESC passes through: the formatter's colours need it.
pub struct OneLine<W: Write> {
    pub out: W,
    pub ansi: bool,
}

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, end) = match buf.split_last() {
            Some((b'\n', body)) => (body, &b"\n"[..]),
            _ => (buf, &b""[..]),
        };
        let mut line = Vec::with_capacity(buf.len() + 8);
        for &byte in body {
            match byte {
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                b'\t' => line.push(byte),
                0x1b if self.ansi => line.push(byte),
                control if control < 0x20 || control == 0x7f => {
                    line.extend_from_slice(format!("\\x{control:02x}").as_bytes());
                }
                other => line.push(other),
            }
        }
        line.extend_from_slice(end);
        self.out.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(event: &str) -> String {
        let mut out = OneLine {
            out: Vec::new(),
            ansi: false,
        };
        out.write_all(event.as_bytes()).unwrap();
        String::from_utf8(out.out).unwrap()
    }

    #[test]
    fn a_line_break_inside_an_event_cannot_start_a_forged_line() {
        let forged = "INFO tool call tool=x\n2026-11-24T00:00:00Z  INFO admin signed in\n";
        let written = through(forged);
        assert_eq!(written.lines().count(), 1, "{written}");
        assert!(written.ends_with('\n'));
        assert!(written.contains("x\\n2026"), "{written}");
        assert_eq!(through("a\rb\u{7}c\u{1b}[2J\n"), "a\\rb\\x07c\\x1b[2J\n");
    }
}
