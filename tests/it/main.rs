//! The one integration test binary: every role started in-process on port 0 and
//! driven over real HTTP with real tokens, on SQLite and on PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod helpers;

mod api;
mod bookings;
mod chat;
mod crash;
mod dialects;
mod errors;
mod identity;
mod mcp;
mod migrations;
mod nginx;
mod observability;
mod openai_api;
mod policy;
mod process;
mod proxy;
mod replicas;
mod restart;
mod security_gateway;
mod security_identity;
mod shutdown;
mod streams;
mod tokens;
mod tool_faults;
mod ui;
mod upstream;
