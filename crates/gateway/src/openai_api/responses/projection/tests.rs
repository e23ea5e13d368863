use std::sync::Arc;

use serde_json::json;

use super::*;
use maitred_protocol::events::{
    ApprovalRequiredEvent, BudgetEvent, DoneEvent, MetaEvent, TokenEvent, ToolCallEvent,
    ToolProgressEvent, ToolResultEvent, UsageEvent,
};

fn head() -> Head {
    Head {
        message: MessageId::new(),
        conversation: ConversationId::new(),
        created_at: 1_795_539_552,
        model: "maitred".into(),
        instructions: None,
        metadata: Map::new(),
        previous: None,
        background: false,
        store: true,
        decided: Vec::new(),
    }
}

fn logged(events: Vec<ChatEvent>) -> Vec<LoggedEvent> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| LoggedEvent::new(i as u64 + 1, e))
        .collect()
}

fn meta(head: &Head) -> ChatEvent {
    ChatEvent::Meta(MetaEvent {
        conversation_id: head.conversation.clone(),
        message_id: head.message.clone(),
        model: "scripted".into(),
        fallback_from: None,
    })
}

fn token(text: &str) -> ChatEvent {
    ChatEvent::Token(TokenEvent { text: text.into() })
}

fn call(id: &ToolCallId, tool: &str) -> ChatEvent {
    ChatEvent::ToolCall(ToolCallEvent {
        id: id.clone(),
        server: "resos".into(),
        tool: tool.into(),
        title: tool.into(),
        arguments: json!({"limit": 1}),
        acting_as: None,
    })
}

fn result(id: &ToolCallId, status: CallStatus, summary: &str) -> ChatEvent {
    ChatEvent::ToolResult(ToolResultEvent {
        id: id.clone(),
        status,
        duration_ms: 3,
        summary: summary.into(),
    })
}

fn done(finish: Finish) -> ChatEvent {
    ChatEvent::Done(DoneEvent {
        finish_reason: finish,
    })
}

/// Every projected event as JSON, in order.
fn project(head: Head, events: &[LoggedEvent]) -> (Vec<Value>, Projection) {
    let mut projection = Projection::new(head);
    let out = events
        .iter()
        .flat_map(|e| projection.event(e))
        .map(|n| serde_json::to_value(n).unwrap())
        .collect();
    (out, projection)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn an_answer_with_a_tool_call_is_an_mcp_call_then_a_message() {
    let head = head();
    let read = ToolCallId::new();
    let events = logged(vec![
        meta(&head),
        call(&read, "getTables"),
        result(&read, CallStatus::Ok, "20 tables"),
        token("There are "),
        token("20 tables."),
        ChatEvent::Usage(UsageEvent {
            prompt_tokens: 30,
            completion_tokens: 8,
            total_tokens: 38,
        }),
        done(Finish::Stop),
    ]);
    let (out, projection) = project(head.clone(), &events);
    assert_eq!(
        types(&out),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.mcp_call.in_progress",
            "response.mcp_call_arguments.delta",
            "response.mcp_call_arguments.done",
            "response.mcp_call.completed",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let numbers: Vec<u64> = out
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..out.len() as u64).collect::<Vec<_>>());
    assert_eq!(out[0]["response"]["status"], "in_progress");
    assert_eq!(out[0]["response"]["output"], json!([]));
    let call_item = &out[7]["item"];
    assert_eq!(call_item["type"], "mcp_call");
    assert_eq!(call_item["id"], ids::call_item(&read));
    assert_eq!(call_item["server_label"], "resos");
    assert_eq!(call_item["name"], "getTables");
    assert_eq!(call_item["arguments"], r#"{"limit":1}"#);
    assert_eq!(call_item["output"], "20 tables");
    assert_eq!(call_item["status"], "completed");
    assert_eq!(out[12]["text"], "There are 20 tables.");
    let response = &out.last().unwrap()["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(response["id"], ids::response(&head.message));
    assert_eq!(
        response["output"][1]["content"][0]["text"],
        "There are 20 tables."
    );
    assert_eq!(response["usage"]["input_tokens"], 30);
    assert_eq!(response["usage"]["output_tokens"], 8);
    assert_eq!(response["usage"]["total_tokens"], 38);
    assert_eq!(
        serde_json::to_value(projection.response()).unwrap(),
        *response
    );
}

#[test]
fn a_write_that_needs_approval_is_an_approval_request_and_no_call() {
    let head = head();
    let (read, write) = (ToolCallId::new(), ToolCallId::new());
    let events = logged(vec![
        meta(&head),
        token("Let me book it."),
        call(&read, "getTables"),
        call(&write, "createBooking"),
        ChatEvent::ApprovalRequired(ApprovalRequiredEvent {
            id: write.clone(),
            server: "resos".into(),
            tool: "createBooking".into(),
            title: "Book".into(),
            arguments: json!({"people": 2}),
            expires_at: "2026-11-24T12:05:00Z".into(),
        }),
        ChatEvent::ToolProgress(ToolProgressEvent {
            id: read.clone(),
            progress: 0.5,
            total: None,
            message: None,
        }),
        result(&read, CallStatus::Ok, "20 tables"),
        done(Finish::Stop),
    ]);
    let (_, projection) = project(head, &events);
    let response = serde_json::to_value(projection.response()).unwrap();
    assert_eq!(response["status"], "completed");
    let output = response["output"].as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["message", "mcp_approval_request", "mcp_call"]);
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[1]["id"], ids::approval_item(&write));
    assert_eq!(output[1]["name"], "createBooking");
    assert_eq!(output[1]["arguments"], r#"{"people":2}"#);
    assert_eq!(output[2]["name"], "getTables");
}

#[test]
fn a_call_run_after_its_approval_names_the_request_and_a_refused_one_fails() {
    let mut head = head();
    let (approved, denied) = (ToolCallId::new(), ToolCallId::new());
    head.decided = vec![approved.clone(), denied.clone()];
    let events = logged(vec![
        meta(&head),
        call(&approved, "createBooking"),
        call(&denied, "cancelBooking"),
        result(&approved, CallStatus::Ok, "booked"),
        result(&denied, CallStatus::Denied, "denied by the user"),
        done(Finish::Stop),
    ]);
    let (_, projection) = project(head, &events);
    let response = serde_json::to_value(projection.response()).unwrap();
    let output = &response["output"];
    assert_eq!(
        output[0]["approval_request_id"],
        ids::approval_item(&approved)
    );
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[1]["status"], "failed");
    assert_eq!(output[1]["output"], Value::Null);
    assert_eq!(
        output[1]["error"],
        json!({"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "denied by the user"}]})
    );
}

#[test]
fn how_an_answer_ends_is_the_response_status_and_its_last_event() {
    let cases = [
        (vec![done(Finish::Stop)], "completed", "response.completed"),
        (
            vec![token("Stopped."), done(Finish::MaxIterations)],
            "incomplete",
            "response.incomplete",
        ),
        (
            vec![token("Half"), done(Finish::Cancelled)],
            "cancelled",
            "response.incomplete",
        ),
        (
            vec![
                ChatEvent::Error(ErrorEvent {
                    code: "model_unreachable".into(),
                    message: "The connection broke off.".into(),
                }),
                done(Finish::Error),
            ],
            "failed",
            "response.failed",
        ),
    ];
    for (tail, status, last) in cases {
        let head = head();
        let mut all = vec![meta(&head)];
        all.extend(tail);
        let (out, projection) = project(head, &logged(all));
        assert_eq!(serde_json::to_value(projection.status()).unwrap(), status);
        assert_eq!(types(&out).last().copied(), Some(last), "{status}");
        assert_eq!(out.last().unwrap()["response"]["status"], status);
    }
}

#[test]
fn a_spent_budget_is_a_rate_limit_with_its_window() {
    let head = head();
    let events = logged(vec![
        meta(&head),
        ChatEvent::Budget(BudgetEvent {
            scope: "person".into(),
            window: "daily".into(),
            remaining_tokens: Some(0),
            remaining_cost: None,
        }),
        ChatEvent::Error(ErrorEvent {
            code: "budget".into(),
            message: "Your budget for today is spent.".into(),
        }),
        done(Finish::Error),
    ]);
    let projection = Projection::of(head, &events);
    assert_eq!(
        projection.budget_refusal(),
        Some(("Your budget for today is spent.", Some("daily")))
    );
    let error = serde_json::to_value(projection.response().error).unwrap();
    assert_eq!(error["code"], "rate_limit_exceeded");
    assert_eq!(error["type"], "budget");
}

#[test]
fn events_it_does_not_know_are_skipped_and_numbering_goes_on() {
    let head = head();
    let mut events = logged(vec![meta(&head), token("Hi"), done(Finish::Stop)]);
    events.insert(
        2,
        LoggedEvent {
            seq: 3,
            name: Arc::from("grounding"),
            data: Arc::from(r#"{"claims":[]}"#),
        },
    );
    let (out, _) = project(head, &events);
    assert_eq!(types(&out).len(), 9);
    let numbers: Vec<u64> = out
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..9).collect::<Vec<_>>());
}

#[test]
fn a_replay_numbers_every_event_as_the_live_stream_did() {
    let head = head();
    let read = ToolCallId::new();
    let events = logged(vec![
        meta(&head),
        call(&read, "getTables"),
        result(&read, CallStatus::Ok, "20 tables"),
        token("Twenty."),
        done(Finish::Stop),
    ]);
    let (live, _) = project(head.clone(), &events);
    // Seen up to the middle, then projected again from the first event elsewhere.
    let (replayed, _) = project(head, &events);
    let after = 6;
    let rest: Vec<&Value> = replayed
        .iter()
        .filter(|e| e["sequence_number"].as_u64().unwrap() > after)
        .collect();
    assert_eq!(rest.len(), live.len() - 7);
    assert_eq!(*rest[0], live[7]);
}
