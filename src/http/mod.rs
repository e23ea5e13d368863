//! HTTP plumbing every role shares: serving with graceful shutdown, the common
//! middleware stack, health endpoints and the JSON body extractor.

pub mod budget;
pub mod client_ip;
pub mod error;
pub mod health;
pub mod metrics;
pub mod middleware;

use std::net::SocketAddr;

use anyhow::Context;
use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets in-flight
/// requests finish.
pub async fn serve(
    role: &'static str,
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let addr = listener
        .local_addr()
        .context("reading the listener address")?;
    tracing::info!(role, %addr, "listening");
    // Streamed responses (SSE) go out in small writes; with Nagle's algorithm each
    // would wait for the peer's delayed ACK (~40 ms on a kept-alive connection).
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.cancelled_owned())
    .await
    .with_context(|| format!("serving the {role} role"))?;
    tracing::info!(role, "stopped");
    Ok(())
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (is another process using the port?)"))
}
