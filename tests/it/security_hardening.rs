//! The second round's smaller findings (issue 22, finding 6): a person and a client
//! of one name, a model reached over plain http in production, and a caller's own
//! request id. Each performed as an attacker would, and shown to fail.

use maitred::app::{App, Role};
use maitred::settings::{IdentityFile, LlmSettings, Mode, Settings, sqlite_url};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::browser::Browser;
use crate::helpers::{Database, TestApp, of, test_settings};

/// An identity file with one user and one client-credentials client.
fn identity_file(dir: &std::path::Path, username: &str, client: &str) -> IdentityFile {
    use argon2::password_hash::PasswordHasher;
    let hash = argon2::Argon2::default()
        .hash_password(b"correct horse battery")
        .unwrap()
        .to_string();
    let path = dir.join("maitred.toml");
    std::fs::write(
        &path,
        format!(
            r#"
            [[identity.users]]
            username = "{username}"
            password_hash = "{hash}"

            [[identity.clients]]
            id = "{client}"
            secret = "a-long-enough-secret-value"
            grants = ["client_credentials"]
            scopes = ["chat.read", "chat.write"]
            audiences = ["gateway"]
            "#
        ),
    )
    .unwrap();
    IdentityFile::load(&path).unwrap()
}

fn settings_in(dir: &std::path::Path) -> Settings {
    test_settings(dir.to_owned(), sqlite_url(&dir.join("maitred.db")))
}

/// Finding 6a, at the issuer: a client-credentials token's `sub` is the client's id,
/// so a person named `reporting` next to a client `reporting` would be one subject
/// with it (one owner of conversations). The identity provider refuses to start so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_cannot_be_named_like_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_in(dir.path());
    let db = maitred::app::open_database(&settings, true).await.unwrap();
    for username in ["reporting", "Reporting"] {
        settings.identity.file = identity_file(dir.path(), username, "reporting");
        let refused = maitred::app::backend_router(
            &settings,
            db.clone(),
            maitred::http_client::new().unwrap(),
        )
        .await
        .err()
        .unwrap();
        assert!(
            format!("{refused:#}").contains("cannot share a name"),
            "{refused:#}"
        );
    }
    settings.identity.file = identity_file(dir.path(), "alice", "reporting");
    assert!(
        maitred::app::backend_router(&settings, db.clone(), maitred::http_client::new().unwrap())
            .await
            .is_ok()
    );
    db.close().await;
}

/// Finding 6a, at the gateway: a client acting for no person owns its conversations
/// as `client:<id>`, a key no person's `sub` can be, whatever the issuer; people keep
/// their `sub`, so their conversations are theirs as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_conversations_are_kept_apart_from_peoples() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let client = app.chat_token().await;
    let who: Value = app
        .gateway_get("/api/auth/user", &client)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(who["subject"], "client:maitred-cli");

    let events = app.ask(&client, "hello", None).await.rest().await;
    let conversation = of(&events, "meta")[0]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (owner,): (String,) = sqlx::query_as("SELECT owner FROM conversations WHERE id = $1")
        .bind(&conversation)
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(owner, "client:maitred-cli");
    let listed: Value = app
        .gateway_get("/api/v1/resos/conversations", &client)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed[0]["id"], conversation.as_str());

    // A person sees none of it, and owns under their own name as before.
    let person = Browser::new().sign_in(&app, "user").await;
    let theirs: Value = person
        .browser
        .get(&format!("{}/api/v1/resos/conversations", app.gateway_url))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(theirs, serde_json::json!([]));
    let opened = person
        .browser
        .get(&format!(
            "{}/api/v1/resos/conversations/{conversation}",
            app.gateway_url
        ))
        .await;
    assert_eq!(opened.status(), 404);
    let status = person.browser.status(&app).await;
    assert_eq!(status["user"]["subject"], "user");
    app.stop().await;
}

/// Finding 6b: in production mode the gateway would send the model's API key (and
/// every conversation) over plain http to a remote host. It refuses to start so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_refuses_to_send_the_model_key_over_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_in(dir.path());
    settings.mode = Mode::Production;
    settings.identity.file = identity_file(dir.path(), "alice", "reporting");
    let model = |base_url: &str| LlmSettings {
        base_url: base_url.to_owned(),
        api_key: Some("sk-never-in-clear".into()),
        model: "gpt-4o-mini".into(),
        temperature: None,
        max_tokens: None,
        tool_calls: Default::default(),
        profile: Default::default(),
    };
    for url in ["http://llm.example.test/v1", "http://192.0.2.7:11434/v1"] {
        let mut bound = App::bind(settings.clone(), Role::ALL).await.unwrap();
        bound.settings.gateway.llm = Some(model(url));
        let refused = bound.start(CancellationToken::new()).await.err().unwrap();
        let refused = format!("{refused:#}");
        assert!(
            refused.contains("MAITRED_LLM_BASE_URL") && refused.contains("https"),
            "{refused}"
        );
        assert!(!refused.contains("sk-never-in-clear"), "{refused}");
    }
    // https, or plain http to this very machine, is accepted.
    for url in ["https://llm.example.test/v1", "http://127.0.0.1:11434/v1"] {
        settings.gateway.llm = Some(model(url));
        settings.check().unwrap();
    }
}

/// Finding 6c: a caller's `x-request-id` went into every log line of its request and
/// back in the response, whatever it was. A plain, short id is still kept (one id
/// follows a request across the roles); anything else is replaced by a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_request_id_is_kept_only_when_it_is_a_plain_short_id() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let id_of = |response: &reqwest::Response| -> String {
        let ids: Vec<_> = response.headers().get_all("x-request-id").iter().collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        ids[0].to_str().unwrap().to_owned()
    };
    let long = "a".repeat(65);
    for base in [&app.gateway_url, &app.url] {
        let kept = app
            .http
            .get(format!("{base}/healthz"))
            .header("x-request-id", "req-01J9ZX.retry_2")
            .send()
            .await
            .unwrap();
        assert_eq!(id_of(&kept), "req-01J9ZX.retry_2");
        for forged in [
            long.as_str(),
            "forged\" level=ERROR msg=\"admin signed in",
            "<script>alert(1)</script>",
            "a b",
            "",
        ] {
            let response = app
                .http
                .get(format!("{base}/healthz"))
                .header("x-request-id", forged)
                .send()
                .await
                .unwrap();
            let id = id_of(&response);
            assert_ne!(id, forged);
            assert!(
                uuid::Uuid::parse_str(&id).is_ok(),
                "{forged:?} replaced by {id:?}"
            );
        }
        // Two ids: neither is trusted.
        let response = app
            .http
            .get(format!("{base}/healthz"))
            .header("x-request-id", "one")
            .header("x-request-id", "two")
            .send()
            .await
            .unwrap();
        assert!(uuid::Uuid::parse_str(&id_of(&response)).is_ok());
    }
    app.stop().await;
}
