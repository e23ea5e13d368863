//! What a small local model needs from the gateway, per model: tool definitions that
//! fit its prompt, a tool call asked for on the first turn, and a longer wait for its
//! first token. Played by the scripted upstream, which records every request.

use std::time::Duration;

use maitred::settings::ModelProfile;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};

use crate::helpers::{Database, Llm, TestApp, answer, of};

/// Characters of the `tools` a request carried, as sent.
fn tools_size(body: &serde_json::Value) -> usize {
    body["tools"].to_string().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_gets_compact_tools_and_must_look_first() {
    let script = || {
        Script::new([
            Turn::tool_calls([ToolCallSpec::new("c1", "resos__getTables", "{}".to_owned())]),
            Turn::text("There are 20 tables."),
        ])
    };
    // The same question to a hosted model and to a small one.
    let hosted = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script()), |_| {}).await;
    let small = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script()), |s| {
        if let Some(llm) = &mut s.gateway.llm {
            llm.profile = ModelProfile {
                small: true,
                require_tool_call: true,
                ..ModelProfile::default()
            };
        }
    })
    .await;
    let mut sent = Vec::new();
    for app in [&hosted, &small] {
        let token = app.chat_token().await;
        let events = app.ask(&token, "How many tables?", None).await.rest().await;
        assert_eq!(answer(&events), "There are 20 tables.");
        assert_eq!(of(&events, "tool_result")[0]["status"], "ok");
        sent.push(app.llm.as_ref().unwrap().requests());
    }
    let (hosted_requests, small_requests) = (&sent[0], &sent[1]);

    // Every tool is offered to both, the small model's within its budget: 2,000
    // estimated tokens, 3 characters each.
    let names = |body: &serde_json::Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&small_requests[0].body),
        names(&hosted_requests[0].body)
    );
    assert_eq!(names(&small_requests[0].body).len(), 16);
    let (full, compact) = (
        tools_size(&hosted_requests[0].body),
        tools_size(&small_requests[0].body),
    );
    assert!(compact <= 2_000 * 3, "{compact} characters of tools");
    assert!(compact * 3 < full, "{compact} of {full}");

    // The small model must call a tool on the question's first turn, and only there.
    assert_eq!(hosted_requests[0].body["tool_choice"], "auto");
    assert_eq!(small_requests[0].body["tool_choice"], "required");
    assert_eq!(small_requests[1].body["tool_choice"], "auto");
    hosted.stop().await;
    small.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_model_is_given_its_own_first_token_wait() {
    let slow =
        || Script::new([Turn::text("At last.").first_token_delay(Duration::from_millis(600))]);
    let ask = |profile_wait: Option<Duration>| async move {
        let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(slow()), |s| {
            s.gateway.file.resilience.first_token_timeout = Duration::from_millis(200);
            s.gateway.file.resilience.retries = 0;
            if let Some(llm) = &mut s.gateway.llm {
                llm.profile.first_token_timeout = profile_wait;
            }
        })
        .await;
        let token = app.chat_token().await;
        let events = app.ask(&token, "Hello?", None).await.rest().await;
        app.stop().await;
        events
    };
    // The gateway's default wait is too short for it...
    let timed_out = Box::pin(ask(None)).await;
    assert_eq!(
        of(&timed_out, "error")[0]["code"],
        "model_timeout",
        "{timed_out:?}"
    );
    // ...its own is not.
    let answered = Box::pin(ask(Some(Duration::from_secs(5)))).await;
    assert_eq!(answer(&answered), "At last.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_marked_for_warm_up_reads_the_common_prompt_at_start() {
    let script = Script::new([
        Turn::text("."),
        Turn::tool_calls([ToolCallSpec::new("c1", "resos__getTables", "{}".to_owned())]),
        Turn::text("There are 20 tables."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        if let Some(llm) = &mut s.gateway.llm {
            llm.profile = ModelProfile {
                warm_up: true,
                ..ModelProfile::default()
            };
        }
    })
    .await;
    let llm = app.llm.as_ref().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while llm.requests().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Before anyone asked: the system prompt and the tools, for one token, whole.
    let warm = llm.requests()[0].body.clone();
    assert_eq!(warm["max_tokens"], 1, "{warm}");
    assert_eq!(warm["stream"], false, "{warm}");
    assert_eq!(warm["tool_choice"], "auto", "{warm}");
    assert_eq!(warm["tools"].as_array().unwrap().len(), 16, "{warm}");
    let token = app.chat_token().await;
    let events = app.ask(&token, "How many tables?", None).await.rest().await;
    assert_eq!(answer(&events), "There are 20 tables.");
    // The question's first request begins as the warm-up did: the same system prompt
    // and the same tools, so the server reads only the question.
    let asked = llm.requests()[1].body.clone();
    assert_eq!(asked["messages"][0], warm["messages"][0]);
    assert_eq!(asked["tools"], warm["tools"]);
    // Each request's prompt size, by part, in the metrics.
    let metrics = app
        .http
        .get(format!("{}/metrics", app.gateway_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for part in ["system", "user", "tool", "tools", "total"] {
        let count = format!(
            "maitred_gateway_prompt_tokens_estimated_count{{model=\"scripted\",part=\"{part}\"}} 2"
        );
        assert!(metrics.contains(&count), "{count} in {metrics}");
    }
    app.stop().await;
}
