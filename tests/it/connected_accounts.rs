//! Connected accounts against an authorization server we did not write: nanoidp
//! (PyPI) in front of an MCP server on the official Python SDK that verifies its
//! tokens and hides its tools until sign-in (`tests/connected-accounts/`).
//! `scripts/check-connected-accounts` starts that lab and runs these with its state
//! dir in `MAITRED_ACCOUNTS_LAB` (and the lab's CA in `SSL_CERT_FILE`).
//!
//! The person signs in at nanoidp as the lab's users: the form is posted as a
//! browser would post it (the web UI's own run, in a real browser, is in
//! `frontend/e2e`).

use std::path::PathBuf;

use maitred::settings::Settings;
use maitred::settings::mcp_servers::ServerConfig;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp, of};
use crate::token_exchange::person_tokens;

/// The running lab, as its `ready.json` describes it.
pub(crate) struct Lab {
    pub(crate) dir: PathBuf,
    pub(crate) info: Value,
}

impl Lab {
    /// `None` (the test is skipped) when no lab runs.
    pub(crate) fn from_env() -> Option<Self> {
        let Ok(dir) = std::env::var("MAITRED_ACCOUNTS_LAB") else {
            eprintln!("MAITRED_ACCOUNTS_LAB is not set: skipped");
            return None;
        };
        let dir = PathBuf::from(dir);
        let text = std::fs::read_to_string(dir.join("ready.json")).expect("the lab's ready.json");
        Some(Self {
            info: serde_json::from_str(&text).unwrap(),
            dir,
        })
    }

    pub(crate) fn mcp_url(&self) -> &str {
        self.info["mcp_url"].as_str().unwrap()
    }

    /// The notes server as a `user_oauth` server.
    pub(crate) fn server(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "name": "notes",
            "url": self.mcp_url(),
            "description": "the person's notes",
            "read_only_tools": ["whoami", "list_notes"],
            "timeout": 10,
            "auth": {"type": "user_oauth", "scopes": ["notes:read"]},
        }))
        .unwrap()
    }

    /// The lab's JSON-lines log `name` (`calls_log`, `audit_log`), parsed.
    pub(crate) fn log(&self, name: &str) -> Vec<Value> {
        let path = self.info[name].as_str().unwrap();
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Signs `user` in at nanoidp through `authorize` (the connect card's URL) as a
    /// browser does; returns where nanoidp sends them back (the gateway's callback).
    pub(crate) async fn sign_in(&self, authorize: &str, user: &str) -> String {
        let browser = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let page = browser.get(authorize).send().await.unwrap();
        assert_eq!(page.status(), 200, "the login page");
        let page = page.text().await.unwrap();
        let transaction = regex_value(&page, "transaction_id");
        let password = self.info["users"][user].as_str().unwrap();
        let posted = browser
            .post(authorize)
            .form(&[
                ("transaction_id", transaction.as_str()),
                ("username", user),
                ("password", password),
            ])
            .send()
            .await
            .unwrap();
        assert!(
            posted.status().is_redirection(),
            "signed in: {}",
            posted.status()
        );
        posted.headers()["location"].to_str().unwrap().to_owned()
    }
}

fn regex_value(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).map(|i| i + marker.len()).unwrap_or(0);
    let end = page[start..].find('"').map_or(start, |e| start + e);
    page[start..end].replace("&amp;", "&")
}

/// The gateway with the notes server, answering with `script`.
pub(crate) async fn app_with(
    lab: &Lab,
    database: &Database,
    script: Script,
    tweak: impl FnOnce(&mut Settings),
) -> TestApp {
    let server = lab.server();
    TestApp::spawn_chat(database, Llm::Scripted(script), move |s| {
        s.gateway.file.mcp_servers = vec![server];
        tweak(s);
    })
    .await
}

/// A person's token for the chat API.
pub(crate) async fn person(app: &TestApp, username: &str) -> String {
    person_tokens(app, username, "openid profile chat.read chat.write").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn call(id: &str, tool: &str) -> Turn {
    Turn::tool_calls([ToolCallSpec::new(id, tool, "{}")])
}

/// Reads the answer's events until the connect card; returns them and its URL.
pub(crate) async fn until_card(stream: &mut SseReader) -> (Vec<SseEvent>, Value) {
    let events = stream.until("input_required").await;
    let card = of(&events, "input_required")
        .last()
        .map(|e| (*e).clone())
        .expect("a connect card");
    (events, card)
}

/// The callback, in the person's browser (their bearer token stands for the
/// browser's session).
pub(crate) async fn come_back(app: &TestApp, callback: &str, token: &str) -> reqwest::Response {
    app.http
        .get(callback)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_person_connects_in_the_chat_and_the_call_goes_on_as_them() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        call("c2", "notes__whoami"),
        Turn::text("You are signed in at notes."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Who am I at notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["mode"], "url", "{card}");
    assert_eq!(card["connect"]["server"], "notes", "{card}");
    assert_eq!(card["connect"]["reason"], "connect", "{card}");
    let url = card["url"].as_str().unwrap();
    let issuer = lab.info["issuer"].as_str().unwrap();
    assert!(url.starts_with(issuer), "{url}");
    for part in ["code_challenge_method=S256", "state=", "resource="] {
        assert!(url.contains(part), "{part} in {url}");
    }

    let callback = lab.sign_in(url, "alice").await;
    assert!(callback.contains("iss="), "RFC 9207 iss: {callback}");
    let landed = come_back(&app, &callback, &token).await;
    assert_eq!(landed.status(), 200, "{}", landed.text().await.unwrap());

    let events = stream.rest().await;
    let results = of(&events, "tool_result");
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0]["status"], "ok", "{events:?}");
    assert_eq!(results[1]["status"], "ok", "{events:?}");
    let calls = lab.log("calls_log");
    assert!(
        calls
            .iter()
            .any(|c| c["subject"] == "alice" && c["tool"] == "whoami"),
        "{calls:?}"
    );
    app.stop().await;
}
