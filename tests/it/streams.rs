//! Generations live apart from the connections that watch them: a client that drops
//! resumes with `Last-Event-ID`, two viewers see one generation, and an answer
//! nobody watches is cancelled after the grace period with its upstream closed.

use std::time::Duration;

use maitred_scripted_llm::{Script, Turn};

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer};

fn words(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{i} ")).collect()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.id.expect("every event has an id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_and_resumes_gets_every_token_exactly_once() {
    let script = Script::new([Turn::text_fragments(words(40)).paced(Duration::from_millis(15))]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;

    let mut first = app.ask(&token, "Say forty words", None).await;
    let mut before = vec![first.next().await.unwrap()];
    let message_id = before[0].data["message_id"].as_str().unwrap().to_owned();
    while before.iter().filter(|e| e.event == "token").count() < 5 {
        before.push(first.next().await.unwrap());
    }
    // The connection drops mid-answer; the answer goes on without it.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let last_seen = before.last().unwrap().id.unwrap();
    let after = app
        .watch(&token, &message_id, Some(last_seen))
        .await
        .rest()
        .await;
    assert_eq!(after.first().unwrap().id, Some(last_seen + 1));
    assert_eq!(after.last().unwrap().event, "done");
    assert_eq!(after.last().unwrap().data["finish_reason"], "stop");

    let all: Vec<SseEvent> = before.into_iter().chain(after).collect();
    let expected: Vec<u64> = (1..=all.len() as u64).collect();
    assert_eq!(ids(&all), expected, "no event lost or repeated");
    assert_eq!(answer(&all), words(40).concat());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_viewers_of_one_generation_see_the_same_events() {
    let script = Script::new([Turn::text_fragments(words(20)).paced(Duration::from_millis(15))]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;

    let mut first_tab = app.ask(&token, "Say twenty words", None).await;
    let meta = first_tab.next().await.unwrap();
    let message_id = meta.data["message_id"].as_str().unwrap().to_owned();
    // The second tab opens while the answer is being written, from the start.
    let mut second_tab = app.watch(&token, &message_id, None).await;
    let (first_rest, second) = tokio::join!(first_tab.rest(), second_tab.rest());
    let first: Vec<SseEvent> = std::iter::once(meta).chain(first_rest).collect();

    assert_eq!(ids(&first), ids(&second));
    let shape = |events: &[SseEvent]| -> Vec<(String, serde_json::Value)> {
        events
            .iter()
            .map(|e| (e.event.clone(), e.data.clone()))
            .collect()
    };
    assert_eq!(shape(&first), shape(&second));
    assert_eq!(answer(&second), words(20).concat());

    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_nobody_watches_is_cancelled_after_the_grace_period_and_its_upstream_closed() {
    let script = Script::new([Turn::text_fragments(words(400)).paced(Duration::from_millis(25))]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.stream_grace = Duration::from_millis(400);
    })
    .await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "Talk for ten seconds", None).await;
    let meta = stream.until("token").await.remove(0);
    let conversation = meta.data["conversation_id"].as_str().unwrap().to_owned();
    drop(stream);

    // Well before the answer's ten seconds are up, the upstream request is closed.
    assert!(
        app.upstream_idle().await,
        "the upstream stream is still open"
    );
    let llm = app.llm.as_ref().unwrap();
    assert_eq!(llm.closed_early(), 1);
    let messages = app.stored_messages(&token, &conversation).await;
    let reply = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(reply["status"], "cancelled", "{reply}");
    assert!(
        reply["content"].as_str().unwrap().starts_with("w0 w1 "),
        "{reply}"
    );
    app.stop().await;
}
