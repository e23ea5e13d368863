//! `tools/call getTables` through the MCP role, against the backend on SQLite:
//! throughput and latency percentiles at several concurrencies, beside the same
//! read made directly against the backend API (what the MCP hop adds).
//!
//!     cargo bench --bench mcp_tools_call [-- --calls 2000]

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot run its calls has nothing to report: failing loudly is right"
)]
#![expect(clippy::print_stdout, reason = "a benchmark prints its table")]
#![expect(
    clippy::disallowed_methods,
    reason = "the benchmark's own concurrent clients, not request code"
)]

use std::time::{Duration, Instant};

use maitred::app::Role;
use maitred::settings::{Settings, sqlite_url};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use tokio_util::sync::CancellationToken;

struct Stats {
    calls: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[index]
    }

    fn line(&self, what: &str, concurrency: usize) -> String {
        format!(
            "| {what} | {concurrency} | {} | {:.0} | {:.2} | {:.2} |",
            self.calls,
            self.calls as f64 / self.elapsed.as_secs_f64(),
            self.percentile(0.50).as_secs_f64() * 1000.0,
            self.percentile(0.99).as_secs_f64() * 1000.0,
        )
    }
}

/// Runs `calls` operations spread over `concurrency` workers, each timing its own.
async fn measure<F, Fut>(calls: usize, concurrency: usize, make: F) -> Stats
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Vec<Duration>> + Send + 'static,
{
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency).map(|w| tokio::spawn(make(w))).collect();
    let mut latencies = Vec::with_capacity(calls);
    for worker in workers {
        latencies.extend(worker.await.expect("worker"));
    }
    Stats {
        calls: latencies.len(),
        elapsed: started.elapsed(),
        latencies,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::args()
        .skip_while(|a| a != "--calls")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir()?;
    // The backend and MCP roles, wired as `main` wires them, on free ports.
    let settings = Settings::local(
        dir.path().to_owned(),
        sqlite_url(&dir.path().join("bench.db")),
    );
    let app = maitred::app::App::bind(settings, &[Role::Backend, Role::Mcp])
        .await?
        .start(CancellationToken::new())
        .await?;
    let settings = app.settings().clone();
    let http = maitred::http_client::new()?;

    let token = |client: &'static str| {
        let http = http.clone();
        let url = settings.backend.endpoint.public_url.clone();
        let secret = maitred::identity::dev::DevCredentials::load(&settings.data_dir)
            .ok()
            .and_then(|c| c.client_secret(client).map(str::to_owned))
            .unwrap_or_default();
        async move {
            let body: serde_json::Value = http
                .post(format!("{url}/oauth2/token"))
                .basic_auth(client, Some(secret))
                .form(&[("grant_type", "client_credentials")])
                .send()
                .await?
                .json()
                .await?;
            anyhow::Ok(body["access_token"].as_str().unwrap_or_default().to_owned())
        }
    };
    let mcp_token = token("maitred-gateway").await?;
    let backend_token = token("maitred-mcp").await?;
    let mcp_url = settings.mcp_resource();
    let tables_url = format!(
        "{}/api/v1/resos/tables",
        settings.backend.endpoint.public_url
    );

    println!(
        "{calls} calls per row; machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| path | concurrency | calls | calls/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    for concurrency in [1, 8, 32] {
        let per_worker = calls / concurrency;
        let direct = measure(calls, concurrency, |_| {
            let http = http.clone();
            let url = tables_url.clone();
            let token = backend_token.clone();
            async move {
                let mut latencies = Vec::with_capacity(per_worker);
                for _ in 0..per_worker {
                    let started = Instant::now();
                    let response = http
                        .get(&url)
                        .bearer_auth(&token)
                        .send()
                        .await
                        .expect("GET /tables");
                    assert!(response.status().is_success());
                    response.bytes().await.expect("body");
                    latencies.push(started.elapsed());
                }
                latencies
            }
        })
        .await;
        println!(
            "{}",
            direct.line("GET /tables (backend directly)", concurrency)
        );

        for (label, version) in [
            (
                "tools/call getTables, 2026-07-28",
                ProtocolVersion::V_2026_07_28,
            ),
            (
                "tools/call getTables, 2025-11-25 session",
                ProtocolVersion::V_2025_11_25,
            ),
        ] {
            let stats = measure(calls, concurrency, |_| {
                let url = mcp_url.clone();
                let token = mcp_token.clone();
                let version = version.clone();
                async move {
                    let transport = StreamableHttpClientTransport::with_client(
                        reqwest::Client::new(),
                        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
                    );
                    let mode = if version == ProtocolVersion::V_2025_11_25 {
                        ClientLifecycleMode::Initialize
                    } else {
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![version.clone()],
                        }
                    };
                    let client = ClientConfig::new(
                        ClientCapabilities::default(),
                        Implementation::new("bench", "1"),
                    )
                    .with_protocol_version(version)
                    .serve_with_lifecycle(transport, mode)
                    .await
                    .expect("connect");
                    let mut latencies = Vec::with_capacity(per_worker);
                    for _ in 0..per_worker {
                        let started = Instant::now();
                        let result = client
                            .call_tool(CallToolRequestParams::new("getTables"))
                            .await
                            .expect("tools/call");
                        assert_eq!(result.is_error, Some(false));
                        latencies.push(started.elapsed());
                    }
                    let _ = client.cancel().await;
                    latencies
                }
            })
            .await;
            println!("{}", stats.line(label, concurrency));
        }
    }
    app.stop().await;
    Ok(())
}
