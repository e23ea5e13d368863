//! The LLM upstream misbehaving, over the wire (the scripted OpenAI-compatible
//! server): what is retried, what falls back, what ends the answer, and what the
//! person watching sees of it.

use std::time::Duration;

use maitred::settings::gateway_file::FallbackConfig;
use maitred_scripted_llm::{Script, Turn};
use serde_json::Value;

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer};

fn names(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

fn requested_models(app: &TestApp) -> Vec<String> {
    app.llm
        .as_ref()
        .unwrap()
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_before_the_first_token_is_retried_invisibly() {
    let script = Script::new([
        Turn::status(500),
        Turn::status(503),
        Turn::text_fragments(["Hello ", "again"]),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Hello?", None).await.rest().await;
    assert_eq!(names(&events), ["meta", "token", "token", "usage", "done"]);
    assert_eq!(answer(&events), "Hello again");
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    assert_eq!(requested_models(&app), ["scripted"; 3]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_with_retry_after_goes_to_the_fallback_model() {
    let script = Script::new([
        Turn::status(429).retry_after(30),
        Turn::text("The fallback answers."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        let primary = s.gateway.llm.clone().unwrap();
        s.gateway.file.fallbacks = vec![FallbackConfig {
            base_url: primary.base_url,
            model: "scripted-fallback".into(),
            api_key: Some("fallback-key".into()),
            api_key_env: None,
            tool_calls: Default::default(),
            profile: Default::default(),
        }];
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Anyone there?", None).await.rest().await;
    assert_eq!(&names(&events)[..2], ["meta", "meta"], "{events:?}");
    assert_eq!(events[0].data["model"], "scripted");
    assert_eq!(events[1].data["model"], "scripted-fallback");
    assert_eq!(events[1].data["fallback_from"], "scripted");
    assert_eq!(answer(&events), "The fallback answers.");
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    // Straight to the fallback: the primary was not asked again after its 429.
    assert_eq!(requested_models(&app), ["scripted", "scripted-fallback"]);
    let fallback = &app.llm.as_ref().unwrap().requests()[1];
    assert_eq!(
        fallback.authorization.as_deref(),
        Some("Bearer fallback-key")
    );

    let conversation = events[0].data["conversation_id"].as_str().unwrap();
    let messages = app.stored_messages(&token, conversation).await;
    assert_eq!(messages[1]["model"], "scripted-fallback", "{messages:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_fallback_a_short_retry_after_is_waited_for() {
    let script = Script::new([
        Turn::status(429).retry_after(1),
        Turn::text("Sorry for the wait."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let started = std::time::Instant::now();
    let events = app.ask(&token, "Anyone there?", None).await.rest().await;
    assert_eq!(answer(&events), "Sorry for the wait.");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    assert_eq!(requested_models(&app).len(), 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_after_tokens_were_sent_is_not_retried_and_ends_with_an_error() {
    let script = Script::new([
        Turn::text_fragments(["One ", "two ", "three ", "four ", "five"]).cut_after(3),
        Turn::text("A second try that must not happen."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Count to five", None).await.rest().await;
    let kinds = names(&events);
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "done"], "{kinds:?}");
    assert_eq!(events.last().unwrap().data["finish_reason"], "error");
    assert!(answer(&events).starts_with("One "));
    assert!(!answer(&events).contains("second try"));
    assert_eq!(
        requested_models(&app).len(),
        1,
        "no retry once tokens went out"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_sends_no_first_token_times_out_and_its_requests_are_closed() {
    let script = Script::repeat(Turn::text("never").hang());
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.resilience.first_token_timeout = Duration::from_secs_f64(0.5);
        s.gateway.file.resilience.retries = 1;
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Hello?", None).await.rest().await;
    assert_eq!(names(&events), ["meta", "error", "done"]);
    assert_eq!(events[1].data["code"], "model_timeout");
    assert_eq!(requested_models(&app).len(), 2, "one retry, then the error");
    assert!(app.upstream_idle().await, "the hung requests were closed");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_between_tokens_ends_the_answer_with_a_timeout() {
    let script = Script::new([
        Turn::text_fragments(["Quick, ", "then ", "slow"]).paced(Duration::from_secs(3))
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.resilience.first_token_timeout = Duration::from_secs_f64(10.0);
        s.gateway.file.resilience.inter_token_timeout = Duration::from_secs_f64(1.0);
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Hello?", None).await.rest().await;
    let kinds = names(&events);
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "done"], "{kinds:?}");
    let error: &Value = &events[kinds.len() - 2].data;
    assert_eq!(error["code"], "model_timeout");
    assert_eq!(answer(&events), "Quick, ");
    assert!(app.upstream_idle().await);
    app.stop().await;
}
