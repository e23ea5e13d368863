//! What every role of maitred runs on: the settings (flags, environment, files) and
//! the command line, HTTP serving with its middleware and error envelope, the HTTP
//! and OAuth clients, token verification, the database and its migrations, metrics,
//! trace context and logs, shutdown, and dev mode's demo identity. No role's logic
//! lives here; each role's crate builds on this one.

pub mod auth;
pub mod cli;
pub mod db;
pub mod delegation;
pub mod dev;
pub mod http;
pub mod http_client;
pub mod issuer;
pub mod metrics;
pub mod oauth_client;
pub mod otel;
pub mod random;
pub mod settings;
pub mod shutdown;
pub mod telemetry;
pub mod trace_context;
