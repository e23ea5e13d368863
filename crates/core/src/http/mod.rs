//! HTTP plumbing every role shares: serving with graceful shutdown, the common
//! middleware stack, health endpoints and the JSON body extractor.

pub mod budget;
pub mod client_ip;
pub mod error;
pub mod health;
pub mod metrics;
pub mod middleware;
pub mod timeouts;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::middleware::from_fn_with_state;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Layer;

use crate::settings::HttpTimeouts;

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets in-flight
/// requests finish. Slow clients are held to `timeouts` ([`timeouts`]).
///
/// HTTP/1.1 with hyper's own connection builder rather than `axum::serve`, which has
/// no header-read timeout: without one, a connection that sends nothing, or half a
/// head, stays open for as long as the client likes.
pub async fn serve(
    role: &'static str,
    listener: TcpListener,
    router: Router,
    timeouts: HttpTimeouts,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let addr = listener
        .local_addr()
        .context("reading the listener address")?;
    tracing::info!(role, %addr, "listening");
    let router = router
        .layer(from_fn_with_state(timeouts, self::timeouts::limit))
        // Which role's service the request's spans belong to, in `maitred all` too.
        .layer(axum::Extension(crate::otel::ServingRole(role)));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    // Each connection's task; once the listener closes, the server waits for them.
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Streamed responses (SSE) go out in small writes; with Nagle's algorithm each
        // would wait for the peer's delayed ACK (~40 ms on a kept-alive connection).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        // What `into_make_service_with_connect_info` gave handlers: the peer's address.
        let service =
            TowerToHyperService::new(axum::Extension(ConnectInfo(peer)).layer(router.clone()));
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = shutdown.cancelled() => {
                    // Finish the request in flight, then close; an idle connection closes now.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    tracing::info!(role, "stopped");
    Ok(())
}

/// As `axum::serve` does: a connection that failed before it was accepted is the
/// client's business; anything else (out of file descriptors) is logged, and the
/// loop pauses a moment rather than spin.
async fn accept_failed(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accept error");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (is another process using the port?)"))
}
