//! The web UI's files at `/`: built by Vite into `frontend/dist`, embedded in the
//! binary at compile time, or read from `MAITRED_UI_DIR` so a UI can be rebuilt or
//! replaced without recompiling.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::Embed;

use super::{GatewayError, GatewayState};

#[derive(Embed)]
#[folder = "../../frontend/dist"]
// A binary built before the UI still runs: it says how to build the UI instead.
#[allow_missing = true]
struct Embedded;

/// Vite puts a content hash in every name under `assets/`, so they never change.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// `index.html` names the current hashed assets: always revalidate it.
const REVALIDATE: &str = "no-cache";

/// The UI's Content-Security-Policy: exactly what the built UI uses, nothing else.
/// The answers it shows are written from untrusted text (guests' records, tool
/// output, a model that may have been prompt-injected), so the page must not be able
/// to load or send anything elsewhere even if some markup got through.
///
/// - `default-src 'none'`: whatever is not listed below is refused (fonts, media,
///   frames, workers, manifests: the UI uses none).
/// - `script-src 'self'`, `style-src 'self'`: Vite's one module script and one
///   stylesheet under `/assets/`; no inline `<script>` or `style=` attribute in the
///   built `index.html`, and no `eval`. React sets styles through the CSSOM, which
///   CSP does not restrict.
/// - `img-src 'self'`: the favicon. Answers never contain an `<img>` (Markdown.tsx),
///   and nothing uses `data:` images, so a leaked image URL cannot be fetched.
/// - `connect-src 'self'`: the API and its event streams, on this origin.
/// - `object-src 'none'`: no plugins (also implied by `default-src 'none'`, spelled
///   out because checkers look for it).
/// - `base-uri 'none'`: an injected `<base>` cannot redirect relative URLs.
/// - `form-action 'none'`: the UI posts with `fetch`, never with a form (the
///   composer's submit is prevented); `form-action` does not fall back to
///   `default-src`, so it is set explicitly.
/// - `frame-ancestors 'none'`: no other site may frame the UI (clickjacking an
///   approval).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Conversation ids are in the UI's addresses (`/c/{id}`); no request the page makes
/// needs a `Referer` (the gateway's CSRF check uses `Origin` and `Sec-Fetch-Site`,
/// which `fetch` still sends), so none is sent, not even to this origin.
const REFERRER_POLICY: &str = "no-referrer";

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>maitred</title>\
<h1>The web UI is not built</h1>\
<p>Build it with <code>npm ci &amp;&amp; npm run build</code> in <code>frontend/</code>, then \
rebuild maitred (or point <code>MAITRED_UI_DIR</code> at <code>frontend/dist</code>). \
The chat API works without it.</p>";

/// Where the files come from.
#[derive(Debug, Clone)]
pub enum UiFiles {
    Embedded,
    Dir(PathBuf),
}

struct File {
    bytes: Cow<'static, [u8]>,
    etag: Option<String>,
}

impl UiFiles {
    pub fn new(dir: Option<PathBuf>) -> Self {
        match dir {
            Some(dir) => {
                if !dir.join("index.html").is_file() {
                    tracing::warn!(dir = %dir.display(), "MAITRED_UI_DIR has no index.html");
                }
                Self::Dir(dir)
            }
            None => {
                if Embedded::get("index.html").is_none() {
                    tracing::info!(
                        "web UI: not built into this binary (build frontend/ first); the chat API works without it"
                    );
                }
                Self::Embedded
            }
        }
    }

    async fn get(&self, path: &str) -> Option<File> {
        match self {
            Self::Embedded => Embedded::get(path).map(|file| File {
                etag: Some(format!(
                    "\"{}\"",
                    hex::encode(&file.metadata.sha256_hash()[..16])
                )),
                bytes: file.data,
            }),
            Self::Dir(dir) => {
                let full = inside(dir, path)?;
                let bytes = tokio::fs::read(&full).await.ok()?;
                Some(File {
                    bytes: Cow::Owned(bytes),
                    etag: None,
                })
            }
        }
    }
}

/// `path` under `dir`, refusing anything that could climb out of it.
fn inside(dir: &Path, path: &str) -> Option<PathBuf> {
    let relative = Path::new(path);
    relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| dir.join(relative))
}

/// Paths the UI never owns: an unknown one there is an API 404, not the app.
fn reserved(path: &str) -> bool {
    [
        "api/",
        "login",
        "logout",
        "metrics",
        "healthz",
        "readyz",
        ".well-known/",
    ]
    .iter()
    .any(|prefix| path.starts_with(prefix))
}

/// The router's fallback: a UI file, or `index.html` for the app's own routes.
pub(super) async fn serve(
    State(state): State<GatewayState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().trim_start_matches('/');
    if !(method == Method::GET || method == Method::HEAD) || reserved(path) {
        return GatewayError::not_found("route", uri.path()).into_response();
    }
    let files = &state.ui;
    let (file, name, cache) = match files.get(path).await.filter(|_| !path.is_empty()) {
        Some(file) => {
            let cache = if path.starts_with("assets/") {
                IMMUTABLE
            } else {
                REVALIDATE
            };
            (file, path, cache)
        }
        // A missing asset is a real 404: index.html in its place would be parsed as
        // a script and fail obscurely.
        None if path.starts_with("assets/") || Path::new(path).extension().is_some() => {
            return GatewayError::not_found("file", uri.path()).into_response();
        }
        None => match files.get("index.html").await {
            Some(file) => (file, "index.html", REVALIDATE),
            None => {
                let mut response = (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    NOT_BUILT,
                )
                    .into_response();
                harden(response.headers_mut());
                return response;
            }
        },
    };
    respond(file, name, cache, &headers)
}

fn respond(file: File, name: &str, cache: &'static str, headers: &HeaderMap) -> Response {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let mut response = match (&file.etag, headers.get(header::IF_NONE_MATCH)) {
        (Some(etag), Some(asked)) if asked.as_bytes() == etag.as_bytes() => {
            StatusCode::NOT_MODIFIED.into_response()
        }
        _ => Response::new(Body::from(file.bytes)),
    };
    let out = response.headers_mut();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(value) = HeaderValue::from_str(mime.essence_str()) {
        out.insert(header::CONTENT_TYPE, value);
    }
    if let Some(etag) = file.etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
        out.insert(header::ETAG, etag);
    }
    harden(out);
    response
}

/// The security headers of every UI response, pages and assets alike: a policy on an
/// asset does nothing for the page, but an asset opened on its own (a script or the
/// SVG icon in a tab) is a document too.
fn harden(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    // A file is what its Content-Type says: never a script sniffed out of text.
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static(REFERRER_POLICY),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_climb_out_of_the_ui_folder() {
        let dir = Path::new("ui");
        assert_eq!(
            inside(dir, "assets/app.js"),
            Some(PathBuf::from("ui/assets/app.js"))
        );
        assert_eq!(inside(dir, "../secret"), None);
        assert_eq!(inside(dir, "assets/../../secret"), None);
        assert_eq!(inside(dir, "/etc/passwd"), None);
    }

    #[test]
    fn a_revalidated_file_keeps_the_security_headers() {
        // Only the embedded UI has ETags; a 304 must not drop the policy, since the
        // browser merges the 304's headers into the cached response it shows.
        let file = || File {
            bytes: Cow::Borrowed(b"<!doctype html>"),
            etag: Some("\"abc\"".to_owned()),
        };
        let mut asked = HeaderMap::new();
        asked.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"abc\""));
        let response = respond(file(), "index.html", REVALIDATE, &asked);
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        for name in [
            header::CONTENT_SECURITY_POLICY,
            header::X_CONTENT_TYPE_OPTIONS,
            header::REFERRER_POLICY,
        ] {
            assert!(
                response.headers().contains_key(&name),
                "a 304 without {name}"
            );
        }
    }

    #[test]
    fn api_paths_are_never_the_app() {
        assert!(reserved("api/v1/resos/nothing"));
        assert!(reserved("metrics"));
        assert!(!reserved("c/0193"));
        assert!(!reserved(""));
    }
}
