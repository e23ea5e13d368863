//! The one integration test binary: every role started in-process on port 0 and
//! driven over real HTTP with real tokens, on SQLite and on PostgreSQL.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test that cannot go on should stop at once, saying where"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests start their own servers and clients; the TaskTracker rule is for request code"
)]
#![expect(
    clippy::print_stdout,
    reason = "tests that measure print their figures"
)]

mod browser;
mod helpers;

mod api;
mod bookings;
mod budgets;
mod budgets_replicas;
mod chaos;
mod chat;
mod connected_accounts;
mod connected_accounts_replicas;
mod connected_accounts_security;
mod crash;
mod delegation;
mod dialects;
mod docs;
mod elicitation;
mod errors;
mod eval;
mod golden;
mod grounding;
mod idempotency;
mod idempotent_calls;
mod identity;
mod injection;
mod local_models;
mod local_quirks;
mod mcp;
mod mcp_elicitation;
mod mcp_tasks_server;
mod migrations;
mod nginx;
mod observability;
mod openai_api;
mod policy;
mod process;
mod proxy;
mod replicas;
mod responses;
mod responses_replicas;
mod restart;
mod resume;
mod security_gateway;
mod security_hardening;
mod security_identity;
mod security_metrics;
mod security_redirect;
mod security_refresh;
mod security_resume;
mod security_sessions;
mod security_subjects;
mod security_third_round;
mod security_timeouts;
mod shutdown;
mod streams;
mod tasks;
mod tasks_replicas;
mod third_party_tasks;
mod token_exchange;
mod tokens;
mod tool_faults;
mod tool_search;
mod ui;
mod upstream;
