//! What the gateway adds to a streamed answer. Every part runs as its own process,
//! as deployed: the scripted upstream (`maitred scripted-llm`), the backend, the MCP
//! role and the gateway (release builds), with this process as the client.
//!
//! - Time to first token and the gap between tokens, for a client streaming straight
//!   from the upstream beside one streaming through the gateway's chat endpoint (no
//!   tools), at 1 and at 100 concurrent streams; the upstream sends 64 fragments at a
//!   fixed pace.
//! - The gateway's resident memory idle and with 1,000 open streams whose upstream
//!   never answers.
//! - A one-tool question end to end (gateway → MCP → backend → SQLite) minus the
//!   upstream's own time for the same two model turns.
//!
//!     cargo bench --bench gateway_overhead [-- --pace-ms 20 --streams 50 --rounds 3 --idle 1000 --questions 100 --keep-logs]

// A benchmark that cannot run has nothing to report: failing loudly is right.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::Barrier;

const FRAGMENTS: usize = 64;

struct Options {
    pace_ms: u64,
    streams: usize,
    rounds: usize,
    idle: usize,
    questions: usize,
}

impl Options {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let get = |name: &str, default: usize| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Self {
            pace_ms: get("--pace-ms", 20) as u64,
            streams: get("--streams", 50),
            rounds: get("--rounds", 3),
            idle: get("--idle", 1000),
            questions: get("--questions", 100),
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The processes of one run, their ports and files; dropping it kills them.
struct Stack {
    dir: tempfile::TempDir,
    backend: u16,
    mcp: u16,
    /// One port for every phase's gateway: the issuer names it in tokens' audience.
    gateway: u16,
    children: Vec<Child>,
    http: reqwest::Client,
}

impl Stack {
    fn command(&self, args: &[&str], log: &str) -> anyhow::Result<Command> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_maitred"));
        command
            .args(args)
            .env("MAITRED_DATA_DIR", self.dir.path())
            .env("MAITRED_BACKEND_PORT", self.backend.to_string())
            .env("MAITRED_MCP_PORT", self.mcp.to_string())
            .env("MAITRED_GATEWAY_PORT", self.gateway.to_string())
            .env_remove("DATABASE_URL")
            .env_remove("MAITRED_LLM_BASE_URL")
            .env_remove("MAITRED_GATEWAY_CONFIG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(
                self.dir.path().join(format!("{log}.out")),
            )?)
            .stderr(std::fs::File::create(
                self.dir.path().join(format!("{log}.log")),
            )?)
            .kill_on_drop(true);
        Ok(command)
    }

    /// Stops the processes started after the first `running`, and waits for them to
    /// be gone so the next phase can take their ports.
    async fn stop_from(&mut self, running: usize) {
        for mut child in self.children.drain(running..) {
            let _ = child.kill().await;
        }
    }

    async fn wait_ready(&self, port: u16, path: &str) -> anyhow::Result<()> {
        let url = format!("http://127.0.0.1:{port}{path}");
        for _ in 0..600 {
            if let Ok(response) = self.http.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "{url} never became ready; logs in {}",
            self.dir.path().display()
        )
    }

    /// A scripted upstream playing `script`; returns its base URL.
    async fn upstream(&mut self, name: &str, script: &Value) -> anyhow::Result<String> {
        let file = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_vec(script)?)?;
        let port = free_port();
        let child = self
            .command(
                &[
                    "scripted-llm",
                    "--script",
                    file.to_str().context("path")?,
                    "--port",
                    &port.to_string(),
                ],
                name,
            )?
            .spawn()?;
        self.children.push(child);
        self.wait_ready(port, "/v1/models").await?;
        Ok(format!("http://127.0.0.1:{port}/v1"))
    }

    /// A gateway process on `upstream` with `config`; returns its port and pid.
    async fn gateway(
        &mut self,
        name: &str,
        upstream: &str,
        config: &str,
    ) -> anyhow::Result<(u16, u32)> {
        let file = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, config)?;
        let port = self.gateway;
        let mut command = self.command(&["gateway"], name)?;
        command
            .env("MAITRED_GATEWAY_CONFIG", &file)
            .env("MAITRED_LLM_BASE_URL", upstream)
            .env("MAITRED_LLM_MODEL", "scripted");
        let child = command.spawn()?;
        let pid = child.id().context("gateway pid")?;
        self.children.push(child);
        self.wait_ready(port, "/readyz").await?;
        Ok((port, pid))
    }

    async fn token(&self) -> anyhow::Result<String> {
        let out = self
            .command(&["token", "--client", "maitred-cli"], "token")?
            .stdout(Stdio::piped())
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "maitred token failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    }
}

/// When each token of one stream arrived, counted from sending the request.
struct Timing {
    first: Duration,
    gaps: Vec<Duration>,
    tokens: usize,
}

/// Reads an SSE body, calling `on_event(event, data)` for each event; stops when it
/// returns false or the body ends.
async fn read_sse(
    response: reqwest::Response,
    mut on_event: impl FnMut(&str, &str) -> bool,
) -> anyhow::Result<()> {
    let mut body = response.bytes_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = body.next().await {
        buffer.extend_from_slice(&chunk?);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buffer.drain(..end + 2).collect();
            let text = std::str::from_utf8(&block)?;
            let (mut event, mut data) = ("message", String::new());
            for line in text.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = name;
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push_str(value);
                }
            }
            if !data.is_empty() && !on_event(event, &data) {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn timing(started: Instant, arrivals: &[Instant]) -> Timing {
    Timing {
        first: arrivals.first().map_or(Duration::ZERO, |t| *t - started),
        gaps: arrivals.windows(2).map(|w| w[1] - w[0]).collect(),
        tokens: arrivals.len(),
    }
}

/// One stream straight from the upstream's chat completions.
async fn direct(http: reqwest::Client, upstream: String) -> anyhow::Result<Timing> {
    let started = Instant::now();
    let response = http
        .post(format!("{upstream}/chat/completions"))
        .json(&json!({
            "model": "scripted",
            "stream": true,
            "messages": [{"role": "user", "content": "Tell me about the restaurant."}],
        }))
        .send()
        .await?
        .error_for_status()?;
    let mut arrivals = Vec::with_capacity(FRAGMENTS);
    read_sse(response, |_, data| {
        if data == "[DONE]" {
            return false;
        }
        let chunk: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        if chunk["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
        {
            arrivals.push(Instant::now());
        }
        true
    })
    .await?;
    Ok(timing(started, &arrivals))
}

/// One question through the gateway's chat endpoint.
async fn gateway(
    http: reqwest::Client,
    url: String,
    token: Arc<str>,
    question: &str,
) -> anyhow::Result<(Timing, Vec<Value>)> {
    let started = Instant::now();
    let response = http
        .post(format!("{url}/api/v1/resos/stream/chat"))
        .bearer_auth(&*token)
        .json(&json!({ "question": question }))
        .send()
        .await?
        .error_for_status()?;
    let mut arrivals = Vec::with_capacity(FRAGMENTS);
    let mut events = Vec::new();
    read_sse(response, |event, data| {
        if event == "token" {
            arrivals.push(Instant::now());
        } else {
            events.push(json!({ "event": event, "data": serde_json::from_str::<Value>(data).unwrap_or(Value::Null) }));
        }
        event != "done"
    })
    .await?;
    Ok((timing(started, &arrivals), events))
}

#[derive(Default)]
struct Samples {
    first: Vec<Duration>,
    gaps: Vec<Duration>,
    short: usize,
}

impl Samples {
    fn add(&mut self, timing: Timing) {
        if timing.tokens != FRAGMENTS {
            self.short += 1;
        }
        self.first.push(timing.first);
        self.gaps.extend(timing.gaps);
    }
}

fn percentile(values: &[Duration], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// Runs `rounds` rounds of `concurrency` streams on each path, the paths taking turns
/// so drift in the machine's load falls on both alike.
async fn compare(
    http: &reqwest::Client,
    upstream: &str,
    gateway_url: &str,
    token: &Arc<str>,
    concurrency: usize,
    rounds: usize,
) -> anyhow::Result<(Samples, Samples)> {
    let (mut straight, mut through) = (Samples::default(), Samples::default());
    for _ in 0..rounds {
        let barrier = Arc::new(Barrier::new(concurrency));
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (http, upstream, barrier) =
                    (http.clone(), upstream.to_owned(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    direct(http, upstream).await
                })
            })
            .collect();
        for task in tasks {
            straight.add(task.await??);
        }
        let barrier = Arc::new(Barrier::new(concurrency));
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (http, url, token, barrier) = (
                    http.clone(),
                    gateway_url.to_owned(),
                    token.clone(),
                    barrier.clone(),
                );
                tokio::spawn(async move {
                    barrier.wait().await;
                    gateway(http, url, token, "Tell me about the restaurant.").await
                })
            })
            .collect();
        for task in tasks {
            through.add(task.await??.0);
        }
    }
    Ok((straight, through))
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS in /proc/<pid>/status")
}

/// Limits out of the way: the benchmark measures the gateway, not its guards.
const UNLIMITED: &str = r#"
[resilience]
model_concurrency = 100000
model_requests_per_minute = 0
first_token_timeout = 600
inter_token_timeout = 600

[limits]
requests_per_minute = 0
concurrent_generations = 100000
tool_calls_per_question = 25
"#;

fn no_tools() -> String {
    format!(
        "{UNLIMITED}\n[[mcp_servers]]\nname = \"none\"\nurl = \"http://127.0.0.1:9/mcp\"\nenabled = false\n"
    )
}

fn row(what: &str, concurrency: usize, samples: &Samples) -> String {
    format!(
        "| {what} | {concurrency} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        samples.first.len(),
        percentile(&samples.first, 0.5),
        percentile(&samples.first, 0.99),
        percentile(&samples.gaps, 0.5),
        percentile(&samples.gaps, 0.99),
    )
}

fn added(concurrency: usize, straight: &Samples, through: &Samples) -> String {
    let diff = |f: fn(&Samples) -> &Vec<Duration>, p| {
        percentile(f(through), p) - percentile(f(straight), p)
    };
    format!(
        "| added by the gateway | {concurrency} | | {:+.2} | {:+.2} | {:+.2} | {:+.2} |",
        diff(|s| &s.first, 0.5),
        diff(|s| &s.first, 0.99),
        diff(|s| &s.gaps, 0.5),
        diff(|s| &s.gaps, 0.99),
    )
}

async fn streaming(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let fragments: Vec<String> = (0..FRAGMENTS).map(|i| format!("word{i} ")).collect();
    let upstream = stack
        .upstream(
            "paced",
            &json!({ "repeat": { "fragments": fragments, "paced_ms": options.pace_ms } }),
        )
        .await?;
    let (port, _) = stack
        .gateway("gateway-stream", &upstream, &no_tools())
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
        println!("{}", added(concurrency, &straight, &through));
    }
    stack.stop_from(running).await;
    Ok(())
}

async fn idle_streams(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let upstream = stack
        .upstream("hang", &json!({ "repeat": { "hang": true } }))
        .await?;
    let (port, pid) = stack
        .gateway("gateway-idle", &upstream, &no_tools())
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
    tokio::time::sleep(Duration::from_secs(2)).await;
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
async fn open_idle(
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

async fn one_tool(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
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
    let (port, _) = stack.gateway("gateway-tool", &upstream, UNLIMITED).await?;
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

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!(
        "{} cores, {cpu}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}

async fn start(data: &Path) -> anyhow::Result<Stack> {
    let mut stack = Stack {
        dir: tempfile::tempdir_in(data)?,
        backend: free_port(),
        mcp: free_port(),
        gateway: free_port(),
        children: Vec::new(),
        http: maitred::http_client::new()?,
    };
    let backend = stack.command(&["backend"], "backend")?.spawn()?;
    stack.children.push(backend);
    stack.wait_ready(stack.backend, "/readyz").await?;
    let mcp = stack.command(&["mcp"], "mcp")?.spawn()?;
    stack.children.push(mcp);
    stack.wait_ready(stack.mcp, "/readyz").await?;
    Ok(stack)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = Options::from_args();
    println!("# gateway overhead ({})", machine());
    let data: PathBuf = std::env::temp_dir();
    let mut stack = start(&data).await?;
    // Each phase starts its own gateway and upstream, and stops them when done.
    let result = async {
        streaming(&mut stack, &options).await?;
        idle_streams(&mut stack, &options).await?;
        one_tool(&mut stack, &options).await
    }
    .await;
    if result.is_err() || std::env::args().any(|a| a == "--keep-logs") {
        let kept = stack.dir.keep();
        eprintln!("the processes' logs are kept in {}", kept.display());
    }
    result
}
