//! The chat stream through a real nginx running `deploy/nginx.conf` (ports and
//! upstreams rewritten into a temporary copy): events pass unbuffered, keep-alive
//! comments flow, a dropped stream resumes through the proxy, and the public URLs
//! the roles advertise are the proxy's. Needs Debian's nginx, so it is ignored by a
//! plain `cargo test`; `scripts/check-proxy` installs nginx and runs it.

use std::net::{Ipv4Addr, TcpListener as StdListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use maitred::http::client_ip::{ForwardedHeader, TrustedProxies};
use maitred_scripted_llm::{Script, Turn};
use serde_json::Value;

use crate::helpers::{Database, Llm, TestApp};

const FRAGMENTS: usize = 20;
const PACE: Duration = Duration::from_millis(50);
const FIRST_TOKEN_DELAY: Duration = Duration::from_millis(500);
const KEEPALIVE: Duration = Duration::from_millis(150);

/// nginx started on a copy of `deploy/nginx.conf`, stopped when dropped.
pub(crate) struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    pub backend: String,
    pub gateway: String,
    pub mcp: String,
}

/// A port free now (bound and released): nginx cannot be told to take port 0.
fn free_port() -> u16 {
    StdListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn nginx_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MAITRED_NGINX") {
        return path.into();
    }
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| "nginx".into())
}

/// `text` with `from` replaced, which must be there: a renamed upstream or port in
/// the shipped file fails here rather than testing something else.
fn replace(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "deploy/nginx.conf no longer has {from:?}"
    );
    text.replace(from, to)
}

impl Nginx {
    /// Ports chosen first: the roles must be told their public URLs before they start.
    pub(crate) fn ports() -> [u16; 3] {
        [free_port(), free_port(), free_port()]
    }

    fn start(ports: [u16; 3], app: &TestApp) -> Self {
        let settings = &app.settings;
        Self::start_upstreams(
            ports,
            [
                &[settings.backend.endpoint.port],
                &[settings.gateway.endpoint.port],
                &[settings.mcp.endpoint.port],
            ],
        )
    }

    /// Listens on `ports` (backend, gateway, mcp) and balances each over its
    /// `upstreams`, round-robin as the shipped file has it.
    pub(crate) fn start_upstreams(ports: [u16; 3], upstreams: [&[u16]; 3]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/nginx.conf");
        let mut config = std::fs::read_to_string(shipped).unwrap();
        for ((name, listen, port), role_ports) in [
            ("backend", 8080, ports[0]),
            ("gateway", 8081, ports[1]),
            ("mcp", 8082, ports[2]),
        ]
        .into_iter()
        .zip(upstreams)
        {
            let servers: Vec<String> = role_ports
                .iter()
                .map(|p| format!("server 127.0.0.1:{p};"))
                .collect();
            config = replace(
                &config,
                &format!("server {name}:{listen};"),
                &servers.join("\n        "),
            );
            config = replace(
                &config,
                &format!("listen {listen};"),
                &format!("listen 127.0.0.1:{port};"),
            );
        }
        // Logs and temporary files in the test's directory: it may run unprivileged.
        let d = dir.path().display();
        config = replace(
            &config,
            "error_log /dev/stderr warn;",
            &format!("error_log {d}/error.log info;"),
        );
        config = replace(
            &config,
            "access_log /dev/stdout maitred;",
            &format!(
                "access_log {d}/access.log maitred;\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;"
            ),
        );
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config).unwrap();
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf)
            .arg("-g")
            .arg(format!("daemon off; pid {d}/nginx.pid;"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run nginx ({e}); scripts/check-proxy installs Debian's")
            });
        let mut nginx = Self {
            child,
            backend: format!("http://127.0.0.1:{}", ports[0]),
            gateway: format!("http://127.0.0.1:{}", ports[1]),
            mcp: format!("http://127.0.0.1:{}", ports[2]),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ports
            .iter()
            .all(|p| TcpStream::connect((Ipv4Addr::LOCALHOST, *p)).is_ok())
        {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                panic!("nginx exited with {status}: {}", nginx.error_log());
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not start: {}",
                nginx.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        nginx
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master takes its workers down; SIGKILL would leave them listening.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One block of the stream, with when it arrived.
#[derive(Debug)]
struct Arrival {
    at: Duration,
    /// `None` for a comment (a keep-alive).
    event: Option<String>,
    id: Option<u64>,
    data: Value,
}

/// Reads `response` to its end (or `stop_after` tokens), timing every block from `start`.
async fn arrivals(
    mut response: reqwest::Response,
    start: Instant,
    stop_after: Option<usize>,
) -> Vec<Arrival> {
    let mut buffer = String::new();
    let mut blocks = Vec::new();
    let mut tokens = 0;
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("a chunk within 30 s")
            .unwrap();
        let Some(chunk) = chunk else { return blocks };
        let at = start.elapsed();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut arrival = Arrival {
                at,
                event: None,
                id: None,
                data: Value::Null,
            };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    arrival.event = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("id:") {
                    arrival.id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    arrival.data = serde_json::from_str(v.trim()).unwrap_or(Value::Null);
                }
            }
            let done = arrival.event.as_deref() == Some("done");
            if arrival.event.as_deref() == Some("token") {
                tokens += 1;
            }
            blocks.push(arrival);
            if done || stop_after.is_some_and(|n| tokens >= n) {
                return blocks;
            }
        }
    }
}

fn tokens(blocks: &[Arrival]) -> Vec<&Arrival> {
    blocks
        .iter()
        .filter(|b| b.event.as_deref() == Some("token"))
        .collect()
}

fn text(blocks: &[Arrival]) -> String {
    tokens(blocks)
        .iter()
        .map(|b| b.data["text"].as_str().unwrap_or_default())
        .collect()
}

async fn ask(http: &reqwest::Client, base: &str, token: &str) -> (Instant, reqwest::Response) {
    let start = Instant::now();
    let response = http
        .post(format!("{base}/api/v1/resos/stream/chat"))
        .bearer_auth(token)
        // As browsers do: a proxy that compresses the stream (and so holds it back
        // to fill its buffer) is caught here.
        .header("accept-encoding", "gzip, deflate, br")
        .json(&serde_json::json!({ "question": "Say twenty words, slowly" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{base}");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert!(
        response.headers().get("content-encoding").is_none(),
        "the stream was compressed through {base}"
    );
    (start, response)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Debian's nginx: run by scripts/check-proxy"]
async fn nginx_passes_the_chat_stream_unbuffered_with_keepalives_and_resume() {
    let words: Vec<String> = (0..FRAGMENTS).map(|i| format!("w{i} ")).collect();
    let script = Script::repeat(
        Turn::text_fragments(words.clone())
            .paced(PACE)
            .first_token_delay(FIRST_TOKEN_DELAY),
    );
    let ports = Nginx::ports();
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        // The public URLs are nginx's, as in docker-compose; the roles reach each other
        // directly.
        s.identity.internal_url = Some(s.backend.endpoint.public_url.clone());
        s.gateway.mcp_url = Some(s.mcp_resource());
        s.backend.endpoint.public_url = format!("http://127.0.0.1:{}", ports[0]);
        s.gateway.endpoint.public_url = format!("http://127.0.0.1:{}", ports[1]);
        s.mcp.endpoint.public_url = format!("http://127.0.0.1:{}", ports[2]);
        s.trusted_proxies =
            TrustedProxies::parse(&["127.0.0.1".into()], ForwardedHeader::XForwardedFor).unwrap();
        s.gateway.sse_keepalive = KEEPALIVE;
    })
    .await;
    let nginx = Nginx::start(ports, &app);
    let http = maitred::http_client::streaming().unwrap();
    let token = app.chat_token().await;

    // Alternate direct and proxied questions, so both see the same warm system.
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        for (base, runs) in [
            (&app.gateway_url, &mut direct),
            (&nginx.gateway, &mut proxied),
        ] {
            let (start, response) = ask(&http, base, &token).await;
            let blocks = arrivals(response, start, None).await;
            assert_eq!(text(&blocks), words.concat(), "through {base}");
            runs.push(blocks);
        }
    }
    let ttft = |runs: &[Vec<Arrival>]| median(runs.iter().map(|b| tokens(b)[0].at).collect());
    let spread = |runs: &[Vec<Arrival>]| {
        median(
            runs.iter()
                .map(|b| {
                    let t = tokens(b);
                    t[t.len() - 1].at - t[0].at
                })
                .collect(),
        )
    };
    let (ttft_direct, ttft_nginx) = (ttft(&direct), ttft(&proxied));
    let (spread_direct, spread_nginx) = (spread(&direct), spread(&proxied));
    println!(
        "time to first token (median of 3, upstream delay {} ms): direct {:.1} ms, through nginx {:.1} ms",
        FIRST_TOKEN_DELAY.as_millis(),
        ms(ttft_direct),
        ms(ttft_nginx)
    );
    println!(
        "first to last of {FRAGMENTS} tokens paced {} ms: direct {:.1} ms, through nginx {:.1} ms",
        PACE.as_millis(),
        ms(spread_direct),
        ms(spread_nginx)
    );
    for blocks in &proxied {
        let arrived: Vec<f64> = tokens(blocks).iter().map(|t| ms(t.at)).collect();
        println!("token arrivals through nginx (ms): {arrived:.0?}");
    }

    // The first token is not held back: a generous bound, well under the stream's length.
    assert!(
        ttft_nginx < ttft_direct + Duration::from_millis(250),
        "through nginx the first token took {ttft_nginx:?}, directly {ttft_direct:?}"
    );
    for blocks in &proxied {
        let at: Vec<Duration> = tokens(blocks).iter().map(|t| t.at).collect();
        // Spread over time as the upstream paced them, not delivered at once at the end.
        let span = at[at.len() - 1] - at[0];
        assert!(
            span >= PACE * (FRAGMENTS as u32 - 1) / 2,
            "tokens bunched through nginx: {at:?}"
        );
        let apart = at.windows(2).filter(|w| w[1] - w[0] >= PACE / 3).count();
        assert!(
            apart >= (FRAGMENTS - 1) * 2 / 3,
            "only {apart} of {} gaps survived nginx: {at:?}",
            FRAGMENTS - 1
        );
        // Keep-alive comments flow while the model is quiet, before the first token.
        let first_token = blocks
            .iter()
            .position(|b| b.event.as_deref() == Some("token"))
            .unwrap();
        let pings = blocks[..first_token]
            .iter()
            .filter(|b| b.event.is_none())
            .count();
        assert!(
            pings >= 1,
            "no keep-alive through nginx before the first token"
        );
    }

    // A client that drops resumes through the proxy with Last-Event-ID, missing nothing.
    let (start, response) = ask(&http, &nginx.gateway, &token).await;
    let before = arrivals(response, start, Some(5)).await;
    let message_id = before[0].data["message_id"].as_str().unwrap().to_owned();
    let last_seen = before.iter().filter_map(|b| b.id).max().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resumed = http
        .get(format!(
            "{}/api/v1/resos/stream/chat/{message_id}",
            nginx.gateway
        ))
        .bearer_auth(&token)
        .header("last-event-id", last_seen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let after = arrivals(resumed, Instant::now(), None).await;
    let ids: Vec<u64> = before.iter().chain(&after).filter_map(|b| b.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "no event lost or repeated"
    );
    let whole = format!("{}{}", text(&before), text(&after));
    assert_eq!(whole, words.concat());
    assert_eq!(after.last().unwrap().event.as_deref(), Some("done"));

    // What the roles advertise through the proxy names the proxy, never a role's own port.
    let discovery: Value = http
        .get(format!(
            "{}/.well-known/openid-configuration",
            nginx.backend
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], nginx.backend.as_str());
    assert_eq!(
        discovery["token_endpoint"],
        format!("{}/oauth2/token", nginx.backend)
    );
    let metadata: Value = http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            nginx.mcp
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], format!("{}/mcp", nginx.mcp));
    assert_eq!(metadata["authorization_servers"][0], nginx.backend.as_str());
    let challenge = http
        .post(format!("{}/mcp", nginx.mcp))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(challenge.status(), 401);
    let www = challenge.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        www.contains(&format!(
            "resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            nginx.mcp
        )),
        "{www}"
    );
    // The login sends the browser to the proxy's issuer, back to the proxy's gateway.
    let login = maitred::http_client::new()
        .unwrap()
        .get(format!("{}/login", nginx.gateway))
        .send()
        .await
        .unwrap();
    let location = login.url().as_str().to_owned();
    assert!(
        location.starts_with(&format!("{}/oauth2/authorize", nginx.backend)),
        "{location}"
    );
    assert!(
        location.contains(&format!(
            "redirect_uri={}",
            url_encode(&format!("{}/login/callback", nginx.gateway))
        )),
        "{location}"
    );
    // Metrics are for the internal network, not the proxy's clients.
    for base in [&nginx.backend, &nginx.gateway, &nginx.mcp] {
        let status = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404, "{base}/metrics");
    }

    drop(nginx);
    app.stop().await;
}

fn url_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
