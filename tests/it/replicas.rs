//! Three gateway replicas, one backend and one MCP role (each its own `maitred`
//! process), PostgreSQL and a private Redis, behind a real nginx doing plain
//! round-robin. What a person does on any replica reaches the answer wherever it
//! runs: resume, cancel, approve, their limits; and when a replica is killed, another
//! takes its answers over and goes on with them (`resumed`), keeping every token that
//! was shown.
//!
//! Needs Debian's nginx and redis-server: `scripts/check-replicas` installs them and
//! runs this file.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use maitred::db::Db;
use maitred_scripted_llm::{Script, ScriptedLlm, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, SseEvent, SseReader, answer};
use crate::nginx::Nginx;
use crate::process::{Maitred, ask, free_port};
use crate::token_exchange::person_tokens_at;

/// A private Redis on a port of its own, gone with the test.
struct Redis {
    child: Child,
    pub url: String,
}

impl Redis {
    async fn start(dir: &Path) -> Self {
        let port = free_port();
        let binary =
            std::env::var("MAITRED_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let child = Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-server ({e}); scripts/check-replicas installs it")
            });
        // Owned at once, so a failure below still stops it.
        let redis = Self {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return redis;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not start");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn paced(n: usize, prefix: &str, pace_ms: u64) -> Turn {
    Turn::text_fragments((0..n).map(|i| format!("{prefix}{i} ")))
        .paced(Duration::from_millis(pace_ms))
}

fn booking(guest: &str) -> ToolCallSpec {
    let date = (chrono::Utc::now().date_naive() + chrono::Duration::days(3)).to_string();
    ToolCallSpec::new(
        "book_1",
        "resos__createBooking",
        json!({ "date": date, "time": "18:00", "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) }).to_string(),
    )
}

/// The gateways' shared setup: every answer's turn in the order the test asks.
fn script() -> Script {
    Script::new([
        // 1. resumed through another replica
        paced(40, "r", 20),
        // 2. cancelled through another replica
        paced(400, "c", 20),
        // 3. approved on a third replica
        Turn::tool_calls([booking("Replica Rita")]),
        Turn::text("Booked Rita."),
        // 3b. two people at once, on two replicas, each booking as themselves
        Turn::tool_calls([booking("Replica Oscar Guest")]),
        Turn::tool_calls([booking("Replica Ada Guest")]),
        Turn::text("Booked."),
        Turn::text("Booked."),
        // 4. the person's limit of two running answers, counted across replicas
        paced(400, "l", 20),
        paced(400, "m", 20),
        // 5. the replica running it is killed; another goes on with it
        paced(400, "k", 20),
        Turn::text("The end of k."),
    ])
}

/// Three gateways (leases of 3 s), a backend and an MCP role, on PostgreSQL and a
/// private Redis, behind nginx.
pub(crate) struct Cluster {
    _redis: Redis,
    pub(crate) nginx: Nginx,
    pub(crate) gateways: Vec<Maitred>,
    /// Each gateway's own URL.
    pub(crate) urls: Vec<String>,
    _roles: Vec<Maitred>,
    pub(crate) db: Db,
    pub(crate) token: String,
    pub(crate) http: reqwest::Client,
    /// The backend's and the gateway's public URLs (through nginx).
    pub(crate) public_backend: String,
    pub(crate) public_gateway: String,
}

async fn cluster(llm: &ScriptedLlm, data: &Path) -> Cluster {
    cluster_with(
        llm,
        data,
        "[limits]\nconcurrent_generations = 2\nrequests_per_minute = 600\n",
        &[],
    )
    .await
}

/// The cluster, its gateways configured by `gateway_toml` and `gateway_env`.
pub(crate) async fn cluster_with(
    llm: &ScriptedLlm,
    data: &Path,
    gateway_toml: &str,
    gateway_env: &[(&'static str, String)],
) -> Cluster {
    let Some(Database::Postgres(base)) = Database::postgres() else {
        panic!("the replicas need PostgreSQL: set TEST_DATABASE_URL");
    };
    let database_url = Database::Postgres(base).url(data).await;
    let redis = Redis::start(data).await;
    let listen = Nginx::ports();
    let (backend_port, mcp_port) = (free_port(), free_port());
    let gateway_ports = [free_port(), free_port(), free_port()];
    let public = |port: u16| format!("http://127.0.0.1:{port}");
    let config = data.join("gateway.toml");
    std::fs::write(&config, gateway_toml).unwrap();
    // Every process knows every role by the proxy's public URLs, as behind nginx.
    let common = vec![
        ("DATABASE_URL", database_url),
        ("MAITRED_BACKEND_URL", public(listen[0])),
        ("MAITRED_GATEWAY_URL", public(listen[1])),
        ("MAITRED_MCP_URL", public(listen[2])),
        ("MAITRED_ISSUER_INTERNAL_URL", public(backend_port)),
        ("MAITRED_MCP_BACKEND_URL", public(backend_port)),
        ("MAITRED_BACKEND_PORT", backend_port.to_string()),
        ("MAITRED_MCP_PORT", mcp_port.to_string()),
    ];
    let backend = Maitred::start(&["backend"], data, &common, &[&public(backend_port)]).await;
    let mcp = Maitred::start(&["mcp"], data, &common, &[&public(mcp_port)]).await;
    let mut gateways = Vec::new();
    for port in gateway_ports {
        let mut env = common.clone();
        env.extend([
            ("MAITRED_GATEWAY_PORT", port.to_string()),
            (
                "MAITRED_GATEWAY_MCP_URL",
                format!("{}/mcp", public(mcp_port)),
            ),
            ("MAITRED_REDIS_URL", redis.url.clone()),
            ("MAITRED_ANSWER_LEASE", "3".to_owned()),
            ("MAITRED_LLM_BASE_URL", llm.base_url()),
            ("MAITRED_LLM_MODEL", "scripted".to_owned()),
            ("MAITRED_GATEWAY_CONFIG", config.display().to_string()),
        ]);
        env.extend(gateway_env.iter().cloned());
        gateways.push(Maitred::start(&["gateway"], data, &env, &[&public(port)]).await);
    }
    let nginx = Nginx::start_upstreams(listen, [&[backend_port], &gateway_ports, &[mcp_port]]);
    let db = Db::connect(&common[0].1).await.unwrap();
    // A person who may book, signed in at the issuer through the proxy: a chat-only
    // client's writes are refused downstream (issue 37, finding 2).
    let password = maitred::identity::dev::DevCredentials::load(data)
        .unwrap()
        .users["operator"]
        .password
        .clone();
    let token = person_tokens_at(
        &maitred::http_client::new().unwrap(),
        &public(listen[0]),
        &format!("{}/login/callback", public(listen[1])),
        "operator",
        &password,
        "openid profile chat.read chat.write",
    )
    .await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    Cluster {
        _redis: redis,
        nginx,
        gateways,
        urls: gateway_ports.iter().map(|p| public(*p)).collect(),
        _roles: vec![backend, mcp],
        db,
        token,
        http: maitred::http_client::new().unwrap(),
        public_backend: public(listen[0]),
        public_gateway: public(listen[1]),
    }
}

impl Cluster {
    async fn resume(&self, replica: usize, message_id: &str, last: u64) -> SseReader {
        let response = self
            .http
            .get(format!(
                "{}/api/v1/resos/stream/chat/{message_id}",
                self.urls[replica]
            ))
            .bearer_auth(&self.token)
            .header("last-event-id", last.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            200,
            "resuming at replica {replica}:\n{}",
            self.gateways[replica].log()
        );
        SseReader::new(response)
    }

    async fn post(&self, base: &str, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{base}{path}"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

async fn until_tokens(stream: &mut SseReader, n: usize) -> Vec<SseEvent> {
    let mut events = Vec::new();
    while events
        .iter()
        .filter(|e: &&SseEvent| e.event == "token")
        .count()
        < n
    {
        events.push(stream.next().await.expect("a token"));
    }
    events
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().filter_map(|e| e.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs nginx, redis-server and PostgreSQL: run by scripts/check-replicas"]
async fn replicas_share_running_answers_and_lose_nothing_when_one_dies() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut c = cluster(&llm, data.path()).await;
    let proxy = c.nginx.gateway.clone();

    // 1. Started on A, resumed through B: every event exactly once, in order.
    let mut on_a = ask(&c.http, &c.urls[0], &c.token, "Tell me about r").await;
    let mut seen = until_tokens(&mut on_a, 5).await;
    drop(on_a);
    let message_id = seen[0].data["message_id"].as_str().unwrap().to_owned();
    let last = seen.last().unwrap().id.unwrap();
    seen.extend(c.resume(1, &message_id, last).await.rest().await);
    let expected: Vec<u64> = (1..=seen.len() as u64).collect();
    assert_eq!(ids(&seen), expected, "every event once, in order");
    assert_eq!(answer(&seen).split_whitespace().count(), 40);
    assert_eq!(seen.last().unwrap().data["finish_reason"], "stop");

    // 2. Cancelled through B: the upstream request at A stops at once.
    let mut on_a = ask(&c.http, &c.urls[0], &c.token, "Talk of c").await;
    let events = until_tokens(&mut on_a, 3).await;
    let message_id = events[0].data["message_id"].as_str().unwrap().to_owned();
    assert_eq!(llm.open_streams(), 1);
    let sent = Instant::now();
    let cancelled = c
        .post(
            &c.urls[1],
            &format!("/api/v1/resos/chat/{message_id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(cancelled.status(), 200);
    while llm.open_streams() > 0 {
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "the upstream was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let stopped = sent.elapsed();
    println!("cancel through another replica stopped the upstream in {stopped:?}");
    assert!(
        stopped < Duration::from_millis(100),
        "the upstream stopped {stopped:?} after the cancel"
    );
    let rest = on_a.rest().await;
    assert_eq!(rest.last().unwrap().data["finish_reason"], "cancelled");

    // 3. An approval asked on A, answered on C: the tool runs on A; a second
    //    decision, through the proxy (another replica), is refused.
    let mut on_a = ask(&c.http, &c.urls[0], &c.token, "Book Rita").await;
    let asked = on_a.until("approval_required").await;
    let approval = asked.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/resos/chat/approvals/{approval}");
    let decided = c.post(&c.urls[2], &path, json!({ "approve": true })).await;
    assert_eq!(decided.status(), 200);
    let rest = on_a.rest().await;
    let result = rest.iter().find(|e| e.event == "tool_result").unwrap();
    assert_eq!(result.data["status"], "ok", "{:?}", result.data);
    for _ in 0..3 {
        let again = c.post(&proxy, &path, json!({ "approve": false })).await;
        assert_eq!(again.status(), 404, "one decision only");
    }

    // 3b. Two people at once, one on A and one on B, each signed in at the issuer:
    //     every write reaches the backend as the person whose answer made it (each
    //     replica exchanges the person's token for the MCP server; nothing is shared).
    let redirect = format!("{}/login/callback", c.public_gateway);
    let credentials = maitred::identity::dev::DevCredentials::load(data.path()).unwrap();
    let mut people = Vec::new();
    for (replica, username) in [(0, "operator"), (1, "admin")] {
        let password = credentials.users[username].password.clone();
        let tokens = person_tokens_at(
            &c.http,
            &c.public_backend,
            &redirect,
            username,
            &password,
            "openid profile chat.read chat.write",
        )
        .await;
        let token = tokens["access_token"].as_str().unwrap().to_owned();
        people.push((replica, username, token));
    }
    let asks = people.iter().map(|(replica, username, token)| {
        let (http, url) = (&c.http, &c.urls[*replica]);
        async move {
            let mut stream = ask(http, url, token, "Book my guest").await;
            let mut events = stream.until("approval_required").await;
            let id = events.last().unwrap().data["id"]
                .as_str()
                .unwrap()
                .to_owned();
            let decided = http
                .post(format!("{url}/api/v1/resos/chat/approvals/{id}"))
                .bearer_auth(token)
                .json(&json!({ "approve": true }))
                .send()
                .await
                .unwrap();
            assert_eq!(decided.status(), 200);
            events.extend(stream.rest().await);
            (*username, events)
        }
    });
    for (username, events) in futures::future::join_all(asks).await {
        let call = events.iter().find(|e| e.event == "tool_call").unwrap();
        let result = events.iter().find(|e| e.event == "tool_result").unwrap();
        assert_eq!(result.data["status"], "ok", "{username}: {:?}", result.data);
        let (person, actors): (String, String) =
            sqlx::query_as("SELECT person, actors FROM write_audit WHERE tool_call_id = $1")
                .bind(call.data["id"].as_str().unwrap())
                .fetch_one(c.db.pool())
                .await
                .unwrap();
        assert_eq!(person, username, "the write of {username}'s answer");
        assert_eq!(actors, r#"["maitred-mcp","maitred-gateway"]"#);
    }

    // 4. Two answers running (on A and on B): a third, on C, is over the limit.
    let mut running = Vec::new();
    for (replica, question) in [(0, "l"), (1, "m")] {
        let mut stream = ask(&c.http, &c.urls[replica], &c.token, question).await;
        let events = until_tokens(&mut stream, 1).await;
        let id = events[0].data["message_id"].as_str().unwrap().to_owned();
        running.push((replica, id, stream));
    }
    let third = c
        .post(
            &c.urls[2],
            "/api/v1/resos/stream/chat",
            json!({ "question": "n" }),
        )
        .await;
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    for (replica, id, mut stream) in running {
        let path = format!("/api/v1/resos/chat/{id}/cancel");
        c.post(&c.urls[(replica + 1) % 3], &path, json!({})).await;
        let rest = stream.rest().await;
        assert_eq!(rest.last().unwrap().data["finish_reason"], "cancelled");
    }

    // 5. kill -9 of A mid-answer: within the lease another replica takes the answer
    //    over; a viewer on B gets `resumed`, the rest of the answer and `done`, and
    //    the stored answer holds every token it was sent.
    let mut on_a = ask(&c.http, &c.urls[0], &c.token, "Talk of k").await;
    let events = until_tokens(&mut on_a, 10).await;
    drop(on_a);
    let message_id = events[0].data["message_id"].as_str().unwrap().to_owned();
    let mut on_b = c.resume(1, &message_id, 0).await;
    let mut watched = until_tokens(&mut on_b, 12).await;
    c.gateways[0].kill();
    let killed = Instant::now();
    watched.extend(on_b.rest().await);
    let took_over = killed.elapsed();
    println!("a killed replica's answer was taken over and finished by another in {took_over:?}");
    let names: Vec<&str> = watched.iter().map(|e| e.event.as_str()).collect();
    assert!(!names.contains(&"error"), "{names:?}");
    let resumed = watched.iter().position(|e| e.event == "resumed").unwrap();
    assert_eq!(watched[resumed].data["attempt"], 1);
    let done = watched.last().unwrap();
    assert_eq!(done.event, "done");
    assert_eq!(done.data["finish_reason"], "stop");
    let expected: Vec<u64> = (1..=watched.len() as u64).collect();
    assert_eq!(ids(&watched), expected, "every event once, in order");
    assert!(
        took_over < Duration::from_secs(15),
        "within the lease and a sweep: {took_over:?}"
    );
    let shown = answer(&watched[..resumed]);
    let text = answer(&watched);
    assert!(
        text.starts_with(&shown) && text.ends_with("The end of k."),
        "{text:?}"
    );
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT status, content FROM chat_messages WHERE message_id = $1 AND role = 'assistant' ORDER BY seq",
    )
    .bind(&message_id)
    .fetch_all(c.db.pool())
    .await
    .unwrap();
    let statuses: Vec<&str> = stored.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(statuses, ["interrupted", "complete"], "{stored:?}");
    assert_eq!(
        stored[0].1, shown,
        "every token a viewer received before is stored"
    );
    let kept: String = stored.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(kept, text, "the stream and the store agree");
    c.db.close().await;
    llm.stop().await;
}
