//! Dev mode's demo identity: the four clients and three users every role and the
//! README expect, with secrets generated on first start, kept in the data dir (so
//! `maitred token` and a restart find them) and printed at start-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use argon2::Argon2;
use argon2::password_hash::PasswordHasher;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::random;
use crate::settings::Settings;
use crate::settings::identity_file::{ClientConfig, Grant, IdentityFile, Role, UserConfig};

pub const FILE_NAME: &str = "dev-credentials.json";
/// Dev mode's sealing key (as `MAITRED_ACCOUNT_KEYS` would give it), beside the
/// credentials: it seals browser sessions' and connected accounts' tokens.
pub const SEALING_KEY_FILE: &str = "account-keys";

/// The dev sealing key's file in `data_dir`, made on first use, so a restart still
/// opens what was sealed. Made by whichever role starts first in dev mode (a gateway
/// whose data dir is read-only finds the one the backend made).
pub fn sealing_key_file(data_dir: &Path) -> anyhow::Result<PathBuf> {
    let path = data_dir.join(SEALING_KEY_FILE);
    if !path.exists() {
        crate::db::files::create_private_file(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let key = format!(
            "dev1:{}",
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                random::bytes(32)
            )
        );
        std::fs::write(&path, key).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(path)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevCredentials {
    pub clients: BTreeMap<String, String>,
    pub users: BTreeMap<String, DevUser>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevUser {
    pub password: String,
    pub password_hash: String,
}

struct DemoClient {
    id: &'static str,
    public: bool,
    grants: &'static [Grant],
    scopes: &'static [&'static str],
    /// The first is the default.
    audiences: &'static [&'static str],
    /// What it acts for people on: the audience of the tokens it may exchange.
    subject_audience: Option<&'static str>,
    /// A public client's redirect URI, if not the gateway's login callback.
    redirect_uri: Option<&'static str>,
}

const DEMO_CLIENTS: &[DemoClient] = &[
    DemoClient {
        id: "maitred-mcp",
        public: false,
        grants: &[Grant::ClientCredentials, Grant::TokenExchange],
        scopes: &["backend.read", "backend.write"],
        audiences: &["backend"],
        subject_audience: Some("mcp"),
        redirect_uri: None,
    },
    DemoClient {
        id: "maitred-gateway",
        public: false,
        grants: &[Grant::ClientCredentials, Grant::TokenExchange],
        scopes: &["mcp.read", "mcp.write"],
        audiences: &["mcp"],
        subject_audience: Some("gateway"),
        redirect_uri: None,
    },
    DemoClient {
        id: "maitred-web",
        public: true,
        grants: &[Grant::AuthorizationCode, Grant::RefreshToken],
        scopes: &[
            "openid",
            "profile",
            "email",
            "offline_access",
            "chat.read",
            "chat.write",
        ],
        audiences: &["gateway"],
        subject_audience: None,
        redirect_uri: None,
    },
    DemoClient {
        id: "maitred-cli",
        public: false,
        grants: &[Grant::ClientCredentials],
        // A client acting for no person gets, through the gateway and the MCP role,
        // only what its registration holds at their audiences: the tools' reads,
        // never a write.
        scopes: &["chat.read", "chat.write", "mcp.read", "backend.read"],
        audiences: &["gateway", "mcp", "backend"],
        subject_audience: None,
        redirect_uri: None,
    },
    // An MCP client on the person's own machine (a desktop app, an SDK's OAuth
    // helper) signing a person in to the MCP server directly: the person's own token,
    // not one exchanged by the gateway.
    DemoClient {
        id: "maitred-desktop",
        public: true,
        grants: &[Grant::AuthorizationCode, Grant::RefreshToken],
        scopes: &[
            "openid",
            "profile",
            "offline_access",
            "mcp.read",
            "mcp.write",
        ],
        audiences: &["mcp"],
        subject_audience: None,
        redirect_uri: Some(DESKTOP_REDIRECT_URI),
    },
];

/// The demo desktop client's redirect: a loopback address (RFC 8252), where such a
/// client listens for the end of the sign-in.
pub const DESKTOP_REDIRECT_URI: &str = "http://127.0.0.1:33418/callback";

const DEMO_USERS: &[(&str, Role, &str)] = &[
    ("admin", Role::Admin, "Ada Admin"),
    ("operator", Role::Operator, "Oscar Operator"),
    ("user", Role::User, "Uma User"),
];

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

impl DevCredentials {
    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = path(data_dir);
        crate::db::files::warn_if_shared(&[data_dir, &path]);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (it is written when `maitred` first starts in dev mode)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// Loads the file, adding whatever demo client or user it lacks.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Self> {
        let mut credentials = if path(data_dir).exists() {
            Self::load(data_dir)?
        } else {
            Self {
                clients: BTreeMap::new(),
                users: BTreeMap::new(),
            }
        };
        let mut changed = false;
        for client in DEMO_CLIENTS.iter().filter(|c| !c.public) {
            if !credentials.clients.contains_key(client.id) {
                credentials
                    .clients
                    .insert(client.id.to_owned(), random::token(32));
                changed = true;
            }
        }
        for (username, _, _) in DEMO_USERS {
            if !credentials.users.contains_key(*username) {
                let password = random::password(16);
                let password_hash = Argon2::default()
                    .hash_password(password.as_bytes())
                    .map_err(|e| anyhow::anyhow!("hashing a demo password: {e}"))?
                    .to_string();
                credentials.users.insert(
                    (*username).to_owned(),
                    DevUser {
                        password,
                        password_hash,
                    },
                );
                changed = true;
            }
        }
        if changed {
            credentials.save(data_dir)?;
        }
        sealing_key_file(data_dir)?;
        Ok(credentials)
    }

    fn save(&self, data_dir: &Path) -> anyhow::Result<()> {
        crate::db::files::create_private_dir(data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        let path = path(data_dir);
        let text = serde_json::to_string_pretty(self)?;
        write_private(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
    }

    pub fn client_secret(&self, client_id: &str) -> Option<&str> {
        self.clients.get(client_id).map(String::as_str)
    }

    /// The demo users and clients as if an operator had configured them.
    pub fn identity_config(&self, settings: &Settings) -> IdentityFile {
        let gateway = &settings.gateway.endpoint.public_url;
        let clients = DEMO_CLIENTS
            .iter()
            .map(|c| ClientConfig {
                id: c.id.to_owned(),
                secret: (!c.public)
                    .then(|| self.clients.get(c.id).cloned().map(SecretString::from))
                    .flatten(),
                public: c.public,
                grants: c.grants.to_vec(),
                scopes: c.scopes.iter().map(|s| (*s).to_owned()).collect(),
                audiences: c.audiences.iter().map(|a| (*a).to_owned()).collect(),
                redirect_uris: match (c.public, c.redirect_uri) {
                    (true, Some(uri)) => vec![uri.to_owned()],
                    (true, None) => vec![format!("{gateway}/login/callback")],
                    (false, _) => Vec::new(),
                },
                subject_audiences: c.subject_audience.map(str::to_owned).into_iter().collect(),
            })
            .collect();
        let users = DEMO_USERS
            .iter()
            .filter_map(|(username, role, name)| {
                let user = self.users.get(*username)?;
                Some(UserConfig {
                    username: (*username).to_owned(),
                    password_hash: user.password_hash.clone(),
                    roles: vec![*role],
                    name: Some((*name).to_owned()),
                    email: Some(format!("{username}@maitred.localhost")),
                })
            })
            .collect();
        IdentityFile { users, clients }
    }

    /// What a developer needs to sign in and get tokens, printed once at start-up.
    pub fn banner(&self, settings: &Settings) -> String {
        let mut out = String::from("dev mode: demo identity (secrets are also in ");
        out.push_str(&path(&settings.data_dir).display().to_string());
        out.push_str(")\n");
        for (username, role, _) in DEMO_USERS {
            if let Some(user) = self.users.get(*username) {
                out.push_str(&format!(
                    "  user   {username:<16} password {}  ({})\n",
                    user.password,
                    role.as_str()
                ));
            }
        }
        for (id, secret) in &self.clients {
            out.push_str(&format!("  client {id:<16} secret   {secret}\n"));
        }
        out.push_str("  client maitred-web      public (authorization code + PKCE)\n");
        out.push_str(&format!(
            "  client maitred-desktop  public (authorization code + PKCE, for MCP clients; redirect {DESKTOP_REDIRECT_URI})\n"
        ));
        out.push_str("  get a token: maitred token --client maitred-cli");
        out
    }
}

/// Shows the banner to the person at the terminal, on stderr but not through
/// `tracing`: log streams are shipped and kept, and the banner holds every demo
/// password and secret. The log says only where they are.
pub fn print_banner(banner: &str, data_dir: &Path) {
    eprintln!("{banner}");
    tracing::info!("dev credentials are in {}", path(data_dir).display());
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A log destination the test can read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn the_banner_is_printed_but_never_logged() {
        let data_dir = tempfile::tempdir().unwrap();
        let credentials = DevCredentials {
            clients: BTreeMap::from([(
                "maitred-cli".to_owned(),
                "client-secret-xyz-123".to_owned(),
            )]),
            users: BTreeMap::from([(
                "admin".to_owned(),
                DevUser {
                    password: "admin-password-456".to_owned(),
                    password_hash: String::new(),
                },
            )]),
        };
        let settings = Settings::local(data_dir.path().to_owned(), String::new());
        let banner = credentials.banner(&settings);
        assert!(banner.contains("admin-password-456") && banner.contains("client-secret-xyz-123"));

        let logs = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::with_default(subscriber, || print_banner(&banner, data_dir.path()));
        let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        assert!(logged.contains("dev credentials are in"), "{logged}");
        assert!(logged.contains(FILE_NAME), "{logged}");
        assert!(!logged.contains("admin-password-456"), "{logged}");
        assert!(!logged.contains("client-secret-xyz-123"), "{logged}");
    }
}
