//! The web UI's TypeScript types for the chat stream and the conversations API are
//! generated from the Rust types that produce them, into
//! `frontend/src/api/generated.ts`. This test fails when that file is not what the
//! Rust types say; `MAITRED_WRITE_BINDINGS=1 cargo test bindings` rewrites it.

use ts_rs::TS;

use super::accounts::view::{
    AccountList, AccountStatus, AccountView, AdminAccountList, AdminAccountView, ClientKind,
    ConnectStart, Disconnected,
};
use super::background::view::{TaskInput, TaskList, TaskView};
use super::chat::store::ConversationSummary;
use super::chat::views::{ConversationView, PartView, ToolCallView};
use maitred_protocol::events::{
    ApprovalRequiredEvent, BudgetEvent, ChatEvent, Claim, ClaimKind, ClaimStatus, ConnectCard,
    ConnectReason, DoneEvent, ErrorEvent, Finish, GroundingEvent, InputAction, InputMode,
    InputRequiredEvent, InputResolvedEvent, MetaEvent, ResumedEvent, TokenEvent, ToolCallEvent,
    ToolProgressEvent, ToolResultEvent, UsageEvent,
};
use maitred_protocol::ids::{
    CallStatus, ConversationId, InputId, MessageId, MessageStatus, PartId, Role, TaskId,
    TaskStatus, ToolCallId,
};

const PATH: &str = "../../frontend/src/api/generated.ts";

fn declarations() -> Vec<String> {
    let cfg = ts_rs::Config::default();
    vec![
        ConversationId::decl(&cfg),
        MessageId::decl(&cfg),
        PartId::decl(&cfg),
        ToolCallId::decl(&cfg),
        InputId::decl(&cfg),
        TaskId::decl(&cfg),
        Role::decl(&cfg),
        MessageStatus::decl(&cfg),
        CallStatus::decl(&cfg),
        MetaEvent::decl(&cfg),
        TokenEvent::decl(&cfg),
        ToolCallEvent::decl(&cfg),
        ApprovalRequiredEvent::decl(&cfg),
        InputMode::decl(&cfg),
        ConnectReason::decl(&cfg),
        ConnectCard::decl(&cfg),
        InputRequiredEvent::decl(&cfg),
        InputAction::decl(&cfg),
        InputResolvedEvent::decl(&cfg),
        ToolProgressEvent::decl(&cfg),
        tool_result_status(),
        ToolResultEvent::decl(&cfg),
        ClaimKind::decl(&cfg),
        ClaimStatus::decl(&cfg),
        Claim::decl(&cfg),
        GroundingEvent::decl(&cfg),
        UsageEvent::decl(&cfg),
        BudgetEvent::decl(&cfg),
        ErrorEvent::decl(&cfg),
        ResumedEvent::decl(&cfg),
        Finish::decl(&cfg),
        DoneEvent::decl(&cfg),
        ChatEvent::decl(&cfg),
        event_names(),
        ConversationSummary::decl(&cfg),
        ToolCallView::decl(&cfg),
        PartView::decl(&cfg),
        ConversationView::decl(&cfg),
        TaskStatus::decl(&cfg),
        TaskInput::decl(&cfg),
        TaskView::decl(&cfg),
        TaskList::decl(&cfg),
        AccountStatus::decl(&cfg),
        ClientKind::decl(&cfg),
        AccountView::decl(&cfg),
        AccountList::decl(&cfg),
        ConnectStart::decl(&cfg),
        Disconnected::decl(&cfg),
        AdminAccountView::decl(&cfg),
        AdminAccountList::decl(&cfg),
    ]
}

/// The statuses a `tool_result` carries: the call statuses a call ends with by itself.
fn tool_result_status() -> String {
    let statuses: Vec<String> = CallStatus::RESULTS
        .iter()
        .map(|status| format!("\"{status}\""))
        .collect();
    format!("type ToolResultStatus = {};", statuses.join(" | "))
}

/// The events' names as a value, for the UI to tell the stream's events from others.
fn event_names() -> String {
    let names: Vec<String> = ChatEvent::NAMES
        .iter()
        .map(|name| format!("\"{name}\""))
        .collect();
    format!(
        "const CHAT_EVENT_NAMES: readonly ChatEvent[\"type\"][] = [{}];",
        names.join(", ")
    )
}

fn file() -> String {
    let mut text = String::from(
        "// Generated from the gateway's Rust types by `MAITRED_WRITE_BINDINGS=1 cargo test bindings`\n\
         // (crates/gateway/src/bindings.rs). Do not edit: change the Rust types instead.\n",
    );
    for declaration in declarations() {
        text.push_str("\nexport ");
        text.push_str(declaration.trim());
        text.push('\n');
    }
    text
}

#[test]
fn bindings_for_the_web_ui_are_what_the_rust_types_say() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PATH);
    let expected = file();
    if std::env::var("MAITRED_WRITE_BINDINGS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "{PATH} is out of date with the Rust types: run `MAITRED_WRITE_BINDINGS=1 cargo test bindings`"
    );
}
