//! The real `maitred` binary as a child process, for what only a process can show:
//! a signal, a `kill -9`, several gateway replicas. Configured by environment, as an
//! operator would.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use maitred::identity::dev::DevCredentials;
use serde_json::{Value, json};

use crate::helpers::SseReader;

pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One running `maitred` process; killed if the test ends first.
pub(crate) struct Maitred {
    child: Option<Child>,
    command: Vec<String>,
    env: Vec<(String, String)>,
    pub data: PathBuf,
    log: PathBuf,
}

impl Maitred {
    /// `maitred <args>` with `MAITRED_DATA_DIR=data` and `env`; waits until every URL
    /// in `ready` answers `/readyz`.
    pub(crate) async fn start(
        args: &[&str],
        data: &Path,
        env: &[(&str, String)],
        ready: &[&str],
    ) -> Self {
        let log = data.join(format!("maitred-{}-{}.log", args.join("-"), free_port()));
        let mut process = Self {
            child: None,
            command: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            data: data.to_owned(),
            log,
        };
        process.spawn(ready).await;
        process
    }

    async fn spawn(&mut self, ready: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_maitred"));
        command
            .args(&self.command)
            .env_remove("DATABASE_URL")
            .env_remove("MAITRED_REDIS_URL")
            .env("MAITRED_DATA_DIR", &self.data)
            .env("RUST_LOG", "info,sqlx=warn,rmcp=warn")
            .stdout(Stdio::null())
            .stderr(log);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        self.child = Some(command.spawn().unwrap());
        let http = maitred::http_client::new().unwrap();
        for url in ready {
            self.wait_ready(&http, url).await;
        }
    }

    async fn wait_ready(&mut self, http: &reqwest::Client, url: &str) {
        for _ in 0..400 {
            if let Ok(response) = http.get(format!("{url}/readyz")).send().await
                && response.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "maitred exited ({status}) before {url} was ready:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{url} did not become ready:\n{}", self.log());
    }

    /// The process's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// `kill -9`: no shutdown, no last write.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// `kill -TERM`, then waits for the exit.
    pub(crate) async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.pid().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let child = self.child.as_mut().unwrap();
        for _ in 0..400 {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("maitred did not exit after SIGTERM:\n{}", self.log());
    }

    /// Starts the same process again, on the same ports, data and database.
    pub(crate) async fn restart(&mut self, ready: &[&str]) {
        assert!(self.child.is_none(), "stop it first");
        self.spawn(ready).await;
    }

    /// A client-credentials token from the issuer at `backend`, with the dev secret.
    pub(crate) async fn token(&self, backend: &str, client: &str) -> String {
        let secret = DevCredentials::load(&self.data)
            .unwrap()
            .client_secret(client)
            .unwrap()
            .to_owned();
        let token: Value = maitred::http_client::new()
            .unwrap()
            .post(format!("{backend}/oauth2/token"))
            .basic_auth(client, Some(secret))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        token["access_token"].as_str().unwrap().to_owned()
    }
}

impl Drop for Maitred {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The ports of one `maitred all`, and the environment that sets them.
pub(crate) struct Ports {
    pub backend: u16,
    pub gateway: u16,
    pub mcp: u16,
}

impl Ports {
    pub(crate) fn free() -> Self {
        Self {
            backend: free_port(),
            gateway: free_port(),
            mcp: free_port(),
        }
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("MAITRED_BACKEND_PORT", self.backend.to_string()),
            ("MAITRED_GATEWAY_PORT", self.gateway.to_string()),
            ("MAITRED_MCP_PORT", self.mcp.to_string()),
        ]
    }

    pub(crate) fn backend_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.backend)
    }

    pub(crate) fn gateway_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.gateway)
    }
}

/// Asks `question` at the gateway `base`; the answer's stream.
pub(crate) async fn ask(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    question: &str,
) -> SseReader {
    let response = http
        .post(format!("{base}/api/v1/resos/stream/chat"))
        .bearer_auth(token)
        .json(&json!({ "question": question }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "asking at {base}");
    SseReader::new(response)
}
