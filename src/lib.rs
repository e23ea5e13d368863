//! maitred: a streaming chat gateway for tool-using LLMs. This crate holds every
//! role; `maitred <role>` runs one, `maitred all` runs them all in one process.

pub mod app;
pub mod auth;
pub mod backend;
pub mod cli;
pub mod db;
pub mod delegation;
pub mod gateway;
pub mod http;
pub mod http_client;
pub mod identity;
pub mod issuer;
pub mod mcp;
pub mod metrics;
pub mod oauth_client;
pub mod random;
pub mod scripted_llm;
pub mod settings;
pub mod shutdown;
pub mod telemetry;
pub mod trace_context;
