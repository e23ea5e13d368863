//! Who a token is about decides what it may write: a client is told apart from a
//! person by what the token says (`subject_type`, or `sub == client_id`), never by
//! its lack of roles. A chat-only client stays chat-only however far its token is
//! exchanged; a person without roles reads but never writes; the MCP role never
//! lends its own token to a person.

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, TestApp, of};
use crate::mcp::{MODERN, call, connect, open_day, text};
use crate::on_both_databases;
use crate::token_exchange::{claims_of, exchange_as, signed};

on_both_databases!(
    a_chat_only_client_gets_no_write_scope_downstream,
    a_person_without_roles_may_not_write_at_the_backend,
    a_chat_only_client_cannot_book_through_the_chat,
);

fn booking(name: &str) -> Value {
    json!({ "date": open_day(4), "time": "19:00", "people": 2,
            "guest": { "name": name, "email": "guest@example.net" } })
}

async fn bookings_of(app: &TestApp, guest: &str) -> Value {
    app.get_json(
        &format!("/bookings?customQuery=guest.name = '{guest}'"),
        &app.backend_token().await,
    )
    .await
}

/// The attack of the report: `maitred-cli`'s token exchanged by the gateway, then by
/// the MCP role, used to book a table at the backend.
async fn a_chat_only_client_gets_no_write_scope_downstream(database: &Database) {
    let app = TestApp::spawn(database).await;
    let cli = app.chat_token().await;
    assert_eq!(claims_of(&cli)["subject_type"], "client");

    let (status, hop1) = exchange_as(&app, "maitred-gateway", &cli, &[]).await;
    assert_eq!(status, 200, "{hop1}");
    assert_eq!(
        hop1["scope"], "mcp.read",
        "only what its registration holds"
    );
    let hop1 = hop1["access_token"].as_str().unwrap().to_owned();
    let claims = claims_of(&hop1);
    assert_eq!(claims["sub"], "maitred-cli");
    assert_eq!(claims["subject_type"], "client");
    // Asked for by name, a write is refused.
    let (status, body) =
        exchange_as(&app, "maitred-gateway", &cli, &[("scope", "mcp.write")]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope"))
    );

    let (status, hop2) = exchange_as(
        &app,
        "maitred-mcp",
        &hop1,
        &[("resource", &app.settings.backend_resource())],
    )
    .await;
    assert_eq!(status, 200, "{hop2}");
    assert_eq!(hop2["scope"], "backend.read");
    let hop2 = hop2["access_token"].as_str().unwrap().to_owned();
    // It reads, and it cannot book.
    assert_eq!(app.get("/customers?limit=1", &hop2).await.status(), 200);
    let refused = app
        .post_json("/bookings", &hop2, &booking("Cli Cora"))
        .await;
    assert_eq!(refused.status(), 403);
    assert_eq!(bookings_of(&app, "Cli Cora").await, json!([]));

    // A client whose registration holds nothing at the MCP server's audience gets
    // nothing there through the gateway.
    let gateway_own = app.token("maitred-gateway", &[]).await;
    let (status, body) = exchange_as(&app, "maitred-mcp", &gateway_own, &[]).await;
    assert_eq!(status, 400, "{body}");
    app.stop().await;
}

/// A token about a person that names no roles (an external issuer that sends none):
/// it reads, it never writes, whether it comes to the backend directly or through
/// the MCP role, which must not lend it its own token.
async fn a_person_without_roles_may_not_write_at_the_backend(database: &Database) {
    let app = TestApp::spawn(database).await;
    let now = chrono::Utc::now().timestamp();
    let roleless = signed(
        &app,
        &json!({ "iss": app.url, "sub": "stranger", "aud": app.settings.backend_resource(),
                 "exp": now + 120, "iat": now, "scope": "backend.read backend.write",
                 "client_id": "maitred-web" }),
    )
    .await;
    assert_eq!(app.get("/customers?limit=1", &roleless).await.status(), 200);
    let refused = app
        .post_json("/bookings", &roleless, &booking("Roleless Rory"))
        .await;
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("stranger may read but not write"),
        "{body}"
    );
    // A token that says it is about a person is one, whatever its `sub`.
    let posing = signed(
        &app,
        &json!({ "iss": app.url, "sub": "svc", "client_id": "svc", "subject_type": "person",
                 "aud": app.settings.backend_resource(), "exp": now + 120, "iat": now,
                 "scope": "backend.write" }),
    )
    .await;
    assert_eq!(
        app.post_json("/bookings", &posing, &booking("Roleless Rory"))
            .await
            .status(),
        403
    );
    assert_eq!(bookings_of(&app, "Roleless Rory").await, json!([]));
    // A client's own token (`sub == client_id`) writes as its registration allows.
    let own = app.backend_token().await;
    assert_eq!(
        app.post_json("/bookings", &own, &booking("Client Clara"))
            .await
            .status(),
        200
    );

    // The same person at the MCP server: the booking is not made as `maitred-mcp`.
    let at_mcp = signed(
        &app,
        &json!({ "iss": app.url, "sub": "stranger", "aud": app.mcp_url, "exp": now + 120,
                 "iat": now, "scope": "mcp.read mcp.write", "client_id": "maitred-desktop" }),
    )
    .await;
    let client = connect(&app, &at_mcp, MODERN).await;
    let created = call(
        &client,
        "createBooking",
        json!({ "date": open_day(4), "time": "19:00", "people": 2,
                "guestName": "Roleless Rory", "guestEmail": "rory@example.org" }),
    )
    .await;
    assert_eq!(created.is_error, Some(true), "{}", text(&created));
    assert_eq!(bookings_of(&app, "Roleless Rory").await, json!([]));
    app.stop().await;
}

/// End to end: a curl user's question whose model books a table, with the gateway's
/// policy and approvals out of the way; the write is refused downstream.
async fn a_chat_only_client_cannot_book_through_the_chat(database: &Database) {
    let guest = "Curl Carla";
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_cli_1",
            "resos__createBooking",
            json!({ "date": open_day(5), "time": "18:00", "people": 2,
                    "guestName": guest, "guestEmail": "carla@example.org" })
            .to_string(),
        )]),
        Turn::text("Done."),
    ]);
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |s| {
        let mut server = crate::helpers::own_mcp_server(s, "resos");
        server.read_only_tools = vec!["createBooking".into()];
        s.gateway.file.mcp_servers = vec![server];
    })
    .await;
    let cli = app.chat_token().await;
    let events = app.ask(&cli, "Book Carla in", None).await.rest().await;
    let result = &of(&events, "tool_result")[0];
    assert_ne!(result["status"], "ok", "{events:?}");
    assert_eq!(bookings_of(&app, guest).await, json!([]));
    app.stop().await;
}
