//! What the gateway adds to a streamed answer, in process: streaming beside the
//! upstream directly, memory of open streams, and a one-tool question.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::measure::{FRAGMENTS, added, compare, gateway, percentile, read_sse, row};
use crate::processes::{Stack, rss_kib};
use crate::{Options, UNLIMITED, no_tools};

pub(crate) async fn streaming(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let fragments: Vec<String> = (0..FRAGMENTS).map(|i| format!("word{i} ")).collect();
    let upstream = stack
        .upstream(
            "paced",
            &json!({ "repeat": { "fragments": fragments, "paced_ms": options.pace_ms } }),
        )
        .await?;
    let (port, _) = stack
        .gateway("gateway-stream", &upstream, &no_tools(), &[])
        .await?;
    let url = format!("http://127.0.0.1:{port}");
    let token: Arc<str> = stack.token().await?.into();
    let http = maitred::http_client::streaming()?;
    // Warm both paths: connections, the JWKS cache, SQLite's pages.
    compare(&http, &upstream, &url, &token, 4, 2).await?;

    println!(
        "\n## Streaming: {FRAGMENTS} fragments, one every {} ms\n",
        options.pace_ms
    );
    println!(
        "| path | concurrent streams | streams | TTFT p50 ms | TTFT p99 ms | gap p50 ms | gap p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (concurrency, rounds) in [(1, options.streams), (100, options.rounds)] {
        let (straight, through) =
            compare(&http, &upstream, &url, &token, concurrency, rounds).await?;
        if straight.short + through.short > 0 {
            bail!(
                "{} streams ended before {FRAGMENTS} tokens",
                straight.short + through.short
            );
        }
        println!("{}", row("upstream directly", concurrency, &straight));
        println!("{}", row("through the gateway", concurrency, &through));
        println!(
            "{}",
            added("added by the gateway", concurrency, &straight, &through)
        );
    }
    stack.stop_from(running).await;
    Ok(())
}

pub(crate) async fn idle_streams(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let upstream = stack
        .upstream("hang", &json!({ "repeat": { "hang": true } }))
        .await?;
    let (port, pid) = stack
        .gateway("gateway-idle", &upstream, &no_tools(), &[])
        .await?;
    let url = format!("http://127.0.0.1:{port}");
    let token: Arc<str> = stack.token().await?.into();
    // A fresh client per stream would measure connection setup; one pool opens as
    // many connections as there are streams anyway.
    let http = maitred::http_client::streaming()?;

    // Warm up with one stream opened and cancelled, so lazy state is counted as idle.
    let warm = open_idle(&http, &url, &token).await?;
    drop(warm);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kib(pid)?;

    let mut open = Vec::with_capacity(options.idle);
    for chunk in (0..options.idle).collect::<Vec<_>>().chunks(100) {
        let batch =
            futures::future::try_join_all(chunk.iter().map(|_| open_idle(&http, &url, &token)))
                .await?;
        open.extend(batch);
    }
    // `GATEWAY_OVERHEAD_HOLD_SECS` holds the streams open longer, for a heap profiler
    // to take its snapshot (massif: `vgdb --pid <pid> detailed_snapshot <file>`).
    let hold = std::env::var("GATEWAY_OVERHEAD_HOLD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    tokio::time::sleep(Duration::from_secs(hold)).await;
    let after = rss_kib(pid)?;
    let per_stream = (after.saturating_sub(before)) as f64 / options.idle as f64;

    println!("\n## Memory: open streams waiting on an upstream that never answers\n");
    println!("| gateway | RSS MiB |");
    println!("|---|---|");
    println!(
        "| idle (after one answer) | {:.1} |",
        before as f64 / 1024.0
    );
    println!(
        "| {} open streams | {:.1} |",
        options.idle,
        after as f64 / 1024.0
    );
    println!("| per stream | {per_stream:.1} KiB |");
    drop(open);
    stack.stop_from(running).await;
    Ok(())
}

/// Opens a question whose answer never comes; returns once its `meta` arrived, with
/// the body still open.
pub(crate) async fn open_idle(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> anyhow::Result<futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>> {
    let response = http
        .post(format!("{url}/api/v1/resos/stream/chat"))
        .bearer_auth(token)
        .json(&json!({ "question": "Anyone there?" }))
        .send()
        .await?
        .error_for_status()?;
    let mut body = response
        .bytes_stream()
        .map(|chunk| chunk.map(|b| b.to_vec()))
        .boxed();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("event: meta") {
        match body.next().await {
            Some(chunk) => seen.extend_from_slice(&chunk?),
            None => bail!("the stream ended before its meta event"),
        }
    }
    Ok(body)
}

pub(crate) async fn one_tool(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let turns = [
        json!({ "tool_calls": [{ "id": "call_1", "name": "resos__getTables", "arguments": {} }] }),
        json!({ "text": "The restaurant has twenty tables across its areas." }),
    ];
    let script =
        |n: usize| json!({ "turns": turns.iter().cycle().take(2 * n).collect::<Vec<_>>() });
    // Both upstreams play the same turns: one for the gateway, one timed directly.
    let upstream = stack
        .upstream("tool", &script(options.questions + 2))
        .await?;
    let reference = stack
        .upstream("tool-direct", &script(options.questions))
        .await?;
    let (port, _) = stack
        .gateway("gateway-tool", &upstream, UNLIMITED, &[])
        .await?;
    let url = format!("http://127.0.0.1:{port}");
    let token: Arc<str> = stack.token().await?.into();
    let http = maitred::http_client::streaming()?;
    let question = "How many tables are there?";
    for _ in 0..2 {
        gateway(http.clone(), url.clone(), token.clone(), question).await?;
    }

    let (mut whole, mut upstream_only, mut tool) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..options.questions {
        let started = Instant::now();
        let (_, events) = gateway(http.clone(), url.clone(), token.clone(), question).await?;
        whole.push(started.elapsed());
        let result = events
            .iter()
            .find(|e| e["event"] == "tool_result")
            .context("a tool_result event")?;
        if result["data"]["status"] != "ok" {
            bail!("the tool call failed: {result}");
        }
        tool.push(Duration::from_millis(
            result["data"]["duration_ms"].as_u64().unwrap_or(0),
        ));

        // The upstream's own time for the same two turns, asked directly.
        let started = Instant::now();
        for body in two_turns() {
            let response = http
                .post(format!("{reference}/chat/completions"))
                .json(&body)
                .send()
                .await?
                .error_for_status()?;
            read_sse(response, |_, data| data != "[DONE]").await?;
        }
        upstream_only.push(started.elapsed());
    }
    let overhead: Vec<Duration> = whole
        .iter()
        .zip(&upstream_only)
        .map(|(w, u)| w.saturating_sub(*u))
        .collect();
    println!("\n## A one-tool question: gateway → MCP → backend → SQLite\n");
    println!("| | questions | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    for (what, values) in [
        ("whole question, through the gateway", &whole),
        ("the upstream's two turns, asked directly", &upstream_only),
        ("the tool call, as the gateway timed it", &tool),
        ("gateway, MCP and backend (whole minus upstream)", &overhead),
    ] {
        println!(
            "| {what} | {} | {:.2} | {:.2} |",
            values.len(),
            percentile(values, 0.5),
            percentile(values, 0.99)
        );
    }
    stack.stop_from(running).await;
    Ok(())
}

/// The two requests the gateway makes for a one-tool question, as a client would.
fn two_turns() -> [Value; 2] {
    let user = json!({"role": "user", "content": "How many tables are there?"});
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "resos__getTables", "arguments": "{}"}}]});
    let result = json!({"role": "tool", "tool_call_id": "call_1", "content": "[]"});
    [
        json!({"model": "scripted", "stream": true, "messages": [user.clone()]}),
        json!({"model": "scripted", "stream": true, "messages": [user, call, result]}),
    ]
}
