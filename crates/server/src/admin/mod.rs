//! The admin HTTP API (DESIGN §7), bound to the host's admin address (127.0.0.1 by default):
//! `GET /status` — this host, its vnodes (place in the tree, metadata version, a digest per
//! partition replica) and its links, as JSON; `POST /cuts` — run one cut process on the live
//! cluster and report its phases; `GET /snapshots` — the snapshots under the snapshot directory;
//! `POST /snapshots` `{"name", "incremental"}` — a cut, then every host's files and the manifest;
//! `POST /export` — this host's part of a snapshot (called by the host creating it); `GET
//! /topology` — the tree (`topology.rs`); `GET /metrics` — Prometheus text (`crate::telemetry`);
//! `GET /` — the status page (`page.rs`). Every mutating call needs the admin token
//! (`Authorization: Bearer <token>`, the file `node.admin_token_file` names) or an ACL user
//! allowed every `@admin` command (`Authorization: Basic`); reads need none.
//!
//! With `[tls]` the API is served over TLS only (HTTPS; `serve_tls`): a connection whose TLS
//! handshake fails or takes longer than `TLS_HANDSHAKE_TIMEOUT` is closed unheard, at most
//! `CONNECTIONS_MAX` connections are served at once, each for one request whose headers must
//! arrive within `HEADER_READ_TIMEOUT`.

mod page;
pub(crate) mod topology;

use crate::host::Shared;
use crate::snapshot::catalog::{self, State as Member};
use crate::snapshot::create;
use crate::snapshot::manifest::VnodeFiles;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long `POST /cuts` waits for the cut process to end.
const CUT_WAIT: Duration = Duration::from_secs(60);
/// A TLS client that has not finished its handshake by then is closed.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Admin connections served at once over TLS; one more is closed at once.
const CONNECTIONS_MAX: usize = 256;
/// A TLS connection that has not sent its request's headers by then is closed; each connection
/// serves one request (no keep-alive), so none sits idle holding a slot.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the admin API on `listener` (bound by the node) until `stop`.
pub fn start(shared: Arc<Shared>, listener: tokio::net::TcpListener, stop: CancellationToken) {
    let app = Router::new()
        .route("/", get(|| async { Html(page::STATUS_PAGE) }))
        .route("/status", get(status))
        .route("/topology", get(topology::topology))
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok\n" }))
        .route("/cuts", post(cut))
        .route("/snapshots", get(snapshots).post(create_snapshot))
        .route("/export", post(export))
        .with_state(shared.clone());
    if let Some(tls) = &shared.tls {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.clients.clone());
        tokio::spawn(serve_tls(listener, app, acceptor, stop));
        return;
    }
    tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = served.await {
            tracing::error!("admin http: {e}");
        }
    });
}

/// The API over TLS: axum's router served by hyper on each connection once its handshake is done.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    app: Router,
    acceptor: tokio_rustls::TlsAcceptor,
    stop: CancellationToken,
) {
    let connections = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let (stream, addr) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("admin listener: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(connection) = connections.clone().try_acquire_owned() else { continue };
        let (app, acceptor, stop) = (app.clone(), acceptor.clone(), stop.clone());
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return tracing::debug!(%addr, "admin connection: TLS: {e}"),
                Err(_) => return tracing::debug!(%addr, "admin connection: no TLS handshake in time"),
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                r = conn => if let Err(e) = r { tracing::debug!(%addr, "admin connection: {e}") },
            }
            drop(connection);
        });
    }
}

type Refusal = (StatusCode, String);

/// Mutating calls carry the admin token (`Authorization: Bearer <token>`) or the name and
/// password of a user allowed every `@admin` command (`Authorization: Basic …`; `default` with
/// the node's password).
pub fn authorize(shared: &Shared, headers: &HeaderMap) -> Result<(), Refusal> {
    let header = headers.get("authorization").and_then(|v| v.to_str().ok());
    let credentials = Credentials {
        token: shared.cfg.admin_token.as_deref(),
        default_password: shared.cfg.password.as_deref(),
        users: &shared.acl.users(),
    };
    credentials.check(header)
}

/// What a mutating call may be authorized by.
struct Credentials<'a> {
    token: Option<&'a [u8]>,
    default_password: Option<&'a [u8]>,
    users: &'a waymark_core::acl::Users,
}

impl Credentials<'_> {
    fn check(&self, header: Option<&str>) -> Result<(), Refusal> {
        let refused = || {
            (
                StatusCode::UNAUTHORIZED,
                "missing or wrong admin token or user (Authorization: Bearer …, or Basic for a user with @admin)\n"
                    .to_string(),
            )
        };
        let header = header.ok_or_else(refused)?;
        if let Some(given) = header.strip_prefix("Bearer ") {
            let Some(token) = self.token else {
                return Err((StatusCode::FORBIDDEN, "no admin token is configured (node.admin_token_file)\n".into()));
            };
            return if same_secret(given.trim().as_bytes(), token) { Ok(()) } else { Err(refused()) };
        }
        let basic = header.strip_prefix("Basic ").ok_or_else(refused)?;
        use base64::Engine;
        let decoded = base64::engine::general_purpose::STANDARD.decode(basic.trim()).map_err(|_| refused())?;
        let at = decoded.iter().position(|b| *b == b':').ok_or_else(refused)?;
        let (name, password) = (&decoded[..at], &decoded[at + 1..]);
        let name = String::from_utf8_lossy(name);
        let ok = if name == waymark_core::acl::DEFAULT_USER {
            self.default_password.is_some_and(|p| same_secret(password, p))
        } else {
            self.users
                .get(&name)
                .is_some_and(|u| u.opens(password) && u.has_category(waymark_core::acl::Category::Admin))
        };
        if ok {
            Ok(())
        } else {
            Err(refused())
        }
    }
}

/// Whether two secrets are equal, in time that depends on neither their contents nor their
/// lengths: the SHA-256 digests of both are compared in constant time.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let (a, b) = (Sha256::digest(given), Sha256::digest(expected));
    a.as_slice().ct_eq(b.as_slice()).into()
}

async fn cut(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Result<Json<serde_json::Value>, Refusal> {
    authorize(&shared, &headers)?;
    let report = shared.run_cut(CUT_WAIT).await.map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string() + "\n"))?;
    Ok(Json(serde_json::json!(report)))
}

async fn create_snapshot(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(req): Json<create::CreateRequest>,
) -> Result<Json<create::Created>, Refusal> {
    authorize(&shared, &headers)?;
    let created = create::create(&shared, req).await.map_err(|e| {
        // A host that cannot start the cut says so with 503, and a client asks the next one.
        let status = if e.not_here() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::CONFLICT };
        (status, e.to_string() + "\n")
    })?;
    tracing::info!(name = %created.name, increment = created.increment, cut = created.cut, "snapshot created");
    crate::telemetry::snapshot_created(created.increment);
    Ok(Json(created))
}

async fn export(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(req): Json<create::ExportRequest>,
) -> Result<Json<Vec<VnodeFiles>>, Refusal> {
    authorize(&shared, &headers)?;
    let files = create::export_local(&shared, &req).await.map_err(|e| (StatusCode::CONFLICT, e.to_string() + "\n"))?;
    Ok(Json(files))
}

/// The snapshot catalog as JSON: chains, their members, cut, time, kind, size.
async fn snapshots(State(shared): State<Arc<Shared>>) -> Result<Json<serde_json::Value>, Refusal> {
    let catalog = catalog::list(&shared.cfg.snapshot_dir)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string() + "\n"))?;
    let chains: Vec<serde_json::Value> = catalog
        .chains
        .iter()
        .map(|c| {
            let members: Vec<serde_json::Value> = c
                .members
                .iter()
                .map(|m| match &m.state {
                    Member::Complete(man) => serde_json::json!({
                        "increment": m.increment, "cut": man.cut, "created_unix_ms": man.created_unix_ms,
                        "bytes": man.size_bytes(), "complete": true,
                    }),
                    _ => serde_json::json!({ "increment": m.increment, "complete": false }),
                })
                .collect();
            serde_json::json!({ "name": c.name, "members": members })
        })
        .collect();
    Ok(Json(serde_json::json!({ "root": catalog.root, "snapshots": chains })))
}

/// The process's metrics in Prometheus text format, with per-vnode gauges read at the scrape.
async fn metrics(State(shared): State<Arc<Shared>>) -> Result<impl IntoResponse, Refusal> {
    for v in shared.statuses().await.iter().filter(|v| v.kind == "store") {
        crate::telemetry::prepared(&v.id, v.prepared);
        crate::telemetry::held_replies(&v.id, v.held_replies);
        crate::telemetry::catch_up(&v.id, v.learning.len(), v.copy_pages_served, v.copied_entries);
    }
    crate::telemetry::memory(shared.memory.used_bytes(), shared.memory.limit_bytes());
    let text = crate::telemetry::render()
        .ok_or((StatusCode::SERVICE_UNAVAILABLE, "no metrics recorder of Waymark's in this process\n".into()))?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

async fn status(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let vnodes = shared.statuses().await;
    let links = &shared.links;
    let router = &shared.router.stats;
    Json(serde_json::json!({
        "cluster": shared.cfg.cluster.name,
        "host": shared.cfg.host,
        "uptime_seconds": shared.started.elapsed().as_secs(),
        "memory": {
            "used_bytes": shared.memory.used_bytes(),
            "limit_bytes": shared.memory.limit_bytes(),
            "limit_reached": shared.memory.reached(),
        },
        "vnodes": vnodes,
        "links": {
            "connects": links.connects.load(Ordering::Relaxed),
            "auth_failures": links.auth_failures.load(Ordering::Relaxed),
            "malformed_frames": links.malformed_frames.load(Ordering::Relaxed),
            "handshakes_shed": links.handshakes_shed.load(Ordering::Relaxed),
        },
        "router": {
            "dropped_local": router.dropped_local.load(Ordering::Relaxed),
            "dropped_peer": router.dropped_peer.load(Ordering::Relaxed),
            "dropped_too_big": router.dropped_too_big.load(Ordering::Relaxed),
            "unknown_vnode": router.unknown_vnode.load(Ordering::Relaxed),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use waymark_core::acl::{self, Users};

    fn basic(user: &str, password: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
    }

    fn users() -> Users {
        let mut admin = acl::User::default();
        let mut reader = acl::User::default();
        for r in ["on", ">adminpw", "allkeys", "+@all"] {
            admin.apply(r.as_bytes(), [1; 16]).unwrap();
        }
        for r in ["on", ">readpw", "allkeys", "+@read"] {
            reader.apply(r.as_bytes(), [2; 16]).unwrap();
        }
        let records = [(acl::key("admin"), admin.encode()), (acl::key("reader"), reader.encode())];
        Users::from_records(records.iter().map(|(k, v)| (k, v)), true)
    }

    #[test]
    fn the_token_or_an_admin_user_is_accepted_and_nothing_else() {
        let users = users();
        let token = b"0123456789abcdef0123".as_slice();
        let c = Credentials { token: Some(token), default_password: Some(b"defaultpw"), users: &users };
        assert!(c.check(Some("Bearer 0123456789abcdef0123")).is_ok());
        assert!(c.check(Some("Bearer 0123456789abcdef012")).is_err(), "a prefix");
        assert!(c.check(Some("Bearer 0123456789abcdef01234")).is_err(), "longer");
        assert!(c.check(Some("Bearer ")).is_err());
        assert!(c.check(None).is_err());
        assert!(c.check(Some(&basic("admin", "adminpw"))).is_ok());
        assert!(c.check(Some(&basic("admin", "wrong"))).is_err());
        assert!(c.check(Some(&basic("reader", "readpw"))).is_err(), "no @admin");
        assert!(c.check(Some(&basic("default", "defaultpw"))).is_ok());
        assert!(c.check(Some(&basic("nobody", "x"))).is_err());
        assert!(c.check(Some("Basic !!!")).is_err());
        let no_password = Credentials { token: None, default_password: None, users: &users };
        assert!(no_password.check(Some(&basic("default", ""))).is_err(), "no password, no default user");
        assert_eq!(no_password.check(Some("Bearer x")).unwrap_err().0, StatusCode::FORBIDDEN);
    }

    #[test]
    fn secrets_of_any_length_compare_by_their_digests() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abcd") && !same_secret(b"", b"abc") && !same_secret(b"abd", b"abc"));
    }
}
