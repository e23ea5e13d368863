//! rmcp's HTTP transport with credentials that change: each request carries the
//! current token, and a 401 forces one (single-flight) refresh and one retry.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use futures::stream::BoxStream;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

use secrecy::ExposeSecret;

use crate::oauth_client::TokenSource;

pub(super) enum Credentials {
    Anonymous,
    Static(secrecy::SecretString),
    Issued(Box<TokenSource>),
}

impl Credentials {
    async fn token(&self) -> Result<Option<String>, String> {
        match self {
            Credentials::Anonymous => Ok(None),
            Credentials::Static(token) => Ok(Some(token.expose_secret().to_owned())),
            Credentials::Issued(source) => {
                source.token().await.map(Some).map_err(|e| format!("{e:#}"))
            }
        }
    }

    /// A fresh token after `rejected` was refused; `None` when nothing can change.
    async fn refresh(&self, rejected: &str) -> Option<String> {
        match self {
            Credentials::Issued(source) => source.refresh(rejected).await.ok(),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub(super) struct AuthedHttp {
    http: reqwest::Client,
    credentials: Arc<Credentials>,
}

type Error = StreamableHttpError<reqwest::Error>;

fn no_token(detail: String) -> Error {
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
        "no token for the MCP server: {detail}"
    )))
}

impl AuthedHttp {
    pub(super) fn new(http: reqwest::Client, credentials: Credentials) -> Self {
        Self {
            http,
            credentials: Arc::new(credentials),
        }
    }
}

impl StreamableHttpClient for AuthedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let token = self.credentials.token().await.map_err(no_token)?;
        let first = self
            .http
            .post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token.clone(),
                custom_headers.clone(),
            )
            .await;
        match (first, token) {
            (Err(StreamableHttpError::AuthRequired(_)), Some(rejected)) => {
                let Some(fresh) = self.credentials.refresh(&rejected).await else {
                    return Err(no_token(
                        "the server refused the token and no other can be had".into(),
                    ));
                };
                tracing::info!("the MCP server refused our token; retrying once with a fresh one");
                self.http
                    .post_message(uri, message, session_id, Some(fresh), custom_headers)
                    .await
            }
            (other, _) => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let token = self.credentials.token().await.map_err(no_token)?;
        self.http
            .delete_session(uri, session_id, token, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let token = self.credentials.token().await.map_err(no_token)?;
        self.http
            .get_stream(uri, session_id, last_event_id, token, custom_headers)
            .await
    }
}
