//! `/metrics` on every role, read as a scraper reads it, and one trace id carried
//! from a caller through the MCP role to the backend.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use maitred::metrics::{CONTENT_TYPE, Metrics};
use maitred::trace_context::{TRACEPARENT, TRACERESPONSE, TraceContext};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, RequestParamsMeta,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

use crate::helpers::{Database, Llm, SseReader, TestApp, serve};
use crate::on_both_databases;

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One sample of an OpenMetrics page: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a page (label values here never contain `,` or `"`).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').expect("label=value");
                    (key.to_owned(), value.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().expect("a number"),
            }
        })
        .collect()
}

/// The value of the series `name` with exactly `labels`, if the page has it.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == wanted)
        .map(|s| s.value)
}

/// `GET <base>/metrics` without credentials: the samples, after checking the answer.
async fn scrape(http: &reqwest::Client, base: &str) -> Vec<Sample> {
    let response = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], CONTENT_TYPE);
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    parse(&text)
}

pub(crate) async fn connect(
    app: &TestApp,
    token: &str,
    headers: HashMap<String, String>,
) -> Client {
    let headers = headers
        .into_iter()
        .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
        .collect();
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url.clone())
            .auth_header(token)
            .custom_headers(headers),
    );
    let version = ProtocolVersion::V_2026_07_28;
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("maitred-tests", "1"),
    )
    .with_protocol_version(version.clone())
    .serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![version],
        },
    )
    .await
    .expect("connect to the MCP server")
}

pub(crate) async fn call(client: &Client, tool: &str, traceparent: Option<&str>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(json!({ "limit": 1 }).as_object().cloned().unwrap());
    if let Some(traceparent) = traceparent {
        params.set_traceparent(traceparent);
    }
    client.call_tool(params).await.expect("tools/call")
}

async fn every_role_serves_its_metrics(database: &Database) {
    let app = TestApp::spawn(database).await;
    let token = app.backend_token().await;

    // Backend: a matched route, a route with an id, an unmatched path.
    assert_eq!(app.get("/customers?limit=1", &token).await.status(), 200);
    assert_eq!(
        app.get("/customers/no-such-customer", &token)
            .await
            .status(),
        404
    );
    let unmatched = app
        .http
        .get(format!("{}/no/such/path", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unmatched.status(), 404);
    let backend = scrape(&app.http, &app.url).await;
    let requests = "maitred_http_requests_total";
    assert_eq!(
        value(
            &backend,
            requests,
            &[
                ("method", "GET"),
                ("route", "/api/v1/resos/customers"),
                ("status", "200")
            ]
        ),
        Some(1.0),
        "{backend:?}"
    );
    assert_eq!(
        value(
            &backend,
            requests,
            &[
                ("method", "GET"),
                ("route", "/api/v1/resos/customers/{id}"),
                ("status", "404")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &backend,
            requests,
            &[("method", "GET"), ("route", "unmatched"), ("status", "404")]
        ),
        Some(1.0)
    );
    // The raw paths never become label values.
    assert!(
        !backend.iter().any(|s| s
            .labels
            .values()
            .any(|v| v.contains("no-such") || v.contains("/no/such"))),
        "{backend:?}"
    );
    assert_eq!(
        value(
            &backend,
            "maitred_http_request_duration_seconds_count",
            &[("method", "GET"), ("route", "/api/v1/resos/customers")]
        ),
        Some(1.0)
    );
    // The scrape itself is in flight while the page is written.
    assert_eq!(
        value(&backend, "maitred_http_requests_in_flight", &[]),
        Some(1.0)
    );
    let max = value(&backend, "maitred_db_pool_max_connections", &[]).unwrap();
    let open = value(&backend, "maitred_db_pool_connections", &[]).unwrap();
    assert!(max > 0.0 && open >= 1.0 && open <= max, "{open} of {max}");

    // MCP: one call that works, one with arguments that do not fit.
    let mcp_token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &mcp_token, HashMap::new()).await;
    assert_eq!(call(&client, "getTables", None).await.is_error, Some(false));
    let invalid = client
        .call_tool(
            CallToolRequestParams::new("getTables")
                .with_arguments(json!({ "limit": "many" }).as_object().cloned().unwrap()),
        )
        .await;
    assert!(invalid.is_err(), "{invalid:?}");
    client.cancel().await.unwrap();
    let mcp_base = app.mcp_url.trim_end_matches("/mcp").to_owned();
    let mcp = scrape(&app.http, &mcp_base).await;
    let calls = "maitred_mcp_tool_calls_total";
    assert_eq!(
        value(&mcp, calls, &[("tool", "getTables"), ("outcome", "ok")]),
        Some(1.0),
        "{mcp:?}"
    );
    assert_eq!(
        value(
            &mcp,
            calls,
            &[("tool", "getTables"), ("outcome", "invalid")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &mcp,
            "maitred_mcp_tool_call_duration_seconds_count",
            &[("tool", "getTables"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &mcp,
            "maitred_mcp_backend_requests_total",
            &[("method", "GET"), ("status", "2xx")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &mcp,
            "maitred_mcp_backend_token_requests_total",
            &[("reason", "first"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
    assert!(
        value(
            &mcp,
            requests,
            &[("method", "POST"), ("route", "/mcp"), ("status", "200")]
        )
        .is_some_and(|n| n >= 2.0),
        "{mcp:?}"
    );

    // Gateway: its own registry, not the others'.
    let health = app
        .http
        .get(format!("{}/healthz", app.gateway_url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let gateway = scrape(&app.http, &app.gateway_url).await;
    assert_eq!(
        value(
            &gateway,
            requests,
            &[("method", "GET"), ("route", "/healthz"), ("status", "200")]
        ),
        Some(1.0),
        "{gateway:?}"
    );
    assert!(
        !gateway.iter().any(|s| s
            .labels
            .get("route")
            .is_some_and(|r| r.starts_with("/mcp") || r == "/api/v1/resos/customers")),
        "the gateway's page has another role's series: {gateway:?}"
    );
    app.stop().await;
}

/// A stand-in backend that records each request's `traceparent` and answers 503.
pub(crate) async fn recording_backend() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new().fallback({
        let seen = seen.clone();
        move |headers: HeaderMap| async move {
            seen.lock().unwrap().push(
                headers
                    .get(TRACEPARENT)
                    .map(|v| v.to_str().unwrap().to_owned()),
            );
            StatusCode::SERVICE_UNAVAILABLE
        }
    });
    (serve(app).await, seen)
}

/// What the stand-in backend received since the last look, parsed.
pub(crate) fn received(seen: &Mutex<Vec<Option<String>>>) -> Vec<TraceContext> {
    seen.lock()
        .unwrap()
        .drain(..)
        .map(|value| {
            let value = value.expect("a backend request without traceparent");
            TraceContext::parse(&value).unwrap_or_else(|| panic!("invalid traceparent {value}"))
        })
        .collect()
}

async fn a_tool_calls_trace_reaches_the_backend(database: &Database) {
    let (backend, seen) = recording_backend().await;
    let app = TestApp::spawn_with(database, |settings| {
        settings.mcp.backend_url = backend;
    })
    .await;
    let token = app.token("maitred-gateway", &[]).await;
    let caller = TraceContext::parse(CALLER).unwrap();

    // `_meta.traceparent` names the caller's span.
    let client = connect(&app, &token, HashMap::new()).await;
    let result = call(&client, "getTables", Some(CALLER)).await;
    assert_eq!(result.is_error, Some(true), "the stand-in answers 503");
    let sent = received(&seen);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].trace_id(), caller.trace_id());
    assert_ne!(
        sent[0].span_id(),
        caller.span_id(),
        "the MCP role's span is the backend's parent, not the caller's"
    );

    // No `_meta`: the HTTP request's traceparent header.
    let other = TraceContext::new_root();
    let headed = connect(
        &app,
        &token,
        HashMap::from([("traceparent".to_owned(), other.header_value())]),
    )
    .await;
    call(&headed, "getTables", None).await;
    let sent = received(&seen);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].trace_id(), other.trace_id());
    assert_ne!(sent[0].span_id(), other.span_id());

    // `_meta` wins over the header; an invalid `_meta` value falls back to it.
    call(&headed, "getTables", Some(CALLER)).await;
    call(&headed, "getTables", Some("00-not-a-trace-01")).await;
    let sent = received(&seen);
    assert_eq!(
        sent.iter().map(|t| t.trace_id()).collect::<Vec<_>>(),
        [caller.trace_id(), other.trace_id()]
    );

    // Neither: a new trace, still sent.
    call(&client, "getTables", None).await;
    let sent = received(&seen);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].trace_id() != caller.trace_id() && sent[0].trace_id() != other.trace_id());

    headed.cancel().await.unwrap();
    client.cancel().await.unwrap();
    let mcp = scrape(&app.http, app.mcp_url.trim_end_matches("/mcp")).await;
    assert_eq!(
        value(
            &mcp,
            "maitred_mcp_tool_calls_total",
            &[("tool", "getTables"), ("outcome", "unavailable")]
        ),
        Some(5.0),
        "{mcp:?}"
    );
    assert_eq!(
        value(
            &mcp,
            "maitred_mcp_backend_requests_total",
            &[("method", "GET"), ("status", "5xx")]
        ),
        Some(5.0)
    );
    app.stop().await;
}

on_both_databases!(
    every_role_serves_its_metrics,
    a_tool_calls_trace_reaches_the_backend
);

/// The span of `response` in the trace, from its `traceresponse` header.
pub(crate) fn served_by(response: &reqwest::Response) -> TraceContext {
    let value = response.headers()[TRACERESPONSE.as_str()].to_str().unwrap();
    TraceContext::parse(value).unwrap_or_else(|| panic!("invalid traceresponse {value}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_continues_its_callers_trace_or_starts_one() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let caller = TraceContext::parse(CALLER).unwrap();
    let healthz = format!("{}/healthz", app.url);

    let continued = app
        .http
        .get(&healthz)
        .header("traceparent", CALLER)
        .send()
        .await
        .unwrap();
    let span = served_by(&continued);
    assert_eq!(span.trace_id(), caller.trace_id());
    assert_ne!(span.span_id(), caller.span_id());

    for hostile in [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
    ] {
        let response = app
            .http
            .get(&healthz)
            .header("traceparent", hostile)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_ne!(
            served_by(&response).trace_id(),
            caller.trace_id(),
            "{hostile}"
        );
    }
    let a = served_by(&app.http.get(&healthz).send().await.unwrap());
    let b = served_by(&app.http.get(&healthz).send().await.unwrap());
    assert_ne!(
        a.trace_id(),
        b.trace_id(),
        "each request without a caller is its own trace"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_read_the_requests_trace_context() {
    let router = maitred::http::middleware::wrap(
        Router::new().route(
            "/trace",
            get(|trace: TraceContext| async move {
                format!("{} {:?}", trace.header_value(), trace.parent_id())
            }),
        ),
        &Metrics::new(),
        &Default::default(),
        &Default::default(),
    );
    // Served as the roles are: with the peer's address, here a trusted one (loopback).
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let url = format!("http://{}/trace", listener.local_addr().unwrap());
    let with_peers = router
        .clone()
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, with_peers).await.unwrap() });
    let http = maitred::http_client::new().unwrap();
    let response = http
        .get(&url)
        .header("traceparent", CALLER)
        .send()
        .await
        .unwrap();
    let span = served_by(&response);
    let body = response.text().await.unwrap();
    let caller = TraceContext::parse(CALLER).unwrap();
    assert_eq!(
        body,
        format!("{} Some({:?})", span.header_value(), caller.span_id()),
        "the handler sees the request's own span, a child of the caller's"
    );
    // Served without the peer's address, no caller can be vouched for: a new trace.
    let anonymous = format!("{}/trace", serve(router).await);
    let response = http
        .get(&anonymous)
        .header("traceparent", CALLER)
        .send()
        .await
        .unwrap();
    let span = served_by(&response);
    assert_ne!(span.trace_id(), caller.trace_id());
    assert_eq!(
        response.text().await.unwrap(),
        format!("{} None", span.header_value())
    );
}

/// What the gateway's own series say after a question that needed a retry, a tool
/// call and a fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_counts_answers_models_and_tools() {
    use maitred::settings::gateway_file::FallbackConfig;
    use maitred_scripted_llm::{Script, ToolCallSpec, Turn};

    let script = Script::new([
        Turn::status(500),
        Turn::tool_calls([ToolCallSpec::new("t1", "resos__getTables", "{}")]),
        Turn::text("There are 20 tables.").usage(100, 7),
        Turn::status(429).retry_after(30),
        Turn::text("From the fallback."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        let primary = s.gateway.llm.clone().unwrap();
        s.gateway.file.fallbacks = vec![FallbackConfig {
            base_url: primary.base_url,
            model: "scripted-fallback".into(),
            api_key: None,
            api_key_env: None,
            tool_calls: Default::default(),
            profile: Default::default(),
        }];
    })
    .await;
    let token = app.chat_token().await;
    for question in ["How many tables?", "And now?"] {
        let events = app.ask(&token, question, None).await.rest().await;
        assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    }
    let gateway = scrape(&app.http, &app.gateway_url).await;
    let get = |name: &str, labels: &[(&str, &str)]| value(&gateway, name, labels);
    assert_eq!(
        get(
            "maitred_gateway_generations_total",
            &[("finish_reason", "stop")]
        ),
        Some(2.0)
    );
    assert_eq!(get("maitred_gateway_generations_active", &[]), Some(0.0));
    assert_eq!(get("maitred_gateway_stream_viewers", &[]), Some(0.0));
    assert_eq!(
        get("maitred_gateway_time_to_first_token_seconds_count", &[]),
        Some(2.0)
    );
    assert!(get("maitred_gateway_tokens_streamed_total", &[]).unwrap() >= 2.0);
    assert!(
        get(
            "maitred_gateway_model_usage_tokens_total",
            &[("kind", "completion")]
        )
        .unwrap()
            >= 7.0
    );
    assert_eq!(
        get(
            "maitred_gateway_model_errors_total",
            &[("model", "scripted"), ("kind", "http_5xx")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "maitred_gateway_model_errors_total",
            &[("model", "scripted"), ("kind", "rate_limited")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "maitred_gateway_model_retries_total",
            &[("model", "scripted")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "maitred_gateway_model_fallbacks_total",
            &[("from", "scripted"), ("to", "scripted-fallback")]
        ),
        Some(1.0)
    );
    let tool = [("server", "resos"), ("tool", "getTables"), ("status", "ok")];
    assert_eq!(get("maitred_gateway_tool_calls_total", &tool), Some(1.0));
    assert_eq!(
        get("maitred_gateway_tool_call_duration_seconds_count", &tool),
        Some(1.0)
    );
    assert_eq!(
        get(
            "maitred_gateway_circuit_breaker_state",
            &[("server", "resos")]
        ),
        Some(0.0)
    );
    assert_eq!(get("maitred_gateway_approvals_waiting", &[]), Some(0.0));
    assert_eq!(
        get(
            "maitred_gateway_mcp_token_requests_total",
            &[("reason", "first"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "maitred_http_requests_total",
            &[
                ("method", "POST"),
                ("route", "/api/v1/resos/stream/chat"),
                ("status", "200")
            ]
        ),
        Some(2.0)
    );
    app.stop().await;
}

/// A question's `traceparent` goes with its tool calls through the MCP role to the
/// backend: one question, one trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_questions_trace_reaches_the_backend_through_mcp() {
    use maitred_scripted_llm::{Script, ToolCallSpec, Turn};

    let (backend, seen) = recording_backend().await;
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("t1", "resos__getTables", "{}")]),
        Turn::text("The tables are unavailable."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.mcp.backend_url = backend;
    })
    .await;
    let token = app.chat_token().await;
    let response = app
        .http
        .post(format!("{}/api/v1/resos/stream/chat", app.gateway_url))
        .bearer_auth(&token)
        .header(TRACEPARENT, CALLER)
        .json(&json!({ "question": "Tables?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        served_by(&response).trace_id(),
        TraceContext::parse(CALLER).unwrap().trace_id()
    );
    let events = SseReader::new(response).rest().await;
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    let sent = received(&seen);
    assert!(!sent.is_empty(), "the backend was called");
    for trace in sent {
        assert_eq!(
            trace.trace_id(),
            TraceContext::parse(CALLER).unwrap().trace_id()
        );
    }
    app.stop().await;
}
