//! The admin HTTP API (DESIGN §7), bound to the host's admin address (127.0.0.1 by default):
//! `GET /status` — this host, its vnodes (place in the tree, metadata version, a digest per
//! partition replica) and its links, as JSON. The snapshot endpoints, metrics and the status page
//! build on it.

use crate::node::Shared;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub async fn start(shared: Arc<Shared>, addr: SocketAddr, stop: CancellationToken) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let app = Router::new().route("/status", get(status)).route("/health", get(|| async { "ok\n" })).with_state(shared);
    tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = served.await {
            tracing::error!("admin http: {e}");
        }
    });
    Ok(())
}

async fn status(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let vnodes = shared.statuses().await;
    let links = &shared.links;
    let router = &shared.router.stats;
    Json(serde_json::json!({
        "cluster": shared.cfg.cluster.name,
        "host": shared.cfg.host,
        "uptime_seconds": shared.started.elapsed().as_secs(),
        "vnodes": vnodes,
        "links": {
            "connects": links.connects.load(Ordering::Relaxed),
            "auth_failures": links.auth_failures.load(Ordering::Relaxed),
            "malformed_frames": links.malformed_frames.load(Ordering::Relaxed),
        },
        "router": {
            "dropped_local": router.dropped_local.load(Ordering::Relaxed),
            "dropped_peer": router.dropped_peer.load(Ordering::Relaxed),
            "unknown_vnode": router.unknown_vnode.load(Ordering::Relaxed),
        },
    }))
}
