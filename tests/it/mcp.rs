//! The MCP role with a real MCP client (rmcp's), in both protocol revisions, and
//! its resource-server side over raw HTTP.

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

const LEGACY: ProtocolVersion = ProtocolVersion::V_2025_11_25;
pub(crate) const MODERN: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// An MCP client speaking `version` with a bearer token.
pub(crate) async fn connect(app: &TestApp, token: &str, version: ProtocolVersion) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url.clone()).auth_header(token),
    );
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("maitred-tests", "1"),
    )
    .with_protocol_version(version.clone());
    let mode = if version == LEGACY {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![version],
        }
    };
    info.serve_with_lifecycle(transport, mode)
        .await
        .expect("connect to the MCP server")
}

pub(crate) async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.expect("tools/call")
}

pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn open_day(days: i64) -> String {
    let mut date = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    if chrono::Datelike::weekday(&date) == chrono::Weekday::Mon {
        date += chrono::Duration::days(1);
    }
    date.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_client_lists_and_calls_tools_in_both_revisions() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let mut names_seen = Vec::new();
    for version in [LEGACY, MODERN] {
        let client = connect(&app, &token, version.clone()).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(info.protocol_version, version);
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "getCustomers",
                "getCustomerById",
                "getFeedback",
                "getFeedbackById",
                "getOpeningHours",
                "getOpeningHoursById",
                "getTables",
                "getBookings",
                "getBookingById",
                "getAvailableDates",
                "getAvailableTimes",
                "findAvailability",
                "getMonthReport",
                "createBooking",
                "updateBooking",
                "addBookingNote",
            ]
        );
        for tool in &tools {
            let annotations = tool.annotations.as_ref().expect("annotations");
            let writes =
                ["createBooking", "updateBooking", "addBookingNote"].contains(&tool.name.as_ref());
            assert_eq!(annotations.read_only_hint, Some(!writes), "{}", tool.name);
            assert_eq!(annotations.open_world_hint, Some(false));
            assert!(
                tool.output_schema.is_some(),
                "{} has no output schema",
                tool.name
            );
            assert_eq!(tool.input_schema["type"], "object");
            assert!(
                tool.description.as_ref().is_some_and(|d| d.len() > 60),
                "{}",
                tool.name
            );
        }
        let update = tools.iter().find(|t| t.name == "updateBooking").unwrap();
        assert_eq!(
            update.annotations.as_ref().unwrap().destructive_hint,
            Some(true)
        );
        assert_eq!(
            update.annotations.as_ref().unwrap().idempotent_hint,
            Some(true)
        );
        let customers = tools.iter().find(|t| t.name == "getCustomers").unwrap();
        let description = customers.description.as_deref().unwrap();
        assert!(
            description.contains("bookingCount (integer)") && description.contains("LIKE"),
            "{description}"
        );

        let result = call(&client, "getCustomers", json!({ "limit": 1 })).await;
        assert_eq!(result.is_error, Some(false));
        let structured = result.structured_content.clone().unwrap();
        assert_eq!(structured["returned"], 1);
        assert!(structured["total"].as_u64().unwrap() >= 50, "{structured}");
        assert!(
            text(&result).contains("\"total\""),
            "a text copy for text-only clients"
        );

        let filtered = call(
            &client,
            "getCustomers",
            json!({ "customQuery": "bookingCount > 2 AND email LIKE '%@example.com'" }),
        )
        .await;
        let items = filtered.structured_content.unwrap()["items"]
            .as_array()
            .unwrap()
            .clone();
        assert!(!items.is_empty());
        assert!(items.iter().all(|c| c["bookingCount"].as_i64() > Some(2)));
        names_seen = names;
        client.cancel().await.unwrap();
    }
    assert_eq!(names_seen.len(), 16);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookings_made_through_mcp_are_in_the_backend_and_errors_say_what_to_do() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, MODERN).await;
    let date = open_day(3);

    let times = call(
        &client,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let times = times.structured_content.unwrap()["times"]
        .as_array()
        .unwrap()
        .clone();
    let time = times.last().unwrap().as_str().unwrap().to_owned();
    let created = call(
        &client,
        "createBooking",
        json!({ "date": date, "time": time, "people": 2, "guestName": "Grace Hopper", "guestEmail": "grace@example.org", "comment": "By the window" }),
    )
    .await;
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    let booking = created.structured_content.unwrap();
    let id = booking["_id"].as_str().unwrap();
    let via_api = app
        .get_json(&format!("/bookings/{id}"), &app.backend_token().await)
        .await;
    assert_eq!(via_api["guest"]["name"], "Grace Hopper");
    assert_eq!(via_api["comment"], "By the window");

    let note = call(
        &client,
        "addBookingNote",
        json!({ "id": id, "text": "VIP, knows the chef" }),
    )
    .await;
    assert_eq!(note.structured_content.unwrap()["visibility"], "internal");
    let approved = call(
        &client,
        "updateBooking",
        json!({ "id": id, "status": "approved" }),
    )
    .await;
    assert_eq!(approved.structured_content.unwrap()["status"], "approved");
    let refused = call(
        &client,
        "updateBooking",
        json!({ "id": id, "status": "left" }),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("allowed"), "{}", text(&refused));

    // The same table again at the same time: taken, with the nearest free times named.
    let table = booking["tables"][0]["_id"].as_str().unwrap();
    let taken = call(
        &client,
        "createBooking",
        json!({ "date": date, "time": time, "people": 2, "guestName": "Alan Turing", "tableIds": [table] }),
    )
    .await;
    assert_eq!(taken.is_error, Some(true));
    let message = text(&taken);
    assert!(
        message.contains("nearest free times") && message.contains("offer them"),
        "{message}"
    );

    let missing = call(
        &client,
        "getBookingById",
        json!({ "id": "000000000000000000000000" }),
    )
    .await;
    assert_eq!(missing.is_error, Some(true));
    assert!(text(&missing).contains("not found"), "{}", text(&missing));
    let bad_filter = call(
        &client,
        "getCustomers",
        json!({ "customQuery": "1=1; DROP TABLE customers" }),
    )
    .await;
    assert_eq!(bad_filter.is_error, Some(true));
    assert!(text(&bad_filter).contains("field"), "{}", text(&bad_filter));

    // Protocol errors: an unknown tool, and arguments that do not fit the schema.
    for (tool, arguments) in [
        ("deleteEverything", json!({})),
        ("getCustomers", json!({ "limit": "ten" })),
        ("getCustomers", json!({ "limitt": 10 })),
        (
            "getAvailableTimes",
            json!({ "date": "next friday", "people": 2 }),
        ),
        (
            "createBooking",
            json!({ "date": date, "time": "7pm", "people": 2, "guestName": "X Y" }),
        ),
    ] {
        let params = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(arguments.as_object().cloned().unwrap());
        let error = client.call_tool(params).await.expect_err(tool);
        let rmcp::ServiceError::McpError(data) = error else {
            panic!("{tool}: expected a JSON-RPC error, got {error:?}");
        };
        assert_eq!(data.code.0, -32602, "{tool}: {}", data.message);
    }
    client.cancel().await.unwrap();
    app.stop().await;
}

/// A raw JSON-RPC POST to the MCP endpoint.
pub(crate) async fn post(
    app: &TestApp,
    token: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request = app
        .http
        .post(&app.mcp_url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

pub(crate) fn initialize() -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_server_challenges_and_discovery_leads_to_a_token() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let response = post(&app, None, None, initialize()).await;
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains("scope=\"mcp.read mcp.write\""),
        "{challenge}"
    );
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("resource_metadata in the challenge")
        .to_owned();

    // Follow the chain as an MCP client would: PRM → authorization server → token.
    let metadata: Value = app
        .http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], app.mcp_url);
    assert_eq!(
        metadata["scopes_supported"],
        json!(["mcp.read", "mcp.write"])
    );
    let root: Value = app
        .http
        .get(format!(
            "{}/.well-known/oauth-protected-resource",
            app.settings.mcp.endpoint.public_url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root, metadata);
    let issuer = metadata["authorization_servers"][0].as_str().unwrap();
    let server: Value = app
        .http
        .get(format!("{issuer}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token: Value = app
        .http
        .post(server["token_endpoint"].as_str().unwrap())
        .basic_auth("maitred-gateway", Some(app.secret("maitred-gateway")))
        .form(&[
            ("grant_type", "client_credentials"),
            ("resource", &app.mcp_url),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = token["access_token"].as_str().unwrap();
    let response = post(&app, Some(token), None, initialize()).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));

    // A token for the backend is not a token for the MCP server.
    let backend_token = app.backend_token().await;
    let response = post(&app, Some(&backend_token), None, initialize()).await;
    assert_eq!(response.status(), 401);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );

    // Another Host is refused (DNS rebinding), even with a good token.
    let response = app
        .http
        .post(&app.mcp_url)
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_reads_but_cannot_book() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let reader = app.token("maitred-gateway", &[("scope", "mcp.read")]).await;
    let client = connect(&app, &reader, MODERN).await;
    let tables = call(&client, "getTables", json!({})).await;
    assert_eq!(tables.is_error, Some(false));
    let params = CallToolRequestParams::new("createBooking").with_arguments(
        json!({ "date": open_day(2), "time": "19:00", "people": 2, "guestName": "No Scope" })
            .as_object()
            .cloned()
            .unwrap(),
    );
    let error = client
        .call_tool(params)
        .await
        .expect_err("a write with mcp.read only");
    let chain = format!("{error:?}");
    assert!(
        chain.contains("insufficient_scope") || chain.contains("mcp.write"),
        "{chain}"
    );
    client.cancel().await.unwrap();

    // On the wire: 403 with the scope it needs.
    let response = app
        .http
        .post(&app.mcp_url)
        .bearer_auth(&reader)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "createBooking")
        .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "createBooking", "arguments": { "date": open_day(2), "time": "19:00", "people": 2, "guestName": "No Scope" },
            "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp.write\""),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let bookings = app
        .get_json(
            "/bookings?customQuery=guest.name = 'No Scope'",
            &app.backend_token().await,
        )
        .await;
    assert_eq!(bookings, json!([]), "nothing was written");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_answers_only_the_subject_that_started_it() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let owner = app.token("maitred-gateway", &[]).await;
    // A second, equally valid subject: a token the issuer's own key signed for "intruder".
    let (kid, private): (String, String) =
        sqlx::query_as("SELECT kid, private_key FROM signing_keys LIMIT 1")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid);
    let now = chrono::Utc::now().timestamp();
    let intruder = jsonwebtoken::encode(
        &header,
        &json!({ "iss": app.url, "sub": "intruder", "aud": app.mcp_url, "exp": now + 300, "iat": now, "scope": "mcp.read mcp.write" }),
        &EncodingKey::from_ed_der(&base64::Engine::decode(&base64::engine::general_purpose::STANDARD, private).unwrap()),
    )
    .unwrap();

    let response = post(&app, Some(&owner), None, initialize()).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    assert_eq!(
        post(&app, Some(&owner), Some(&session), list.clone())
            .await
            .status(),
        200
    );
    let stolen = post(&app, Some(&intruder), Some(&session), list.clone()).await;
    assert_eq!(stolen.status(), 403);
    let body: Value = stolen.json().await.unwrap();
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("another subject")
    );
    // The intruder's own session works.
    let own = post(&app, Some(&intruder), None, initialize()).await;
    assert_eq!(own.status(), 200);
    // After the owner ends the session, it is gone for everyone.
    let deleted = app
        .http
        .delete(&app.mcp_url)
        .bearer_auth(&owner)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(
        post(&app, Some(&owner), Some(&session), list)
            .await
            .status(),
        404
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_is_down_or_slow_is_unavailable_and_then_recovers() {
    let mut app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, MODERN).await;
    assert_eq!(
        call(&client, "getTables", json!({})).await.is_error,
        Some(false)
    );

    app.stop_backend().await;
    let down = tokio::time::timeout(
        Duration::from_secs(10),
        call(&client, "getTables", json!({})),
    )
    .await
    .expect("answered, not hung");
    assert_eq!(down.is_error, Some(true));
    assert!(text(&down).contains("unavailable"), "{}", text(&down));

    // Slow: something holds the port but never answers; the configured 2 s timeout applies.
    let port = app.settings.backend.endpoint.port;
    let black_hole = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = black_hole.accept().await {
            held.push(socket);
        }
    });
    let slow = tokio::time::timeout(
        Duration::from_secs(10),
        call(&client, "getTables", json!({})),
    )
    .await
    .expect("answered within the timeout, not hung");
    assert_eq!(slow.is_error, Some(true));
    assert!(
        text(&slow).contains("did not answer within 2 s"),
        "{}",
        text(&slow)
    );
    hold.abort();
    let _ = hold.await;

    app.start_backend().await;
    let back = call(&client, "getTables", json!({})).await;
    assert_eq!(back.is_error, Some(false), "{}", text(&back));
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_stops_accepting_the_mcp_token_gets_a_fresh_one() {
    let mut app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, MODERN).await;
    // Warm up: the MCP role now holds a cached backend token.
    assert_eq!(
        call(&client, "getTables", json!({})).await.is_error,
        Some(false)
    );

    // The issuer's keys are replaced: every token signed before is now refused by
    // the backend, the MCP role's cached one included.
    app.stop_backend().await;
    sqlx::query("DELETE FROM signing_keys")
        .execute(app.db.pool())
        .await
        .unwrap();
    app.start_backend().await;
    let result = call(&client, "getTables", json!({})).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_tools_over_stdio_for_desktop_clients() {
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;

    let app = TestApp::spawn(&Database::Sqlite).await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_maitred"));
    command
        .args(["mcp", "--stdio"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("MAITRED_DATA_DIR", app.data_dir())
        .env("MAITRED_BACKEND_URL", &app.url)
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("stdio server");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 16);
    let result = client
        .call_tool(
            CallToolRequestParams::new("getTables")
                .with_arguments(json!({ "limit": 2 }).as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(result.structured_content.unwrap()["returned"], 2);
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_reach_the_issuer_at_its_internal_address() {
    // Behind a proxy or in a cluster, the issuer's public URL may not resolve where the
    // roles run: tokens name the public URL, keys and tokens are fetched internally.
    let app = TestApp::spawn_with(&Database::Sqlite, |settings| {
        let real = settings.backend.endpoint.public_url.clone();
        settings.backend.endpoint.public_url = "http://maitred.invalid".to_owned();
        settings.identity.internal_url = Some(real.clone());
        settings.mcp.backend_url = real;
    })
    .await;
    let token = app.token("maitred-gateway", &[]).await;
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            token.split('.').nth(1).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["iss"], "http://maitred.invalid");
    let client = connect(&app, &token, MODERN).await;
    let result = call(&client, "getTables", json!({ "limit": 1 })).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    client.cancel().await.unwrap();
    app.stop().await;
}

/// A tool name is the client's text: one with a line break in it must not write a
/// second, forged line into the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_name_cannot_forge_a_log_line() {
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;

    let app = TestApp::spawn(&Database::Sqlite).await;
    let log = app.data_dir().join("mcp-stdio.log");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_maitred"));
    command
        .args(["mcp", "--stdio"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("MAITRED_DATA_DIR", app.data_dir())
        .env("MAITRED_BACKEND_URL", &app.url)
        .env("RUST_LOG", "info");
    let (process, _) = TokioChildProcess::builder(command)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let client = ().serve(process).await.expect("stdio server");
    let forged = "getTables\n2026-11-24T00:00:00.000000Z  INFO FORGED admin approved everything";
    let _ = client
        .call_tool(CallToolRequestParams::new(forged.to_owned()))
        .await;
    client.cancel().await.unwrap();
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(
        written.contains("FORGED"),
        "the call was logged at all: {written}"
    );
    for line in written.lines() {
        assert!(
            !line.trim_start().starts_with("2026-11-24T00:00:00.000000Z"),
            "a forged line: {line:?}\n{written}"
        );
    }
    app.stop().await;
}

/// Finding 5 of the third security round: one caller opened 60 legacy sessions.
/// Past `MAITRED_MCP_SESSIONS_PER_CALLER` an `initialize` is refused (429) and opens
/// nothing; another caller still opens theirs, up to `MAITRED_MCP_SESSIONS_IN_ALL`;
/// closing one frees its place. Requests in a session, and modern requests without
/// one, go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sessions_are_capped_per_caller_and_in_all() {
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.mcp.caps.sessions_per_caller = 3;
        s.mcp.caps.sessions_in_all = 4;
    })
    .await;
    let token = app.token("maitred-gateway", &[]).await;
    let burst =
        futures::future::join_all((0..8).map(|_| post(&app, Some(&token), None, initialize())))
            .await;
    let mut sessions = Vec::new();
    for response in burst {
        match response.status().as_u16() {
            200 => sessions.push(
                response.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            ),
            429 => {
                assert!(response.headers().contains_key("retry-after"));
                let body: Value = response.json().await.unwrap();
                assert_eq!(body["error"], "too_many_sessions", "{body}");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(sessions.len(), 3);
    // The sessions it holds still answer.
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    assert_eq!(
        post(&app, Some(&token), Some(&sessions[0]), list.clone())
            .await
            .status(),
        200
    );

    // A delegated token opens sessions as its client (the gateway): at its cap.
    let operator = crate::delegation::mcp_token_of(&app, "operator").await;
    assert_eq!(
        post(&app, Some(&operator), None, initialize())
            .await
            .status(),
        429
    );
    // Another caller: one more in all, then none.
    let now = chrono::Utc::now().timestamp();
    let caller = |name: &str| {
        json!({ "iss": app.url, "sub": name, "client_id": name, "aud": app.mcp_url,
                "exp": now + 300, "iat": now, "scope": "mcp.read" })
    };
    let other = crate::token_exchange::signed(&app, &caller("other-app")).await;
    assert_eq!(
        post(&app, Some(&other), None, initialize()).await.status(),
        200
    );
    let third = crate::token_exchange::signed(&app, &caller("third-app")).await;
    assert_eq!(
        post(&app, Some(&third), None, initialize()).await.status(),
        429
    );

    // Closing one of the first caller's frees a place, for anyone.
    let closed = app
        .http
        .delete(&app.mcp_url)
        .bearer_auth(&token)
        .header("mcp-session-id", &sessions[0])
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    assert_eq!(
        post(&app, Some(&third), None, initialize()).await.status(),
        200
    );
    app.stop().await;
}
