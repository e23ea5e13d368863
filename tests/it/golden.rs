//! The SSE stream of one scripted answer, byte for byte: a tool call, its result and
//! a streamed text with usage. Work on the event path (serialisation, batching, the
//! live state) must not change a byte of what clients read. Only what differs from
//! run to run — the ids the gateway makes and how long the tool took — is replaced
//! by a placeholder before comparing.
//!
//! `MAITRED_WRITE_GOLDEN=1 cargo test --test it golden` rewrites the expected file
//! after an intended change of the stream.

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::Value;

use crate::helpers::{Database, Llm, TestApp};

const GOLDEN: &str = "tests/it/golden/tool_answer.sse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_scripted_answer_streams_exactly_the_golden_bytes() {
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_a",
            "resos__getTables",
            r#"{"limit":2,"sort":"name:asc"}"#,
        )])
        .argument_pieces(3),
        Turn::text_fragments([
            "We have ",
            "tables \"A1\"",
            " and A2.\n\n",
            "Ask me ",
            "to book one.",
        ])
        .usage(812, 23),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let response = app
        .http
        .post(format!("{}/api/v1/resos/stream/chat", app.gateway_url))
        .bearer_auth(&token)
        .json(&serde_json::json!({ "question": "Which tables are there?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap();
    let normalised = normalise(&body);

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("MAITRED_WRITE_GOLDEN").is_some() {
        std::fs::write(&path, &normalised).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert!(
        normalised == expected,
        "the stream changed:\n--- expected\n{expected}\n--- got\n{normalised}"
    );
    app.stop().await;
}

/// The stream with the gateway's ids and the tool's duration replaced.
fn normalise(body: &str) -> String {
    let mut replacements: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let value: Value = serde_json::from_str(data).unwrap();
        for (key, placeholder) in [
            ("conversation_id", "conv_CONVERSATION"),
            ("message_id", "msg_MESSAGE"),
        ] {
            if let Some(id) = value[key].as_str() {
                replacements.push((id.to_owned(), placeholder.to_owned()));
            }
        }
        if let Some(id) = value["id"].as_str().filter(|id| id.starts_with("tc_")) {
            let placeholder = format!("tc_CALL{}", replacements.len());
            if !replacements.iter().any(|(seen, _)| seen == id) {
                replacements.push((id.to_owned(), placeholder));
            }
        }
        if let Some(ms) = value["duration_ms"].as_u64() {
            replacements.push((
                format!("\"duration_ms\":{ms}"),
                "\"duration_ms\":0".to_owned(),
            ));
        }
    }
    let mut text = body.to_owned();
    for (from, to) in replacements {
        text = text.replace(&from, &to);
    }
    text
}
