//! Models that do not speak tool calling the way OpenAI does, played by the scripted
//! upstream: small local models that write the call as text (bare JSON, a fenced
//! block, `<tool_call>` tags, `functions.NAME:`), Ollama's parallel calls all at index
//! 0, and a model served with no tool calling at all (`tool_calls = "text"`). In every
//! case the tool runs and none of the call's JSON reaches the person as answer text.

use maitred::llm::text_calls::ToolCallMode;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer, of};

async fn ask(turns: Vec<Turn>, mode: ToolCallMode) -> (TestApp, Vec<SseEvent>) {
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(Script::new(turns)), |s| {
        if let Some(llm) = &mut s.gateway.llm {
            llm.tool_calls = mode;
        }
    })
    .await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "How many tables are there?", None)
        .await
        .rest()
        .await;
    (app, events)
}

/// The call ran, its result went back to the model, and the person saw only the
/// final answer.
fn ran_and_hid(events: &[SseEvent], tools: &[&str]) {
    let calls: Vec<&str> = of(events, "tool_call")
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert_eq!(calls, tools, "{events:?}");
    for result in of(events, "tool_result") {
        assert_eq!(result["status"], "ok", "{result}");
    }
    let shown = answer(events);
    assert_eq!(
        shown, "There are 20 tables.",
        "no call text reached the person"
    );
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_written_as_text_run_and_are_never_shown() {
    for call in [
        r#"{"name": "resos__getTables", "arguments": {"limit": 1}}"#.to_owned(),
        "```json\n{\"name\": \"resos__getTables\", \"arguments\": {\"limit\": 1}}\n```".to_owned(),
        "<tool_call>\n{\"name\": \"resos__getTables\", \"arguments\": {\"limit\": 1}}\n</tool_call>"
            .to_owned(),
        "functions.resos__getTables:\n{\"limit\": 1}".to_owned(),
    ] {
        // Streamed a few characters at a time, as a real model would.
        let fragments: Vec<String> = call
            .chars()
            .collect::<Vec<_>>()
            .chunks(5)
            .map(|c| c.iter().collect())
            .collect();
        let (app, events) = ask(
            vec![
                Turn::text_fragments(fragments),
                Turn::text("There are 20 tables."),
            ],
            ToolCallMode::Auto,
        )
        .await;
        ran_and_hid(&events, &["getTables"]);
        // The second request carries the call and its result, natively.
        let second = &app.llm.as_ref().unwrap().requests()[1].body;
        let messages = second["messages"].as_array().unwrap();
        assert!(
            messages.iter().any(|m| m["role"] == "tool"),
            "{second}"
        );
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_only_looks_like_json_at_first_is_shown_whole() {
    let (app, events) = ask(
        vec![Turn::text_fragments(["{\"answer\": ", "\"not a tool\"}"])],
        ToolCallMode::Auto,
    )
    .await;
    assert!(of(&events, "tool_call").is_empty());
    assert_eq!(answer(&events), "{\"answer\": \"not a tool\"}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollamas_parallel_calls_at_one_index_are_separate_calls() {
    let (app, events) = ask(
        vec![
            Turn::tool_calls([
                ToolCallSpec::new("call_a", "resos__getTables", r#"{"limit":1}"#),
                ToolCallSpec::new("call_b", "resos__getCustomers", r#"{"limit":1}"#),
            ])
            .same_index(),
            Turn::text("There are 20 tables."),
        ],
        ToolCallMode::Auto,
    )
    .await;
    ran_and_hid(&events, &["getTables", "getCustomers"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_tool_calling_gets_the_tools_in_its_prompt() {
    let (app, events) = ask(
        vec![
            Turn::text("<tool_call>{\"name\": \"resos__getTables\", \"arguments\": {\"limit\": 1}}</tool_call>"),
            Turn::text("There are 20 tables."),
        ],
        ToolCallMode::Text,
    )
    .await;
    ran_and_hid(&events, &["getTables"]);
    let requests = app.llm.as_ref().unwrap().requests();
    let first = &requests[0].body;
    assert!(first.get("tools").is_none(), "no native tools: {first}");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("<tool_call>") && system.contains(r#""name":"resos__getTables""#),
        "{system}"
    );
    // The model's own call and the result come back to it as plain text.
    let second = requests[1].body["messages"].as_array().unwrap();
    assert!(second.iter().all(|m| m["role"] != "tool"), "{second:?}");
    assert!(
        second.iter().any(|m| m["role"] == "user"
            && m["content"]
                .as_str()
                .unwrap()
                .starts_with("Result of tool call")),
        "{second:?}"
    );
    app.stop().await;
}
