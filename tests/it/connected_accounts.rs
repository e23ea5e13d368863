//! Connected accounts against an authorization server we did not write: nanoidp
//! (PyPI) in front of an MCP server on the official Python SDK that verifies its
//! tokens and hides its tools until sign-in (`tests/connected-accounts/`).
//! `scripts/check-connected-accounts` starts that lab and runs these with its state
//! dir in `MAITRED_ACCOUNTS_LAB` (and the lab's CA in `SSL_CERT_FILE`).
//!
//! The person signs in at nanoidp as the lab's users: the form is posted as a
//! browser would post it (the web UI's own run, in a real browser, is in
//! `frontend/e2e`).

use std::path::{Path, PathBuf};
use std::process::Command;

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
    /// The lab in `MAITRED_ACCOUNTS_LAB`; `None` (the test is skipped) when no lab runs.
    pub(crate) fn from_env() -> Option<Self> {
        Self::from_var("MAITRED_ACCOUNTS_LAB")
    }

    /// The lab whose state dir is in the environment variable `var`; `None` (the
    /// test is skipped) when it is not set.
    pub(crate) fn from_var(var: &str) -> Option<Self> {
        let Ok(dir) = std::env::var(var) else {
            eprintln!("{var} is not set: skipped");
            return None;
        };
        let dir = PathBuf::from(dir);
        let text = std::fs::read_to_string(dir.join("ready.json"))
            .unwrap_or_else(|e| panic!("the lab's ready.json in {}: {e}", dir.display()));
        Some(Self {
            info: serde_json::from_str(&text).unwrap(),
            dir,
        })
    }

    pub(crate) fn mcp_url(&self) -> &str {
        self.info["mcp_url"].as_str().unwrap()
    }

    /// The lab's own CA (PEM), which signs its https certificates.
    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.join("tls/ca.pem")
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

    /// `lab.py <command> --state-dir <lab> <args>` with the lab's own virtualenv (the
    /// one `scripts/lib.sh` makes); its output, trimmed.
    pub(crate) fn run(&self, command: &str, args: &[&str]) -> String {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let venvs =
            std::env::var_os("MAITRED_VENV_DIR").map_or_else(|| root.join(".venv"), PathBuf::from);
        let output = Command::new(venvs.join("connected-accounts/bin/python"))
            .arg(root.join("tests/connected-accounts/lab.py"))
            .arg(command)
            .arg("--state-dir")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run lab.py {command}: {e}"));
        assert!(
            output.status.success(),
            "lab.py {command} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Signs `user` in at nanoidp through `authorize` (the connect card's URL) as a
    /// browser does; returns where nanoidp sends them back (the gateway's callback).
    pub(crate) async fn sign_in(&self, authorize: &str, user: &str) -> String {
        self.sign_in_trusting(authorize, user, None).await
    }

    /// [`Lab::sign_in`] in a browser that trusts only the CA in `ca` (PEM) when one is
    /// given, and the process's own (`SSL_CERT_FILE`) when not.
    pub(crate) async fn sign_in_trusting(
        &self,
        authorize: &str,
        user: &str,
        ca: Option<&Path>,
    ) -> String {
        let mut browser = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = ca {
            let pem =
                std::fs::read(ca).unwrap_or_else(|e| panic!("the lab's CA {}: {e}", ca.display()));
            browser = browser.tls_certs_only([reqwest::Certificate::from_pem(&pem).unwrap()]);
        }
        let browser = browser.build().unwrap();
        let page = browser.get(authorize).send().await.unwrap();
        assert_eq!(page.status(), 200, "the login page");
        let page = page.text().await.unwrap();
        let transaction = form_value(&page, "transaction_id");
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

/// The value of the login form's field `name` in `page`.
fn form_value(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).expect("the login form") + marker.len();
    let end = start + page[start..].find('"').expect("the login form");
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

/// The model calls `tool` (no arguments) as the call `id`.
pub(crate) fn call(id: &str, tool: &str) -> Turn {
    Turn::tool_calls([ToolCallSpec::new(id, tool, "{}")])
}

/// The model connects notes first (the call `c1`), then answers with `turns`.
pub(crate) fn connect_then(turns: impl IntoIterator<Item = Turn>) -> Script {
    Script::new(std::iter::once(call("c1", "notes__connect")).chain(turns))
}

/// Reads the answer's events until the connect card; returns them and the card.
pub(crate) async fn until_card(stream: &mut SseReader) -> (Vec<SseEvent>, Value) {
    let events = stream.until("input_required").await;
    let card = of(&events, "input_required")
        .last()
        .map(|e| (*e).clone())
        .expect("a connect card");
    (events, card)
}

/// Asks `question` as `token` and reads the answer until the connect card; returns
/// the answer's stream, its events so far, and the card.
pub(crate) async fn ask_until_card(
    app: &TestApp,
    token: &str,
    question: &str,
) -> (SseReader, Vec<SseEvent>, Value) {
    let mut stream = app.ask(token, question, None).await;
    let (events, card) = until_card(&mut stream).await;
    (stream, events, card)
}

/// A gateway with the notes server whose model answers with `script`, a person
/// ("operator") with a chat token, and their `question` read until the connect card.
pub(crate) struct Started {
    pub(crate) app: TestApp,
    /// The person's chat token.
    pub(crate) token: String,
    /// The rest of the answer, after the card.
    pub(crate) stream: SseReader,
    /// The answer's events up to the card.
    pub(crate) events: Vec<SseEvent>,
    pub(crate) card: Value,
}

impl Started {
    /// On SQLite, with the gateway's defaults.
    pub(crate) async fn new(lab: &Lab, script: Script, question: &str) -> Self {
        Self::with(lab, &Database::Sqlite, script, |_| {}, question).await
    }

    /// On `database`, with the settings `tweak`ed.
    pub(crate) async fn with(
        lab: &Lab,
        database: &Database,
        script: Script,
        tweak: impl FnOnce(&mut Settings),
        question: &str,
    ) -> Self {
        let app = app_with(lab, database, script, tweak).await;
        let token = person(&app, "operator").await;
        let (stream, events, card) = ask_until_card(&app, &token, question).await;
        Self {
            app,
            token,
            stream,
            events,
            card,
        }
    }
}

impl Started {
    /// The card's sign-in URL.
    pub(crate) fn url(&self) -> &str {
        card_url(&self.card)
    }

    /// Signs `user` in at the lab through the card; returns the callback.
    pub(crate) async fn sign_in(&self, lab: &Lab, user: &str) -> String {
        lab.sign_in(self.url(), user).await
    }

    /// The callback in the person's browser: the page's status and text.
    pub(crate) async fn landed(&self, callback: &str) -> (u16, String) {
        landed(&self.app, callback, &self.token).await
    }

    /// Signs `user` in through the card and comes back, which connects (200); returns
    /// the callback page.
    pub(crate) async fn connect(&self, lab: &Lab, user: &str) -> String {
        let callback = self.sign_in(lab, user).await;
        let (status, page) = self.landed(&callback).await;
        assert_eq!(status, 200, "{page}");
        page
    }
}

/// The connect card's sign-in URL (at the authorization server).
pub(crate) fn card_url(card: &Value) -> &str {
    card["url"].as_str().expect("the card's sign-in URL")
}

/// The callback in the person's browser (their bearer token stands for the
/// browser's session): the page's status and text.
pub(crate) async fn landed(app: &TestApp, callback: &str, token: &str) -> (u16, String) {
    landed_at(&app.http, callback, token).await
}

/// [`landed`] in the browser `http`.
pub(crate) async fn landed_at(
    http: &reqwest::Client,
    callback: &str,
    token: &str,
) -> (u16, String) {
    let response = http.get(callback).bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_person_connects_in_the_chat_and_the_call_goes_on_as_them() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([
        call("c2", "notes__whoami"),
        Turn::text("You are signed in at notes."),
    ]);
    let Started {
        app,
        token,
        mut stream,
        card,
        ..
    } = Started::new(&lab, script, "Who am I at notes?").await;
    assert_eq!(card["mode"], "url", "{card}");
    assert_eq!(card["connect"]["server"], "notes", "{card}");
    assert_eq!(card["connect"]["reason"], "connect", "{card}");
    let url = card_url(&card);
    let issuer = lab.info["issuer"].as_str().unwrap();
    assert!(url.starts_with(issuer), "{url}");
    for part in ["code_challenge_method=S256", "state=", "resource="] {
        assert!(url.contains(part), "{part} in {url}");
    }

    let callback = lab.sign_in(url, "alice").await;
    assert!(callback.contains("iss="), "RFC 9207 iss: {callback}");
    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 200, "{page}");

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
