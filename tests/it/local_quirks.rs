//! Local model servers as they really behave, replayed by the scripted upstream:
//! llama-cpp-python's HTTP 500 on an assistant message without `content` and on
//! `tool_choice: "required"`, its stream (the call's id and name repeated in every
//! delta, the deprecated `function_call` beside `tool_calls`, no usage), and every
//! way a small model writes a call as text, on a question's first turn and on a later
//! one. In each case the answer completes and no call text reaches the person.

use maitred::llm::text_calls::ToolCallMode;
use maitred::settings::ModelProfile;
use maitred_scripted_llm::{Script, Server, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer, of};

const FINAL: &str = "There are 20 tables.";

async fn ask_with(
    script: Script,
    mode: ToolCallMode,
    profile: ModelProfile,
    max_iterations: Option<u32>,
) -> (TestApp, Vec<SseEvent>) {
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        if let Some(iterations) = max_iterations {
            s.gateway.max_iterations = iterations;
        }
        if let Some(llm) = &mut s.gateway.llm {
            llm.tool_calls = mode;
            llm.profile = profile;
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

async fn ask(turns: Vec<Turn>, mode: ToolCallMode) -> (TestApp, Vec<SseEvent>) {
    let script = Script::new(turns).like(Server::LlamaCppPython);
    ask_with(script, mode, ModelProfile::default(), None).await
}

/// A model marked small, with native tool calls.
async fn ask_small(script: Script) -> (TestApp, Vec<SseEvent>) {
    let small = ModelProfile {
        small: true,
        ..ModelProfile::default()
    };
    ask_with(script, ToolCallMode::Native, small, None).await
}

fn tools_called(events: &[SseEvent]) -> Vec<String> {
    of(events, "tool_call")
        .iter()
        .map(|c| c["tool"].as_str().unwrap().to_owned())
        .collect()
}

fn statuses(events: &[SseEvent]) -> Vec<String> {
    of(events, "tool_result")
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_owned())
        .collect()
}

/// The answer finished normally and the person saw exactly `shown`.
fn completed_showing(events: &[SseEvent], shown: &str) {
    assert!(of(events, "error").is_empty(), "{events:?}");
    assert_eq!(answer(events), shown, "{events:?}");
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
}

/// `text` streamed a few characters at a time, as a real model would.
fn streamed(text: &str) -> Turn {
    let fragments: Vec<String> = text
        .chars()
        .collect::<Vec<_>>()
        .chunks(5)
        .map(|c| c.iter().collect())
        .collect();
    Turn::text_fragments(fragments)
}

fn messages(app: &TestApp, request: usize) -> Vec<Value> {
    app.llm.as_ref().unwrap().requests()[request].body["messages"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_python_takes_the_turn_that_carries_a_tool_result() {
    let (app, events) = ask(
        vec![
            Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
            Turn::text(FINAL),
        ],
        ToolCallMode::Auto,
    )
    .await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok"]);
    let llm = app.llm.as_ref().unwrap();
    // Its handler cannot stream a turn that chooses a tool: the stream ends before its
    // first chunk, and the same request is asked whole; the turn after the result
    // streams.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "the call's turn asked again, whole");
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[1].body["stream"], false);
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    assert_eq!(requests[2].body["stream"], true);
    let sent = messages(&app, 2);
    let call = sent.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["content"], "", "{call}");
    let result = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["name"], "resos__getTables", "{result}");

    // The same request without `content` is what the server answers 500 to (whole;
    // streamed, it fails after its headers).
    let mut body = llm.requests()[2].body.clone();
    body["stream"] = false.into();
    for message in body["messages"].as_array_mut().unwrap() {
        if message["role"] == "assistant" {
            message.as_object_mut().unwrap().remove("content");
        }
    }
    let refused = app
        .http
        .post(format!("{}/chat/completions", llm.base_url()))
        .bearer_auth("test-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 500);
    assert_eq!(
        refused.text().await.unwrap(),
        r#"{"error":{"message":"'dict object' has no attribute 'content'","type":"internal_server_error","param":null,"code":null}}"#
    );
    app.stop().await;
}

/// One chunk of llama-cpp-python's stream of a call, as its server writes it
/// (Python's `json.dumps`, keys in its order).
fn llama_chunk(delta: &str, finish: &str) -> String {
    format!(
        r#"{{"id": "chatcmpl-5d1c", "object": "chat.completion.chunk", "created": 1764120000, "model": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "choices": [{{"index": 0, "finish_reason": {finish}, "logprobs": null, "delta": {delta}}}]}}"#
    )
}

/// llama-cpp-python's stream of one call (`chatml-function-calling`): a blank first
/// delta, then each generated piece twice over, as `function_call` and as the one
/// entry of `tool_calls` with its id and name again; no usage.
fn llama_cpp_python_call(name: &str, pieces: &[&str]) -> Turn {
    let mut lines = vec![llama_chunk(
        r#"{"role": "assistant", "content": null, "function_call": null, "tool_calls": null}"#,
        "null",
    )];
    for piece in pieces {
        let piece = serde_json::to_string(piece).unwrap();
        lines.push(llama_chunk(
            &format!(
                r#"{{"role": null, "content": null, "function_call": {{"name": "{name}", "arguments": {piece}}}, "tool_calls": [{{"index": 0, "id": "call__0_{name}_cmpl-5d1c", "type": "function", "function": {{"name": "{name}", "arguments": {piece}}}}}]}}"#
            ),
            "null",
        ));
    }
    lines.push(llama_chunk(
        r#"{"role": null, "content": null, "function_call": null, "tool_calls": null}"#,
        r#""tool_calls""#,
    ));
    lines.push("[DONE]".to_owned());
    Turn::raw(lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_pythons_stream_of_a_call_runs_it_once() {
    let (app, events) = ask(
        vec![
            llama_cpp_python_call("resos__getTables", &["{\"", "limit", "\":", " ", "1", "}"]),
            Turn::text(FINAL),
        ],
        ToolCallMode::Auto,
    )
    .await;
    completed_showing(&events, FINAL);
    assert_eq!(tools_called(&events), ["getTables"]);
    assert_eq!(statuses(&events), ["ok"]);
    let calls = of(&events, "tool_call");
    assert_eq!(calls[0]["arguments"], json!({ "limit": 1 }), "read once");
    let sent = messages(&app, 1);
    let call = sent.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["content"], "");
    assert_eq!(
        call["tool_calls"][0]["id"],
        "call__0_resos__getTables_cmpl-5d1c"
    );
    assert_eq!(
        call["tool_calls"][0]["function"],
        json!({ "name": "resos__getTables", "arguments": "{\"limit\": 1}" })
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_ids_and_names_in_every_delta_make_one_call_each() {
    let (app, events) = ask(
        vec![
            Turn::tool_calls([
                ToolCallSpec::new("call_a", "resos__getTables", r#"{"limit":1}"#),
                ToolCallSpec::new("call_b", "resos__getCustomers", r#"{"limit":1}"#),
            ])
            .repeat_ids()
            .argument_pieces(4),
            Turn::text(FINAL),
        ],
        ToolCallMode::Auto,
    )
    .await;
    completed_showing(&events, FINAL);
    assert_eq!(tools_called(&events), ["getTables", "getCustomers"]);
    assert_eq!(statuses(&events), ["ok", "ok"]);
    app.stop().await;
}

/// What a request asked for: `(streamed, tool_choice)`.
fn shape_of(request: &Value) -> (bool, String) {
    (
        request["stream"] == true,
        request["tool_choice"].as_str().unwrap_or("none").to_owned(),
    )
}

/// No request was sent twice in the same shape: any two with the same messages
/// differ in being streamed or in their tool choice (or tools).
fn nothing_repeated(requests: &[maitred_scripted_llm::RecordedRequest]) {
    for (i, a) in requests.iter().enumerate() {
        for b in &requests[i + 1..] {
            assert!(
                a.body["messages"] != b.body["messages"]
                    || shape_of(&a.body) != shape_of(&b.body)
                    || a.body.get("tools") != b.body.get("tools"),
                "sent twice in the same shape: {}",
                b.body
            );
        }
    }
}

/// The README's settings for a small local model.
fn small_looking_first() -> ModelProfile {
    ModelProfile {
        small: true,
        require_tool_call: true,
        ..ModelProfile::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_python_failing_its_streams_loses_no_answer_and_is_not_asked_twice() {
    // The server as a fresh setup installs it (uvicorn 0.54, sse-starlette 3.7): a
    // streamed request it fails (a required call; a turn in which the model picks a
    // tool) ends after its headers, and its connection closes a moment later. The
    // whole answer asked for at once on that connection was lost: "connection closed
    // before message completed", "Connection reset by peer".
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
        Turn::tool_calls([ToolCallSpec::new("call_2", "resos__getCustomers", "{}")]),
        Turn::text(FINAL),
        Turn::tool_calls([ToolCallSpec::new("call_3", "resos__getTables", "{}")]),
        Turn::text("Still 20."),
    ])
    .like(Server::LlamaCppPython);
    let (app, events) = ask_with(script, ToolCallMode::Native, small_looking_first(), None).await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok", "ok"]);
    let requests = app.llm.as_ref().unwrap().requests();
    let shapes: Vec<(bool, String)> = requests.iter().map(|r| shape_of(&r.body)).collect();
    let (streamed, whole) = (true, false);
    assert_eq!(
        shapes,
        [
            // The required call fails the stream: the whole answer is asked with
            // "auto", never "required" again.
            (streamed, "required".to_owned()),
            (whole, "auto".to_owned()),
            // The model picks a tool: the stream fails, the whole answer is asked.
            (streamed, "auto".to_owned()),
            (whole, "auto".to_owned()),
            (streamed, "auto".to_owned()),
        ]
    );
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    assert_eq!(requests[3].body["messages"], requests[2].body["messages"]);
    nothing_repeated(&requests);

    // Remembered: the next question is not asked for a required call.
    let token = app.chat_token().await;
    let events = app.ask(&token, "And now?", None).await.rest().await;
    completed_showing(&events, "Still 20.");
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 8, "{requests:?}");
    for later in &requests[5..] {
        assert_eq!(later.body["tool_choice"], "auto", "{}", later.body);
    }
    nothing_repeated(&requests);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_by_a_server_that_answers_others_is_asked_in_the_next_shape() {
    // The connection closes without an answer to the required call, while the server
    // answers its list of models: that is the server failing on the request, not a
    // server away. Asked with "auto", once, and so from then on.
    let script = Script::new([
        Turn::text("never said").hang_up(),
        Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
        Turn::text(FINAL),
        Turn::tool_calls([ToolCallSpec::new("call_2", "resos__getTables", "{}")]),
        Turn::text("Still 20."),
    ]);
    let (app, events) = ask_with(script, ToolCallMode::Native, small_looking_first(), None).await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok"]);
    let token = app.chat_token().await;
    let events = app.ask(&token, "And now?", None).await.rest().await;
    completed_showing(&events, "Still 20.");
    let requests = app.llm.as_ref().unwrap().requests();
    let choices: Vec<&str> = requests
        .iter()
        .map(|r| r.body["tool_choice"].as_str().unwrap())
        .collect();
    assert_eq!(choices, ["required", "auto", "auto", "auto", "auto"]);
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    nothing_repeated(&requests);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_500_to_a_required_call_a_dropped_whole_answer_request_takes_the_tools_in_the_prompt()
 {
    // A 500 to the required call teaches "auto"; later a stream ends before its first
    // chunk and the whole answer's request is dropped, on a connection of its own:
    // in auto mode the tools then go in the prompt, and the answer completes.
    let call = r#"<tool_call>{"name": "resos__getCustomers", "arguments": {}}</tool_call>"#;
    let script = Script::new([
        Turn::status(500).message("AssertionError"),
        Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
        Turn::raw(Vec::<String>::new()),
        Turn::text("never said").hang_up(),
        Turn::text(call),
        Turn::text(FINAL),
    ]);
    let profile = ModelProfile {
        require_tool_call: true,
        ..ModelProfile::default()
    };
    let (app, events) = ask_with(script, ToolCallMode::Auto, profile, None).await;
    completed_showing(&events, FINAL);
    assert_eq!(tools_called(&events), ["getTables", "getCustomers"]);
    assert_eq!(statuses(&events), ["ok", "ok"]);
    let requests = app.llm.as_ref().unwrap().requests();
    let shapes: Vec<(bool, String, bool)> = requests
        .iter()
        .map(|r| {
            let (streamed, choice) = shape_of(&r.body);
            (streamed, choice, r.body.get("tools").is_some())
        })
        .collect();
    let (streamed, whole) = (true, false);
    assert_eq!(
        shapes,
        [
            (streamed, "required".to_owned(), true),
            (streamed, "auto".to_owned(), true),
            (streamed, "auto".to_owned(), true),
            (whole, "auto".to_owned(), true),
            (whole, "none".to_owned(), false),
            (streamed, "none".to_owned(), false),
        ]
    );
    nothing_repeated(&requests);
    app.stop().await;
}

/// Each way a small model writes a call as text: `(name, arguments)` to the text.
type Dialect = fn(&str, &str) -> String;

fn dialects() -> Vec<(&'static str, Dialect, bool)> {
    fn bare(name: &str, arguments: &str) -> String {
        format!(r#"{{"name": "{name}", "arguments": {arguments}}}"#)
    }
    vec![
        ("bare JSON", bare, true),
        (
            "arguments as a JSON string",
            |name, arguments| {
                let arguments = serde_json::to_string(arguments).unwrap();
                format!(r#"{{"name": "{name}", "arguments": {arguments}}}"#)
            },
            true,
        ),
        (
            "fenced JSON",
            |name, arguments| format!("```json\n{}\n```", bare(name, arguments)),
            true,
        ),
        (
            "a list",
            |name, arguments| format!("[{}]", bare(name, arguments)),
            true,
        ),
        (
            "<tool_call> tags",
            |name, arguments| format!("<tool_call>\n{}\n</tool_call>", bare(name, arguments)),
            true,
        ),
        (
            "functions.NAME: and arguments",
            |name, arguments| format!("functions.{name}:\n{arguments}"),
            true,
        ),
        (
            "functions.NAME: alone",
            |name, _| format!("functions.{name}:"),
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_text_dialect_runs_on_the_first_turn_and_a_later_one_and_is_never_shown() {
    for mode in [ToolCallMode::Auto, ToolCallMode::Text] {
        for (dialect, write, with_arguments) in dialects() {
            let arguments = if with_arguments {
                r#"{"limit": 1}"#
            } else {
                "{}"
            };
            let (app, events) = Box::pin(ask(
                vec![
                    streamed(&write("resos__getTables", arguments)),
                    streamed(&write("resos__getCustomers", arguments)),
                    Turn::text(FINAL),
                ],
                mode,
            ))
            .await;
            let context = format!("{dialect} in {mode:?} mode: {events:?}");
            assert_eq!(
                tools_called(&events),
                ["getTables", "getCustomers"],
                "{context}"
            );
            assert_eq!(statuses(&events), ["ok", "ok"], "{context}");
            let expected: Value = serde_json::from_str(arguments).unwrap();
            for call in of(&events, "tool_call") {
                assert_eq!(call["arguments"], expected, "{context}");
            }
            completed_showing(&events, FINAL);
            app.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_naming_a_tool_that_is_not_offered_is_shown() {
    let not_offered = r#"{"name": "resos__dropTables", "arguments": {}}"#;
    // On the first turn, and after a tool result.
    for turns in [
        vec![streamed(not_offered)],
        vec![
            streamed(r#"{"name": "resos__getTables", "arguments": {}}"#),
            streamed(not_offered),
        ],
    ] {
        let calls = turns.len() - 1;
        let (app, events) = ask(turns, ToolCallMode::Auto).await;
        assert_eq!(of(&events, "tool_call").len(), calls, "{events:?}");
        completed_showing(&events, not_offered);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_call_arguments_that_fail_the_schema_go_back_to_the_model() {
    let bad = r#"{"name": "resos__getCustomers", "arguments": {"limit": "ten"}}"#;
    let good = r#"{"name": "resos__getCustomers", "arguments": {"limit": 10}}"#;
    let (app, events) = ask(
        vec![streamed(bad), streamed(good), Turn::text(FINAL)],
        ToolCallMode::Auto,
    )
    .await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["error", "ok"]);
    let told = messages(&app, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .contains("do not fit its input schema"),
        "{told}"
    );
    app.stop().await;

    // A model that never gets them right is stopped by the turn limit.
    let script = Script::repeat(streamed(bad)).like(Server::LlamaCppPython);
    let (app, events) =
        ask_with(script, ToolCallMode::Auto, ModelProfile::default(), Some(3)).await;
    assert_eq!(statuses(&events), ["error", "error", "error"]);
    assert_eq!(
        events.last().unwrap().data["finish_reason"],
        "max_iterations"
    );
    assert!(
        !answer(&events).contains("resos__getCustomers"),
        "{events:?}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_words_then_a_tagged_call_show_only_the_words() {
    let call = "<tool_call>\n{\"name\": \"resos__getTables\", \"arguments\": {}}\n</tool_call>";
    let (app, events) = ask(
        vec![
            streamed(&format!("Let me look.\n{call}")),
            Turn::text(FINAL),
        ],
        ToolCallMode::Auto,
    )
    .await;
    assert_eq!(tools_called(&events), ["getTables"]);
    assert_eq!(statuses(&events), ["ok"]);
    completed_showing(&events, &format!("Let me look.\n{FINAL}"));
    let sent = messages(&app, 1);
    let said = sent.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(said["content"], "Let me look.\n", "{said}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_mode_reads_the_calls_a_servers_grammar_writes_as_text() {
    // llama-cpp-python's `chatml-function-calling` with `tool_choice: "auto"` hands
    // its grammar's `functions.NAME:` back as content, even when sent the tools.
    for (dialect, write, _) in dialects() {
        let (app, events) = Box::pin(ask(
            vec![
                streamed(&write("resos__getTables", "{}")),
                Turn::text(FINAL),
            ],
            ToolCallMode::Native,
        ))
        .await;
        let context = format!("{dialect}: {events:?}");
        assert_eq!(tools_called(&events), ["getTables"], "{context}");
        assert_eq!(statuses(&events), ["ok"], "{context}");
        completed_showing(&events, FINAL);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_that_repeats_its_call_is_asked_to_answer_without_tools() {
    let again = || {
        Turn::tool_calls([ToolCallSpec::new(
            "call_1",
            "resos__getTables",
            r#"{"limit": 1}"#,
        )])
    };
    let script = Script::new([again(), again(), Turn::text(FINAL)]).like(Server::LlamaCppPython);
    let (app, events) = ask_small(script).await;
    completed_showing(&events, FINAL);
    // The repeat is shown, and refused: the backend is asked once.
    assert_eq!(tools_called(&events), ["getTables", "getTables"]);
    assert_eq!(statuses(&events), ["ok", "denied"]);
    let requests = app.llm.as_ref().unwrap().requests();
    let last = &requests.last().unwrap().body;
    assert!(
        last.get("tools").is_none(),
        "the answer's turn offers no tools: {last}"
    );
    // It is asked as a plain question with the result in it: no call to copy.
    let sent = last["messages"].as_array().unwrap();
    assert!(
        sent.iter()
            .all(|m| m["role"] == "system" || m["role"] == "user"),
        "{last}"
    );
    let asked = sent.last().unwrap()["content"].as_str().unwrap();
    assert!(asked.starts_with("How many tables are there?"), "{asked}");
    assert!(
        asked.contains(r#"getTables({"limit": 1}) returned:"#),
        "{asked}"
    );
    assert!(!asked.contains("resos__"), "named as the tool: {asked}");
    assert!(asked.contains("\"total\""), "the result is in it: {asked}");
    app.stop().await;

    // Asked so, it writes the call again: not shown; the person is told.
    let written = "functions.resos__getTables:\n{\"limit\": 1}";
    let script = Script::new([again(), again(), streamed(written)]).like(Server::LlamaCppPython);
    let (app, events) = ask_small(script).await;
    let shown = answer(&events);
    assert!(!shown.contains("functions."), "{shown}");
    assert!(shown.contains("did not write an answer"), "{shown}");
    assert_eq!(statuses(&events), ["ok", "denied", "denied"]);
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    app.stop().await;

    // A model not marked small keeps every call it makes.
    let script = Script::new([again(), again(), Turn::text(FINAL)]);
    let (app, events) = ask_with(script, ToolCallMode::Native, ModelProfile::default(), None).await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok", "ok"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_tool_support_gets_the_tools_in_its_prompt_in_auto_mode() {
    // Ollama's answer to tools for a model whose template has none, byte for byte.
    let refusal = "registry.ollama.ai/library/gemma:2b does not support tools";
    let script = Script::new([
        Turn::status(400).message(refusal),
        streamed(r#"<tool_call>{"name": "resos__getTables", "arguments": {}}</tool_call>"#),
        Turn::text(FINAL),
        Turn::text("Still 20."),
    ]);
    let (app, events) = ask_with(script, ToolCallMode::Auto, ModelProfile::default(), None).await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok"]);
    let requests = app.llm.as_ref().unwrap().requests();
    assert!(requests[0].body.get("tools").is_some());
    for later in &requests[1..] {
        assert!(later.body.get("tools").is_none(), "{}", later.body);
        let system = later.body["messages"][0]["content"].as_str().unwrap();
        assert!(system.contains(r#""name":"resos__getTables""#), "{system}");
    }
    // Remembered: the next question goes in the same shape at once.
    let token = app.chat_token().await;
    let events = app.ask(&token, "And now?", None).await.rest().await;
    completed_showing(&events, "Still 20.");
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 4, "not refused again");
    assert!(requests[3].body.get("tools").is_none());

    // In native mode the refusal is the person's error: nothing is guessed.
    let script = Script::new([Turn::status(400).message(refusal)]);
    let (app2, events) =
        ask_with(script, ToolCallMode::Native, ModelProfile::default(), None).await;
    assert_eq!(of(&events, "error").len(), 1, "{events:?}");
    assert_eq!(
        app2.llm.as_ref().unwrap().requests().len(),
        2,
        "asked again once, plain"
    );
    app2.stop().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_must_look_first_and_answers_from_memory_is_asked_again_not_shown() {
    let look_first = ModelProfile {
        require_tool_call: true,
        ..ModelProfile::default()
    };
    let invented = "There are 12 tables.";
    let call = r#"<tool_call>{"name": "resos__getTables", "arguments": {}}</tool_call>"#;
    // Text mode: nothing in the request can require a call.
    let script = Script::new([streamed(invented), streamed(call), Turn::text(FINAL)]);
    let (app, events) = ask_with(script, ToolCallMode::Text, look_first.clone(), None).await;
    completed_showing(&events, FINAL);
    assert_eq!(tools_called(&events), ["getTables"]);
    let told = messages(&app, 1);
    let last = told.last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("First call the tool"),
        "{last}"
    );
    // What the person is told later does not carry the nudge: the stored turn is the call.
    let after = messages(&app, 2);
    assert!(
        !after.iter().any(|m| m["content"]
            .as_str()
            .is_some_and(|c| c.contains("First call the tool"))),
        "{after:?}"
    );
    app.stop().await;

    // Asked again, the model still answers: that answer is shown, once.
    let script = Script::new([streamed(invented), streamed("I cannot look that up.")]);
    let (app, events) = ask_with(script, ToolCallMode::Text, look_first.clone(), None).await;
    completed_showing(&events, "I cannot look that up.");
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 2);
    app.stop().await;

    // A server that takes "required" is trusted with it: nothing is held back.
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
        Turn::text(FINAL),
    ]);
    let (app, events) = ask_with(script, ToolCallMode::Native, look_first, None).await;
    completed_showing(&events, FINAL);
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_reads_long_results_cut_to_its_budget() {
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_1",
            "resos__getBookings",
            r#"{"limit": 100}"#,
        )]),
        Turn::text(FINAL),
    ]);
    let small = ModelProfile {
        small: true,
        result_budget: Some(400),
        ..ModelProfile::default()
    };
    let (app, events) = ask_with(script, ToolCallMode::Native, small, None).await;
    completed_showing(&events, FINAL);
    let result = messages(&app, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content = result["content"].as_str().unwrap();
    assert!(content.chars().count() <= 1_200, "{content}");
    assert!(content.contains("more not shown"), "{content}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_that_wanders_from_tool_to_tool_is_asked_to_answer_after_three_turns() {
    let call = |id: &str, tool: &str| Turn::tool_calls([ToolCallSpec::new(id, tool, "{}")]);
    let script = Script::new([
        call("call_1", "resos__getTables"),
        call("call_2", "resos__getOpeningHours"),
        call("call_3", "resos__getCustomers"),
        Turn::text(FINAL),
    ]);
    let (app, events) = ask_small(script).await;
    completed_showing(&events, FINAL);
    assert_eq!(statuses(&events), ["ok", "ok", "ok"]);
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 4);
    for turn in &requests[..3] {
        assert!(turn.body.get("tools").is_some());
    }
    let last = &requests[3].body;
    assert!(last.get("tools").is_none(), "{last}");
    let asked = last["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    for tool in ["getTables", "getOpeningHours", "getCustomers"] {
        assert!(
            asked.contains(&format!("{tool}({{}}) returned:")),
            "{asked}"
        );
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_that_says_nothing_after_the_results_is_asked_once_more() {
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("call_1", "resos__getTables", "{}")]),
        Turn::text(""),
        Turn::text(FINAL),
    ]);
    let (app, events) = ask_small(script).await;
    completed_showing(&events, FINAL);
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[2].body.get("tools").is_none(),
        "asked from the results"
    );
    app.stop().await;
}
