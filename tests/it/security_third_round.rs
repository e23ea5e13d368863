//! The third round's findings owned here (issue 37: 1, 3, 4 and parts of 8): tokens
//! over plain http in production, a role budget in another case, a caller's trace
//! context at the public edges, a spent budget on `/v1/chat/completions`, and the
//! leeway of delegated tokens. Each is performed as an attacker would, and shown to
//! fail.

use std::time::Duration;

use maitred::app::{App, Role};
use maitred::settings::{GatewayFile, IdentityFile, Mode, Settings, plain_http_origin, sqlite_url};
use maitred_scripted_llm::Turn;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::helpers::{Database, Llm, SseReader, TestApp, of, test_settings};
use crate::token_exchange::{claims_of, exchange_as, person_tokens, signed};
use crate::{budgets, observability, openai_api};

/// An identity file with one user and one client, as production mode needs.
fn identity_file(dir: &std::path::Path) -> IdentityFile {
    let path = dir.join("maitred.toml");
    std::fs::write(
        &path,
        r#"
        [[identity.users]]
        username = "alice"
        password_hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA"

        [[identity.clients]]
        id = "maitred-cli"
        secret = "a-long-enough-secret-value"
        grants = ["client_credentials"]
        scopes = ["chat.read", "chat.write"]
        audiences = ["gateway"]
        "#,
    )
    .unwrap();
    IdentityFile::load(&path).unwrap()
}

fn production_in(dir: &std::path::Path) -> Settings {
    let mut settings = test_settings(dir.to_owned(), sqlite_url(&dir.join("maitred.db")));
    settings.mode = Mode::Production;
    settings.identity.file = identity_file(dir);
    settings
}

/// Finding 1: a `token_exchange` server (or its issuer) on plain http would get each
/// person's gateway token and the gateway's client secret in the clear, a
/// `user_oauth` server each person's own third-party token. Production mode refuses
/// to start so; the operator's acknowledgement of a cluster-internal origin (as
/// docker-compose's `http://backend:8080`) lets exactly that origin through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_refuses_to_send_tokens_over_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let settings = production_in(dir.path());
    let file = |server: &str| -> GatewayFile {
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, format!("[[mcp_servers]]\n{server}")).unwrap();
        GatewayFile::load(&path).unwrap()
    };
    let exchange = |url: &str, issuer: &str| {
        file(&format!(
            "name = \"far\"\nurl = \"{url}\"\n[mcp_servers.auth]\ntype = \"token_exchange\"\nclient_id = \"maitred-gateway\"\nclient_secret = \"the-gateway-secret\"\nissuer = \"{issuer}\"\n"
        ))
    };
    let attacks = [
        (
            exchange("http://tools.example.test/mcp", "https://id.example.test"),
            "MCP server far: url",
        ),
        (
            exchange("https://tools.example.test/mcp", "http://id.example.test"),
            "MCP server far: auth.issuer",
        ),
        (
            file(
                "name = \"notes\"\nurl = \"http://notes.example.test/mcp\"\n[mcp_servers.auth]\ntype = \"user_oauth\"\n",
            ),
            "MCP server notes: url",
        ),
    ];
    for (gateway_file, name) in attacks {
        let mut bound = App::bind(settings.clone(), Role::ALL).await.unwrap();
        bound.settings.gateway.file = gateway_file;
        let refused = format!(
            "{:#}",
            bound.start(CancellationToken::new()).await.err().unwrap()
        );
        assert!(
            refused.contains(name) && refused.contains("https"),
            "{refused}"
        );
        assert!(!refused.contains("the-gateway-secret"), "{refused}");
    }
    for (name, tweak) in [
        (
            "MAITRED_ISSUER_INTERNAL_URL",
            (|s: &mut Settings| s.identity.internal_url = Some("http://backend:8080".into()))
                as fn(&mut Settings),
        ),
        ("MAITRED_GATEWAY_MCP_URL", |s: &mut Settings| {
            s.gateway.mcp_url = Some("http://mcp:8082/mcp".into())
        }),
        ("MAITRED_MCP_BACKEND_URL", |s: &mut Settings| {
            s.mcp.backend_url = "http://backend:8080".into()
        }),
    ] {
        let mut bound = App::bind(settings.clone(), Role::ALL).await.unwrap();
        tweak(&mut bound.settings);
        let refused = format!(
            "{:#}",
            bound.start(CancellationToken::new()).await.err().unwrap()
        );
        assert!(refused.contains(name), "{refused}");
        // docker-compose's wiring, acknowledged by the operator, passes the check.
        let mut acknowledged = settings.clone();
        tweak(&mut acknowledged);
        acknowledged.plain_http_origins = ["http://backend:8080", "http://mcp:8082"]
            .map(|o| plain_http_origin(o).unwrap())
            .to_vec();
        acknowledged.check().unwrap();
    }
}

/// Finding 3: an ADMIN writes a team's budget as `role/operator`. Budgets matched
/// role names exactly and tokens say `OPERATOR`, so the cap (accepted, 200) bound
/// nobody and the team spent on. Now the role is one name in any case: the
/// operator's question is refused by the budget, which reads back as `OPERATOR`.
async fn a_role_budget_in_another_case_applies(database: &Database) {
    let app = budgets::app(
        database,
        Turn::text("Here you are.").usage(budgets::PROMPT as u32, budgets::COMPLETION as u32),
    )
    .await;
    let admin_token = budgets::token_of(&app, "admin").await;
    let operator = budgets::token_of(&app, "operator").await;
    // Room for no turn at all: a budget that applies refuses the first question.
    budgets::set_budget(
        &app,
        &admin_token,
        "/role/operator",
        json!({ "window": "daily", "max_tokens": 10 }),
    )
    .await;
    let events = app
        .ask(&operator, "How many tables?", None)
        .await
        .rest()
        .await;
    assert_eq!(budgets::finish(&events), "error", "{events:?}");
    assert_eq!(of(&events, "error")[0]["code"], "budget", "{events:?}");
    assert_eq!(of(&events, "budget")[0]["scope"], "role", "{events:?}");
    assert!(app.llm.as_ref().unwrap().requests().is_empty());
    // One budget, whatever case names it.
    for spelt in ["operator", "Operator", "OPERATOR"] {
        let (status, read) = budgets::admin(
            &app,
            reqwest::Method::GET,
            &format!("/role/{spelt}"),
            &admin_token,
            None,
        )
        .await;
        assert_eq!(status, 200, "{read}");
        assert_eq!(read["subject"], "OPERATOR");
    }
    let (_, all) = budgets::admin(&app, reqwest::Method::GET, "", &admin_token, None).await;
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    // A name no issuer's role could be compared with is refused, not stored.
    let (status, refused) = budgets::admin(
        &app,
        reqwest::Method::PUT,
        "/role/op%C3%A9rateur",
        &admin_token,
        Some(json!({ "window": "daily", "max_tokens": 10 })),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    // Removed in another case, it no longer applies.
    let (status, _) = budgets::admin(
        &app,
        reqwest::Method::DELETE,
        "/role/Operator",
        &admin_token,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let events = app
        .ask(&operator, "How many tables?", None)
        .await
        .rest()
        .await;
    assert_eq!(budgets::finish(&events), "stop", "{events:?}");
}

crate::on_both_databases!(a_role_budget_in_another_case_applies);

/// Finding 8, the budget on `/v1/chat/completions`: a spent budget was answered 502,
/// which the OpenAI SDKs retry at once (and again, and again). It is a 429 with
/// `Retry-After` until the budget's window renews, as on `/v1/responses`, and
/// streamed the same refusal is a rate limit too.
async fn a_spent_budget_on_chat_completions_is_a_429_with_retry_after(database: &Database) {
    let app = budgets::app(
        database,
        Turn::text("Here you are.").usage(budgets::PROMPT as u32, budgets::COMPLETION as u32),
    )
    .await;
    let admin_token = budgets::token_of(&app, "admin").await;
    let user = budgets::token_of(&app, "user").await;
    budgets::set_budget(
        &app,
        &admin_token,
        "/person/*",
        json!({ "window": "daily", "max_tokens": 10 }),
    )
    .await;
    let question = json!({
        "model": "maitred",
        "messages": [{ "role": "user", "content": "How many tables?" }],
    });
    // An SDK retries a 5xx by itself; asked again and again, it stays a 429.
    for _ in 0..3 {
        let spent = openai_api::post(&app, Some(&user), &question).await;
        let retry_after: u64 = spent.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        // Until the next UTC midnight: within a day.
        assert!((1..=86_400).contains(&retry_after), "{retry_after}");
        let error = openai_api::error(spent, 429).await;
        assert_eq!(error["code"], "rate_limit_exceeded", "{error}");
        assert_eq!(error["type"], "requests", "{error}");
    }
    let mut streamed = question.clone();
    streamed["stream"] = json!(true);
    let chunks = openai_api::chunks(openai_api::post(&app, Some(&user), &streamed).await).await;
    let error = chunks
        .iter()
        .find_map(|c| c.get("error"))
        .unwrap_or_else(|| panic!("no error in {chunks:?}"));
    assert_eq!(error["code"], "rate_limit_exceeded", "{error}");
    assert!(app.llm.as_ref().unwrap().requests().is_empty());
}

crate::on_both_databases!(a_spent_budget_on_chat_completions_is_a_429_with_retry_after);

/// Finding 8, delegated tokens' leeway: a token the MCP role got by exchange was
/// taken by the backend 30 s past its `exp`, beyond the short life the issuer gave
/// it (`MAITRED_DELEGATED_TOKEN_TTL`). It is refused the second its `exp` passes;
/// a token without `act` keeps the clock-skew leeway.
async fn a_delegated_token_is_refused_once_its_exp_has_passed(database: &Database) {
    let app = TestApp::spawn_with(database, |s| {
        s.identity.delegated_token_ttl = Duration::from_secs(1);
    })
    .await;
    let person = person_tokens(&app, "operator", "openid profile chat.read chat.write").await;
    let (status, hop1) = exchange_as(
        &app,
        "maitred-gateway",
        person["access_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{hop1}");
    let (status, hop2) = exchange_as(
        &app,
        "maitred-mcp",
        hop1["access_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{hop2}");
    let delegated = hop2["access_token"].as_str().unwrap();
    let exp = claims_of(delegated)["exp"].as_i64().unwrap();
    assert!(!claims_of(delegated)["act"].is_null());
    assert_eq!(app.get("/customers?limit=1", delegated).await.status(), 200);
    // Past its exp, well inside the 30 s other tokens get.
    let past = exp + 2 - chrono::Utc::now().timestamp();
    tokio::time::sleep(Duration::from_secs(u64::try_from(past.max(0)).unwrap())).await;
    let refused = app.get("/customers?limit=1", delegated).await;
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("invalid_token"), "{challenge}");
    // The MCP role's own token, as old, is still inside the leeway.
    let now = chrono::Utc::now().timestamp();
    let own = signed(
        &app,
        &json!({"iss": app.url, "sub": "maitred-mcp", "client_id": "maitred-mcp",
                "aud": app.settings.backend_resource(), "exp": now - 3, "iat": now - 300,
                "scope": "backend.read"}),
    )
    .await;
    assert_eq!(app.get("/customers?limit=1", &own).await.status(), 200);
    app.stop().await;
}

crate::on_both_databases!(a_delegated_token_is_refused_once_its_exp_has_passed);

/// The attacker's trace: its id chosen, and not sampled.
const FORGED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

/// Finding 4: any client picked its trace id and, with a `-00` flag, kept a whole
/// question out of the collector. Behind the deployment's proxy (loopback here,
/// trusted for `X-Forwarded-For`), a client from outside starts a new trace, recorded,
/// at the gateway and at the MCP role (header and `_meta` alike); the roles' own
/// calls to each other still continue one trace, and a trusted caller's is
/// continued as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outside_caller_neither_picks_the_trace_nor_turns_it_off() {
    use maitred::trace_context::{TRACEPARENT, TraceContext};
    use maitred_scripted_llm::{Script, ToolCallSpec};

    let forged = TraceContext::parse(FORGED).unwrap();
    let (backend, seen) = observability::recording_backend().await;
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("t1", "resos__getTables", "{}")]),
        Turn::text("The tables are unavailable."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.mcp.backend_url = backend;
        s.trusted_proxies = maitred::http::client_ip::TrustedProxies::parse(
            &["127.0.0.1".to_owned(), "::1".to_owned()],
            Default::default(),
        )
        .unwrap();
    })
    .await;
    let outside = "203.0.113.9";

    // A question from outside: a new, recorded trace, the same from the gateway to
    // the backend.
    let token = app.chat_token().await;
    let response = app
        .http
        .post(format!("{}/api/v1/resos/stream/chat", app.gateway_url))
        .bearer_auth(&token)
        .header(TRACEPARENT, FORGED)
        .header("x-forwarded-for", outside)
        .json(&json!({ "question": "Tables?" }))
        .send()
        .await
        .unwrap();
    let served = observability::served_by(&response);
    assert_ne!(served.trace_id(), forged.trace_id());
    assert!(served.sampled(), "a -00 from outside switches nothing off");
    let events = SseReader::new(response).rest().await;
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    let sent = observability::received(&seen);
    assert!(!sent.is_empty(), "the backend was called");
    for trace in &sent {
        assert_eq!(
            trace.trace_id(),
            served.trace_id(),
            "one question, one trace"
        );
        assert!(trace.sampled());
    }

    // Any endpoint of any role, unauthenticated.
    for base in [&app.gateway_url, &app.url] {
        let response = app
            .http
            .get(format!("{base}/healthz"))
            .header(TRACEPARENT, FORGED)
            .header("x-forwarded-for", outside)
            .send()
            .await
            .unwrap();
        let served = observability::served_by(&response);
        assert_ne!(served.trace_id(), forged.trace_id(), "{base}");
        assert!(served.sampled(), "{base}");
    }

    // An MCP client from outside, by header or by `_meta`.
    let mcp_token = app.token("maitred-gateway", &[]).await;
    let client = observability::connect(
        &app,
        &mcp_token,
        std::collections::HashMap::from([
            ("traceparent".to_owned(), FORGED.to_owned()),
            ("x-forwarded-for".to_owned(), outside.to_owned()),
        ]),
    )
    .await;
    observability::call(&client, "getTables", Some(FORGED)).await;
    observability::call(&client, "getTables", None).await;
    let sent = observability::received(&seen);
    assert_eq!(sent.len(), 2, "{sent:?}");
    for trace in &sent {
        assert_ne!(trace.trace_id(), forged.trace_id());
        assert!(trace.sampled());
    }
    client.cancel().await.unwrap();

    // A trusted caller (here: on this machine, no proxy in between) is continued,
    // its sampling decision too.
    let response = app
        .http
        .get(format!("{}/healthz", app.gateway_url))
        .header(TRACEPARENT, FORGED)
        .send()
        .await
        .unwrap();
    let served = observability::served_by(&response);
    assert_eq!(served.trace_id(), forged.trace_id());
    assert!(!served.sampled());
    let trusted = observability::connect(&app, &mcp_token, std::collections::HashMap::new()).await;
    observability::call(&trusted, "getTables", Some(FORGED)).await;
    let sent = observability::received(&seen);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].trace_id(), forged.trace_id());
    trusted.cancel().await.unwrap();
    app.stop().await;
}
