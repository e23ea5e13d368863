use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use super::script::{split_pieces, split_words};
use super::*;

fn client() -> reqwest::Client {
    // The crate builds reqwest without a TLS provider; any client needs one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn chat_url(llm: &ScriptedLlm) -> String {
    format!("{}/chat/completions", llm.base_url())
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn streaming(messages: Value) -> Value {
    json!({"model": "gpt-test", "stream": true, "messages": messages})
}

async fn post(llm: &ScriptedLlm, body: &Value) -> reqwest::Response {
    client()
        .post(chat_url(llm))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A scripted LLM that plays `turns`, each once.
async fn scripted(turns: impl IntoIterator<Item = Turn>) -> ScriptedLlm {
    ScriptedLlm::start(Script::new(turns)).await.unwrap()
}

/// Asks `question` alone, streamed.
async fn ask(llm: &ScriptedLlm, question: &str) -> reqwest::Response {
    post(llm, &streaming(json!([user(question)]))).await
}

/// Asks `question` alone, streamed, and reads the whole body.
async fn ask_text(llm: &ScriptedLlm, question: &str) -> String {
    ask(llm, question).await.text().await.unwrap()
}

/// The payloads of an SSE body's `data:` lines.
fn data_lines(body: &str) -> Vec<String> {
    assert!(
        body.ends_with("\n\n"),
        "body must end with a blank line: {body:?}"
    );
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect("data line").to_owned())
        .collect()
}

fn chunks(body: &str) -> Vec<Value> {
    let lines = data_lines(body);
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"));
    lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn words_keep_their_leading_whitespace() {
    assert_eq!(
        split_words("Hello there,  world!"),
        ["Hello", " there,", "  world!"]
    );
    assert_eq!(split_words(" lead\nnext "), [" lead", "\nnext "]);
    assert!(split_words("").is_empty());
    assert_eq!(split_pieces("abcdefgh", 3), ["abc", "def", "gh"]);
    assert_eq!(split_pieces("ab", 3), ["a", "b"]);
    assert!(split_pieces("", 3).is_empty());
    assert_eq!(split_pieces("héé", 2), ["hé", "é"]);
}

#[tokio::test]
async fn text_stream_is_byte_for_byte_openai() {
    let llm = scripted([Turn::text("Hello there")]).await;
    let response = ask(&llm, "hi").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let body = response.text().await.unwrap();
    let head = r#"{"id":"chatcmpl-scripted-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","system_fingerprint":"fp_scripted","choices":[{"index":0,"delta":"#;
    let expected = [
        r#"{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"content":"Hello"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"content":" there"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{},"logprobs":null,"finish_reason":"stop"}]}"#,
    ]
    .iter()
    .map(|tail| format!("data: {head}{tail}\n\n"))
    .collect::<String>()
        + "data: [DONE]\n\n";
    assert_eq!(body, expected);
    assert_eq!(llm.open_streams(), 0);
    assert_eq!(llm.closed_early(), 0);
    llm.stop().await;
}

#[tokio::test]
async fn exact_fragments_are_sent_as_given() {
    let llm = scripted([Turn::text_fragments(["Hel", "lo", " wor", "ld"])]).await;
    let body = ask_text(&llm, "hi").await;
    let contents: Vec<Value> = chunks(&body)
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].clone())
        .collect();
    assert_eq!(
        contents,
        [
            json!(""),
            json!("Hel"),
            json!("lo"),
            json!(" wor"),
            json!("ld"),
            Value::Null
        ]
    );
}

#[tokio::test]
async fn tool_calls_interleave_and_reassemble() {
    let calls = [
        ToolCallSpec::new("call_a", "search", r#"{"query":"tables for four"}"#),
        ToolCallSpec::new("call_b", "opening_hours", r#"{"day":"friday"}"#),
    ];
    let llm = scripted([Turn::tool_calls(calls.clone())]).await;
    let body = ask_text(&llm, "book").await;
    let chunks = chunks(&body);

    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(
        first,
        &json!({"role": "assistant", "content": null, "refusal": null})
    );
    assert!(body.contains(r#""delta":{"role":"assistant","content":null,"refusal":null}"#));

    let deltas: Vec<&Value> = chunks[1..chunks.len() - 1]
        .iter()
        .map(|c| {
            let calls = c["choices"][0]["delta"]["tool_calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1);
            &calls[0]
        })
        .collect();
    let order: Vec<u64> = deltas
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(
        deltas[0],
        &json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "search", "arguments": ""}})
    );
    assert!(body.contains(
        r#"{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"opening_hours","arguments":""}}]}"#
    ));
    for (index, call) in calls.iter().enumerate() {
        let mine: Vec<&&Value> = deltas
            .iter()
            .filter(|d| d["index"] == json!(index))
            .collect();
        let arguments: String = mine
            .iter()
            .map(|d| d["function"]["arguments"].as_str().unwrap())
            .collect();
        assert_eq!(arguments, call.arguments);
        // Only the header carries id and name.
        assert!(
            mine[1..]
                .iter()
                .all(|d| d.get("id").is_none() && d["function"].get("name").is_none())
        );
        assert_eq!(mine.len(), 1 + DEFAULT_ARGUMENT_PIECES);
    }
    let last = &chunks[chunks.len() - 1]["choices"][0];
    assert_eq!(last["delta"], json!({}));
    assert_eq!(last["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn tool_call_options_text_repeat_ids_and_pieces() {
    let turn = Turn::tool_calls([ToolCallSpec::new("call_x", "lookup", r#"{"id":12345}"#)])
        .with_text("One moment.")
        .repeat_ids()
        .argument_pieces(2);
    let llm = scripted([turn]).await;
    let body = ask_text(&llm, "x").await;
    let chunks = chunks(&body);
    let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[1], &json!({"content": "One"}));
    assert_eq!(deltas[2], &json!({"content": " moment."}));
    assert_eq!(
        deltas[4]["tool_calls"][0],
        json!({"index": 0, "id": "call_x", "type": "function", "function": {"name": "lookup", "arguments": "{\"id\":"}})
    );
    assert_eq!(
        deltas[5]["tool_calls"][0]["function"]["arguments"],
        "12345}"
    );
    assert_eq!(deltas.len(), 7);
}

#[tokio::test]
async fn usage_chunk_only_when_requested() {
    let llm = scripted([
        Turn::text("counted words").usage(10, 5),
        Turn::text("not counted"),
    ])
    .await;
    let mut with_usage = streaming(json!([user("hi")]));
    with_usage["stream_options"] = json!({"include_usage": true});
    let body = post(&llm, &with_usage).await.text().await.unwrap();
    let lines = data_lines(&body);
    assert_eq!(lines.last().unwrap(), "[DONE]");
    assert_eq!(
        lines[lines.len() - 2],
        r#"{"id":"chatcmpl-scripted-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","system_fingerprint":"fp_scripted","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#
    );
    for line in &lines[..lines.len() - 2] {
        assert!(line.ends_with(r#"}],"usage":null}"#), "{line}");
    }

    let body = ask_text(&llm, "hi").await;
    assert!(!body.contains("usage"));
    assert!(body.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn default_usage_is_chars_over_four() {
    let llm = ScriptedLlm::start(Script::repeat(Turn::text("12345678")))
        .await
        .unwrap();
    let mut request = streaming(json!([user("abcdefghi")]));
    request["stream_options"] = json!({"include_usage": true});
    let body = post(&llm, &request).await.text().await.unwrap();
    let chunks = chunks(&body);
    let usage = &chunks.last().unwrap()["usage"];
    // "user" (4) + "abcdefghi" (9) = 13 chars -> 4 tokens; 8 chars -> 2.
    assert_eq!(
        usage,
        &json!({"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6})
    );
}

#[tokio::test]
async fn rate_limit_has_retry_after_and_openai_error() {
    let llm = scripted([Turn::status(429).retry_after(7), Turn::status(503)]).await;
    let response = ask(&llm, "hi").await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(body["error"]["param"], Value::Null);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Rate limit")
    );

    let response = ask(&llm, "hi").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().get("retry-after").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "server_error");
}

#[tokio::test]
async fn cut_after_breaks_the_stream() {
    let llm = scripted([Turn::text("one two three four").cut_after(2)]).await;
    let response = ask(&llm, "hi").await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut received = Vec::new();
    let mut failed = false;
    while let Some(part) = stream.next().await {
        match part {
            Ok(bytes) => received.extend_from_slice(&bytes),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the client must see an error, not a clean end");
    let received = String::from_utf8(received).unwrap();
    assert_eq!(data_lines(&received).len(), 2, "{received}");
    assert!(!received.contains("[DONE]"));
    wait_until("the stream to close", || llm.open_streams() == 0).await;
    assert_eq!(
        llm.closed_early(),
        0,
        "a scripted cut is not the client's doing"
    );
}

#[tokio::test]
async fn malformed_line_is_not_json() {
    let llm = scripted([Turn::text("a b c").malformed_at(2)]).await;
    let body = ask_text(&llm, "hi").await;
    let lines = data_lines(&body);
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[1],
        r#"{"id":"chatcmpl-scripted-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","system_fingerprint":"fp_scripted","choices":["#
    );
    for (i, line) in lines.iter().enumerate() {
        let parsed = serde_json::from_str::<Value>(line);
        assert_eq!(parsed.is_err(), i == 1 || i == 5, "line {i}: {line}");
    }
}

#[tokio::test]
async fn without_index_omits_the_index() {
    let turn = Turn::tool_calls([ToolCallSpec::new("call_1", "f", r#"{"a":1}"#)]).without_index();
    let llm = scripted([turn]).await;
    let body = ask_text(&llm, "hi").await;
    let chunks = chunks(&body);
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"].get("tool_calls"))
        .collect();
    assert_eq!(calls.len(), 4);
    for call in calls {
        assert!(call[0].get("index").is_none(), "{call}");
        assert!(call[0]["function"].get("arguments").is_some());
    }
    assert_eq!(chunks[0]["choices"][0]["index"], 0);
}

#[tokio::test]
async fn hang_then_client_drop_closes_promptly() {
    let llm = scripted([Turn::text("never sent").hang()]).await;
    let response = tokio::time::timeout(Duration::from_secs(2), ask(&llm, "hi"))
        .await
        .expect("headers arrive although the body hangs");
    assert_eq!(response.status(), 200);
    assert_eq!(llm.open_streams(), 1);
    let mut stream = response.bytes_stream();
    let nothing = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(nothing.is_err(), "a hanging turn sends nothing");
    drop(stream);
    wait_until("the server to notice the disconnect", || {
        llm.open_streams() == 0
    })
    .await;
    assert_eq!(llm.closed_early(), 1);
    llm.stop().await;
}

#[tokio::test]
async fn client_drop_mid_stream_counts_as_closed_early() {
    let turn = Turn::text("a b c d e f g h").paced(Duration::from_millis(50));
    let llm = ScriptedLlm::start(Script::repeat(turn)).await.unwrap();
    let response = ask(&llm, "hi").await;
    let mut stream = response.bytes_stream();
    let _first = stream.next().await.unwrap().unwrap();
    drop(stream);
    wait_until("the server to notice the disconnect", || {
        llm.open_streams() == 0
    })
    .await;
    assert_eq!(llm.closed_early(), 1);

    // A stream read to the end is not counted.
    ask_text(&llm, "hi").await;
    assert_eq!(llm.closed_early(), 1);
}

#[tokio::test]
async fn stop_ends_hanging_streams() {
    let llm = scripted([Turn::text("x").hang()]).await;
    let response = ask(&llm, "hi").await;
    let started = Instant::now();
    llm.stop().await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(response.text().await.is_err());
}

#[tokio::test]
async fn first_token_delay_comes_after_the_headers() {
    let turn = Turn::text("late").first_token_delay(Duration::from_millis(1000));
    let llm = scripted([turn]).await;
    let started = Instant::now();
    let response = ask(&llm, "hi").await;
    // Generous: a loaded CI machine can be slow, but not by most of a second.
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "headers first"
    );
    let mut stream = response.bytes_stream();
    stream.next().await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(1000));
}

#[tokio::test]
async fn exhausted_script_answers_500_and_records() {
    let llm = scripted([Turn::text("only")]).await;
    ask_text(&llm, "one").await;
    let response = ask(&llm, "two").await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "server_error");
    assert_eq!(body["error"]["code"], "script_exhausted");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no more turns")
    );
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn requests_are_recorded_in_order() {
    let llm = ScriptedLlm::start(Script::repeat(Turn::text("ok")))
        .await
        .unwrap();
    client()
        .post(chat_url(&llm))
        .bearer_auth("sk-one")
        .json(&streaming(json!([user("first")])))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    client()
        .post(chat_url(&llm))
        .body("not json")
        .send()
        .await
        .unwrap();
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["messages"][0]["content"], "first");
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer sk-one"));
    assert_eq!(requests[1].body, json!("not json"));
    assert_eq!(requests[1].authorization, None);
}

#[tokio::test]
async fn invalid_requests_get_400_and_keep_the_turn() {
    let llm = scripted([Turn::text("still here")]).await;
    let bad_tool_result = streaming(json!([
        user("hi"),
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "result"},
    ]));
    let response = post(&llm, &bad_tool_result).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_2"),
        "{body}"
    );

    let response = client()
        .post(chat_url(&llm))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    let body = ask_text(&llm, "hi").await;
    assert!(body.contains(r#"{"content":"still"}"#));
}

fn rejection(body: Value) -> Option<String> {
    validate::validate(&body).err().map(|e| e.message)
}

#[test]
fn validation_matches_provider_rules() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let ok = json!({"model": "m", "messages": [
        {"role": "system", "content": "s"},
        user("u"),
        {"role": "assistant", "content": null, "tool_calls": [call("c1"), call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "r1"}]},
        {"role": "assistant", "content": "done"},
        user("again"),
    ], "tools": [{"type": "function", "function": {"name": "get-thing_2", "parameters": {"type": "object"}}}]});
    assert_eq!(rejection(ok), None);

    let cases = [
        (json!([]), "expected an object"),
        (json!({"messages": [user("u")]}), "model parameter"),
        (
            json!({"model": "m"}),
            "Missing required parameter: 'messages'",
        ),
        (json!({"model": "m", "messages": []}), "empty array"),
        (
            json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
            "Invalid value: 'robot'",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user"}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "m", "messages": [user("u"), {"role": "tool", "tool_call_id": "c1", "content": "r"}]}),
            "must be a response to a preceeding message",
        ),
        (
            json!({"model": "m", "messages": [user("u"), {"role": "assistant", "tool_calls": [call("c1"), call("c2")]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}, user("next")]}),
            "did not have response messages: c2",
        ),
        (
            json!({"model": "m", "messages": [user("u"), {"role": "assistant", "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
                {"role": "tool", "tool_call_id": "c1", "content": "again"}]}),
            "'c1' not found",
        ),
        (
            json!({"model": "m", "messages": [user("u"), {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]}),
            "function.arguments': expected a string",
        ),
        (
            json!({"model": "m", "messages": [user("u"), {"role": "assistant", "content": null}]}),
            "got null",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "stream_options": {"include_usage": true}}),
            "only allowed when 'stream' is enabled",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "tools": [{"type": "web", "function": {"name": "f"}}]}),
            "Supported values are: 'function'",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "tools": [{"type": "function"}]}),
            "tools[0].function",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "tools": [{"type": "function", "function": {"name": "has space"}}]}),
            "does not match pattern",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "tools": [{"type": "function", "function": {"name": "x".repeat(65)}}]}),
            "string too long",
        ),
        (
            json!({"model": "m", "messages": [user("u")], "tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]}),
            "parameters': expected an object",
        ),
    ];
    for (body, expected) in cases {
        let message = rejection(body.clone()).unwrap_or_else(|| panic!("accepted: {body}"));
        assert!(message.contains(expected), "{body} -> {message}");
    }
}

#[tokio::test]
async fn api_key_is_checked() {
    let llm = ScriptedLlm::start_with_key(Script::repeat(Turn::text("ok")), "sk-right-key-123")
        .await
        .unwrap();
    let response = ask(&llm, "hi").await;
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["code"], "invalid_api_key");

    let wrong = client()
        .post(chat_url(&llm))
        .bearer_auth("sk-wrong-key-456")
        .json(&streaming(json!([user("hi")])))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let body: Value = wrong.json().await.unwrap();
    assert!(
        !body.to_string().contains("sk-wrong-key-456"),
        "the key is redacted"
    );

    let right = client()
        .post(chat_url(&llm))
        .bearer_auth("sk-right-key-123")
        .json(&streaming(json!([user("hi")])))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    let models = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 401);
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test]
async fn models_list_and_unknown_routes() {
    let llm = scripted([]).await;
    let models = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    assert_eq!(
        models.text().await.unwrap(),
        r#"{"object":"list","data":[{"id":"scripted","object":"model","created":1700000000,"owned_by":"maitred"}]}"#
    );
    let missing = client()
        .get(format!("{}/embeddings", llm.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn non_streaming_requests_get_a_completion() {
    let llm = scripted([
        Turn::text("Hello there").usage(3, 2),
        Turn::tool_calls([ToolCallSpec::new("call_1", "f", r#"{"a":1}"#)]),
    ])
    .await;
    let request = json!({"model": "gpt-test", "messages": [user("hi")]});
    let response = post(&llm, &request).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"id":"chatcmpl-scripted-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"system_fingerprint":"fp_scripted"}"#
    );
    let body: Value = post(&llm, &request).await.json().await.unwrap();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}])
    );
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn json_scripts_parse_and_round_trip() {
    let script = Script::from_json(
        r#"{
          "api_key": "sk-test",
          "turns": [
            { "text": "Hello there" },
            { "fragments": ["Hel", "lo"], "paced_ms": 20, "first_token_delay_ms": 300 },
            { "text": "Let me look.",
              "tool_calls": [
                { "id": "call_1", "name": "search", "arguments": { "q": "tables" } },
                { "id": "call_2", "name": "hours", "arguments": "{}" }
              ],
              "argument_pieces": 2, "repeat_ids": true, "without_index": true },
            { "text": "Partial", "cut_after": 2, "malformed_at": 1 },
            { "text": "Counted", "usage": { "prompt_tokens": 10, "completion_tokens": 2 } },
            { "status": 429, "retry_after": 2, "message": "slow down" },
            { "hang": true }
          ]
        }"#,
    )
    .unwrap();
    let expected = Script::new([
        Turn::text("Hello there"),
        Turn::text_fragments(["Hel", "lo"])
            .paced(Duration::from_millis(20))
            .first_token_delay(Duration::from_millis(300)),
        Turn::tool_calls([
            ToolCallSpec::new("call_1", "search", r#"{"q":"tables"}"#),
            ToolCallSpec::new("call_2", "hours", "{}"),
        ])
        .with_text("Let me look.")
        .argument_pieces(2)
        .repeat_ids()
        .without_index(),
        Turn::text("Partial").cut_after(2).malformed_at(1),
        Turn::text("Counted").usage(10, 2),
        Turn::status(429).retry_after(2).message("slow down"),
        Turn::text("").hang(),
    ])
    .with_api_key("sk-test");
    assert_eq!(script, expected);
    let again = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(again, script);

    let repeat = Script::from_json(r#"{"repeat": {"text": "same"}}"#).unwrap();
    assert_eq!(repeat, Script::repeat(Turn::text("same")));

    for bad in [
        r#"{"turns": [{"txt": "typo"}]}"#,
        r#"{"turns": [{}]}"#,
        r#"{"turns": [{"status": 500, "text": "x"}]}"#,
        r#"{"turns": [{"text": "x", "retry_after": 1}]}"#,
        r#"{"turns": [], "repeat": {"text": "x"}}"#,
        r#"{}"#,
    ] {
        assert!(Script::from_json(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn serve_from_file_rejects_a_bad_script() {
    let path = std::env::temp_dir().join(format!("scripted-llm-bad-{}.json", std::process::id()));
    std::fs::write(&path, r#"{"turns": [{"nope": 1}]}"#).unwrap();
    let err = serve_from_file(&path, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(format!("{err:#}").contains("nope"), "{err:#}");
}

mod with_async_openai {
    use async_openai::Client;
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestMessage, ChatCompletionRequestUserMessage,
        ChatCompletionStreamOptions, ChatCompletionTool, ChatCompletionTools,
        CreateChatCompletionRequest, CreateChatCompletionRequestArgs, FinishReason, FunctionObject,
    };

    use super::*;

    fn openai(llm: &ScriptedLlm) -> Client<OpenAIConfig> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::with_config(
            OpenAIConfig::new()
                .with_api_base(llm.base_url())
                .with_api_key("sk-scripted"),
        )
    }

    fn request() -> CreateChatCompletionRequest {
        CreateChatCompletionRequestArgs::default()
            .model("gpt-test")
            .messages([ChatCompletionRequestMessage::User(
                ChatCompletionRequestUserMessage::from("Book a table"),
            )])
            .tools([ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: "search".into(),
                    description: Some("Find tables".into()),
                    parameters: Some(json!({"type": "object", "properties": {}})),
                    strict: None,
                },
            })])
            // With the `byot` feature, `create_stream` leaves `stream` as the
            // request has it instead of forcing it on.
            .stream(true)
            .stream_options(ChatCompletionStreamOptions {
                include_usage: Some(true),
                include_obfuscation: None,
            })
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn async_openai_parses_text_and_tool_call_streams() {
        let calls = [
            ToolCallSpec::new("call_a", "search", r#"{"party":4,"time":"19:00"}"#),
            ToolCallSpec::new("call_b", "search", r#"{"party":2}"#),
        ];
        let llm = ScriptedLlm::start_with_key(
            Script::new([
                Turn::text("Hello there, guest!").usage(7, 5),
                Turn::tool_calls(calls.clone()).with_text("Checking."),
            ]),
            "sk-scripted",
        )
        .await
        .unwrap();
        let client = openai(&llm);

        let mut stream = client.chat().create_stream(request()).await.unwrap();
        let mut text = String::new();
        let mut finish = None;
        let mut usage = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.unwrap();
            assert_eq!(chunk.id, "chatcmpl-scripted-1");
            for choice in chunk.choices {
                text.push_str(choice.delta.content.as_deref().unwrap_or(""));
                finish = finish.or(choice.finish_reason);
            }
            usage = usage.or(chunk.usage);
        }
        assert_eq!(text, "Hello there, guest!");
        assert_eq!(finish, Some(FinishReason::Stop));
        let usage = usage.unwrap();
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.total_tokens
            ),
            (7, 5, 12)
        );

        let mut stream = client.chat().create_stream(request()).await.unwrap();
        let mut text = String::new();
        let mut assembled: Vec<(String, String, String)> = Vec::new();
        let mut finish = None;
        while let Some(chunk) = stream.next().await {
            for choice in chunk.unwrap().choices {
                text.push_str(choice.delta.content.as_deref().unwrap_or(""));
                finish = finish.or(choice.finish_reason);
                for call in choice.delta.tool_calls.unwrap_or_default() {
                    let i = call.index as usize;
                    if assembled.len() <= i {
                        assembled.resize(i + 1, Default::default());
                    }
                    let slot = &mut assembled[i];
                    if let Some(id) = call.id {
                        slot.0 = id;
                    }
                    if let Some(function) = call.function {
                        if let Some(name) = function.name {
                            slot.1 = name;
                        }
                        slot.2.push_str(function.arguments.as_deref().unwrap_or(""));
                    }
                }
            }
        }
        assert_eq!(text, "Checking.");
        assert_eq!(finish, Some(FinishReason::ToolCalls));
        let expected: Vec<(String, String, String)> = calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(assembled, expected);

        let sent = &llm.requests()[0];
        assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-scripted"));
        assert_eq!(sent.body["stream"], true);
        assert_eq!(sent.body["tools"][0]["function"]["name"], "search");
        llm.stop().await;
    }

    #[tokio::test]
    async fn async_openai_sees_the_faults() {
        let llm = scripted([
            Turn::tool_calls([ToolCallSpec::new("call_1", "search", "{}")]).without_index(),
            Turn::status(429).retry_after(0),
            Turn::text("after the retry"),
            Turn::status(400).message("scripted rejection"),
            Turn::text("a b c").cut_after(2),
        ])
        .await;
        let client = openai(&llm);

        // A missing index is exactly what async-openai cannot parse.
        let mut stream = client.chat().create_stream(request()).await.unwrap();
        let mut errors = 0;
        while let Some(chunk) = stream.next().await {
            errors += usize::from(chunk.is_err());
        }
        assert!(errors > 0);

        // async-openai's default client retries 429 and 5xx by itself
        // (honouring Retry-After), so one call consumes two turns here.
        let mut stream = client.chat().create_stream(request()).await.unwrap();
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            for choice in chunk.unwrap().choices {
                text.push_str(choice.delta.content.as_deref().unwrap_or(""));
            }
        }
        assert_eq!(text, "after the retry");
        assert_eq!(llm.requests().len(), 3);

        let err = client.chat().create_stream(request()).await.err().unwrap();
        let shown = err.to_string();
        assert!(
            shown.contains("invalid_request_error") && shown.contains("scripted rejection"),
            "{shown}"
        );

        let mut stream = client.chat().create_stream(request()).await.unwrap();
        let mut last = None;
        while let Some(chunk) = stream.next().await {
            last = Some(chunk.is_ok());
        }
        assert_eq!(last, Some(false), "a cut stream ends in an error");
    }
}

#[tokio::test]
async fn like_llama_cpp_python_it_fails_on_what_it_cannot_read() {
    let llm = ScriptedLlm::start(Script::new([Turn::text("ok")]).like(Server::LlamaCppPython))
        .await
        .unwrap();
    let call =
        json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
    let tool = json!({"role": "tool", "tool_call_id": "c1", "content": "x"});
    let tools =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let refused = [
        (
            streaming(json!([user("hi"), {"role": "assistant", "tool_calls": call}, tool])),
            "'dict object' has no attribute 'content'",
        ),
        (
            streaming(
                json!([user("hi"), {"role": "assistant", "content": null, "tool_calls": call}, tool]),
            ),
            "1 validation error: messages.1.content: Input should be a valid string",
        ),
        (
            {
                let mut body = streaming(json!([user("hi")]));
                body["tools"] = tools.clone();
                body["tool_choice"] = "required".into();
                body
            },
            "",
        ),
    ];
    for (mut body, message) in refused {
        // Streamed, the request fails after the headers: 200, and no chunk at all.
        let response = post(&llm, &body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "");
        // Whole, its error handler's JSONResponse, byte for byte.
        body["stream"] = false.into();
        let response = post(&llm, &body).await;
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.text().await.unwrap(),
            format!(
                r#"{{"error":{{"message":"{message}","type":"internal_server_error","param":null,"code":null}}}}"#
            )
        );
    }
    // `content: ""` and a named tool result are what it takes.
    let mut body = streaming(json!([
        user("hi"),
        {"role": "assistant", "content": "", "tool_calls": call},
        {"role": "tool", "tool_call_id": "c1", "content": "x", "name": "f"}
    ]));
    body["tools"] = tools;
    body["tool_choice"] = "auto".into();
    let response = post(&llm, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(chunks(&response.text().await.unwrap()).len(), 3);
    assert_eq!(llm.requests().len(), 7);
    llm.stop().await;
}

#[tokio::test]
async fn like_llama_cpp_python_a_turn_that_calls_a_tool_is_not_streamed() {
    let call = ToolCallSpec::new("c1", "f", "{}");
    let llm =
        ScriptedLlm::start(Script::new([Turn::tool_calls([call])]).like(Server::LlamaCppPython))
            .await
            .unwrap();
    let mut body = streaming(json!([user("hi")]));
    body["tools"] =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    // "Automatic streaming tool choice is not supported": the stream ends unbegun,
    // and the turn is still there for the same request, whole.
    let response = post(&llm, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "");
    body["stream"] = false.into();
    let whole: Value = post(&llm, &body).await.json().await.unwrap();
    assert_eq!(
        whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "f"
    );
    llm.stop().await;
}

#[tokio::test]
async fn raw_turns_send_their_lines_exactly() {
    let lines = [
        r#"{"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}"#,
        "[DONE]",
    ];
    let llm = scripted([Turn::raw(lines)]).await;
    let response = ask(&llm, "hi").await;
    assert_eq!(
        response.text().await.unwrap(),
        format!("data: {}\n\ndata: [DONE]\n\n", lines[0])
    );
    llm.stop().await;
    let script = Script::from_json(
        r#"{"like": "llama-cpp-python", "turns": [{"raw": ["{}", "[DONE]"], "paced_ms": 5}]}"#,
    )
    .unwrap();
    assert_eq!(script.like, Server::LlamaCppPython);
    assert_eq!(
        script.turns()[0],
        Turn::raw(["{}", "[DONE]"]).paced(Duration::from_millis(5))
    );
    let round_trip = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(round_trip, script);
    assert!(Script::from_json(r#"{"turns": [{"raw": ["{}"], "text": "x"}]}"#).is_err());
}

#[tokio::test]
async fn a_responder_answers_each_request_from_its_body() {
    let llm = ScriptedLlm::start_responding(|body: &Value| {
        let question = body["messages"][0]["content"].as_str().unwrap_or_default();
        Turn::text(format!("You said {question}"))
    })
    .await
    .unwrap();
    for question in ["one", "two", "one"] {
        let body = ask_text(&llm, question).await;
        let text: String = data_lines(&body)
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|chunk| {
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(text, format!("You said {question}"));
    }
    assert_eq!(llm.requests().len(), 3);
    llm.stop().await;
}

/// Writes `body` as a chat completion request on `socket` and reads until the server
/// closes it or `until` is read: what came back, byte for byte.
async fn exchange(socket: &mut tokio::net::TcpStream, body: &Value, until: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0; 4096];
    while !received.ends_with(until) {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
    }
    received
}

#[tokio::test]
async fn like_llama_cpp_python_a_failed_stream_ends_cleanly_and_its_connection_then_closes() {
    let call = ToolCallSpec::new("c1", "f", "{}");
    let llm =
        ScriptedLlm::start(Script::new([Turn::tool_calls([call])]).like(Server::LlamaCppPython))
            .await
            .unwrap();
    let mut body = streaming(json!([user("hi")]));
    body["tools"] =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let mut socket = tokio::net::TcpStream::connect(llm.addr()).await.unwrap();
    let failed = String::from_utf8(exchange(&mut socket, &body, b"0\r\n\r\n").await).unwrap();
    // sse-starlette's headers (the real server adds uvicorn's, a request id and its
    // processing time), and a chunked body with nothing in it.
    let (head, rest) = failed.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    assert_eq!(lines.next(), Some("HTTP/1.1 200 OK"));
    let headers: Vec<&str> = lines.filter(|l| !l.starts_with("date:")).collect();
    assert_eq!(
        headers,
        [
            "cache-control: no-store",
            "connection: keep-alive",
            "x-accel-buffering: no",
            "content-type: text/event-stream; charset=utf-8",
            "transfer-encoding: chunked",
        ]
    );
    assert_eq!(rest, "0\r\n\r\n");
    // Whole, on the same connection at once: closed, not answered.
    body["stream"] = false.into();
    assert_eq!(exchange(&mut socket, &body, b"}").await, b"");
    // On a connection of its own, the same request is answered.
    let whole: Value = post(&llm, &body).await.json().await.unwrap();
    assert_eq!(
        whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "f"
    );
    assert_eq!(llm.requests().len(), 3);

    // A client that keeps connections open sees the second request fail unanswered.
    let llm = ScriptedLlm::start(
        Script::new([Turn::tool_calls([ToolCallSpec::new("c1", "f", "{}")])])
            .like(Server::LlamaCppPython),
    )
    .await
    .unwrap();
    let pooled = client();
    body["stream"] = true.into();
    let response = pooled
        .post(chat_url(&llm))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "");
    body["stream"] = false.into();
    let lost = pooled
        .post(chat_url(&llm))
        .json(&body)
        .send()
        .await
        .unwrap_err();
    assert!(lost.is_request() && !lost.is_connect(), "{lost:?}");
    llm.stop().await;
}

#[tokio::test]
async fn hang_up_closes_the_connection_without_an_answer() {
    let llm = scripted([Turn::text("unsaid").hang_up(), Turn::text("said")]).await;
    let lost = client()
        .post(chat_url(&llm))
        .json(&streaming(json!([user("hi")])))
        .send()
        .await
        .unwrap_err();
    assert!(lost.is_request() && !lost.is_connect(), "{lost:?}");
    // The server is still there: the next request gets the next turn.
    let models = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    assert!(ask_text(&llm, "again").await.contains("said"));
    assert_eq!(llm.requests().len(), 2);
    llm.stop().await;
    let script = Script::from_json(r#"{"turns": [{"hang_up": true}]}"#).unwrap();
    assert_eq!(
        script.turns()[0],
        Turn::text_fragments(Vec::<String>::new()).hang_up()
    );
    let round_trip = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(round_trip, script);
}
