//! Accepts Redis clients and runs each connection: read, parse (`waymark-resp`, with Redis's
//! limits), handle, and write the replies of everything that arrived together in one write (so a
//! pipelining client gets its replies batched). A protocol error gets `-ERR Protocol error: …` and
//! closes that connection only.
//!
//! With `[tls]` the port speaks TLS only: a connection whose TLS handshake fails (a plaintext
//! client's first bytes are not a TLS record) or does not end within `node.auth_timeout` is
//! closed before a byte of it is parsed.

use super::session::{Next, Session};
use crate::host::Shared;
use bytes::{Buf, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use waymark_core::ClientId;
use waymark_resp::{Limits, Reply, RequestParser};

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// Encoded replies held for one connection before they are written, while more pipelined
/// commands wait; one reply alone is bounded by `limits.reply_max_bytes`.
const OUT_FLUSH_BYTES: usize = 1 << 20;

/// Serves Redis clients on `listener` (bound by the node) until `stop`.
pub fn start(shared: Arc<Shared>, listener: TcpListener, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(shared.cfg.limits.clients_max));
    let tls = shared.tls.as_ref().map(|t| tokio_rustls::TlsAcceptor::from(t.clients.clone()));
    tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = stop.cancelled() => return,
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!("redis listener: accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                // A TLS client would read the plaintext refusal as a broken record: it is closed.
                if tls.is_none() {
                    tokio::spawn(refuse(stream));
                }
                continue;
            };
            let (shared, stop, tls) = (shared.clone(), stop.clone(), tls.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    r = accept(shared, stream, peer, tls) => if let Err(e) = r { tracing::debug!(%peer, "client connection: {e}") },
                }
                drop(slot);
            });
        }
    });
}

/// Reads what the client sent next; 0 when it closed, or when it stayed silent past its
/// deadline: `node.auth_timeout` from the connection's opening until it authenticates, then
/// `node.idle_timeout` from its last request (none when zero). Either closes the connection, so
/// an anonymous or forgotten connection gives its `limits.clients_max` slot back.
/// Serves one connection, after its TLS handshake when the port speaks TLS.
async fn accept(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let addrs = (peer, stream.local_addr()?);
    let Some(tls) = tls else { return serve(shared, stream, addrs).await };
    let handshake_timeout = shared.cfg.auth_timeout;
    match tokio::time::timeout(handshake_timeout, tls.accept(stream)).await {
        Ok(Ok(stream)) => serve(shared, stream, addrs).await,
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake within node.auth_timeout")),
    }
}

async fn read_some<S: AsyncRead + Unpin>(
    shared: &Shared,
    session: &Session,
    opened: tokio::time::Instant,
    stream: &mut S,
    input: &mut BytesMut,
) -> std::io::Result<usize> {
    let cfg = &shared.cfg;
    let deadline = if !session.authenticated {
        Some(opened + cfg.auth_timeout)
    } else if !cfg.idle_timeout.is_zero() {
        Some(tokio::time::Instant::now() + cfg.idle_timeout)
    } else {
        None
    };
    let Some(deadline) = deadline else { return stream.read_buf(input).await };
    match tokio::time::timeout_at(deadline, stream.read_buf(input)).await {
        Ok(read) => read,
        Err(_) => {
            let why =
                if session.authenticated { "idle for node.idle_timeout" } else { "no AUTH within node.auth_timeout" };
            tracing::debug!(client = session.id.0, "closing the connection: {why}");
            Ok(0)
        }
    }
}

/// Reads what the client sends while a command runs (its next commands, kept for later) until
/// it closes the connection, or `cap` bytes wait: then it waits for ever.
async fn until_closed<S: AsyncRead + Unpin>(stream: &mut S, input: &mut BytesMut, cap: usize) {
    while input.len() < cap {
        match stream.read_buf(input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    std::future::pending::<()>().await
}

async fn refuse(mut stream: TcpStream) {
    let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
}

/// Runs one connection (`addrs`: the client's address, then the one it reached) until it closes,
/// breaks the protocol, times out, or a `CLIENT KILL` names it.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut stream: S,
    (addr, laddr): (SocketAddr, SocketAddr),
) -> std::io::Result<()> {
    // A command larger than a frame could never commit: refused before its bytes are held.
    let limits = Limits {
        bulk_max_bytes: shared.cfg.limits.bulk_max_bytes,
        command_max_bytes: shared.cfg.limits.frame_max_bytes,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    let id = ClientId(NEXT_CLIENT.fetch_add(1, Ordering::Relaxed));
    let (registration, killed) = shared.clients.register(id.0, addr, laddr);
    let mut session = Session::new(shared.clone(), id, registration);
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    let opened = tokio::time::Instant::now();
    loop {
        let read = tokio::select! {
            _ = killed.cancelled() => return Ok(()),
            read = read_some(&shared, &session, opened, &mut stream, &mut input) => read?,
        };
        if read == 0 {
            return Ok(());
        }
        session.arrived = std::time::Instant::now();
        loop {
            let parsed = match parser.parse(&input, session.authenticated) {
                Ok(p) => p,
                Err(e) => {
                    Reply::error(format!("ERR {e}")).encode(session.proto, &mut out);
                    stream.write_all(&out).await?;
                    return Ok(());
                }
            };
            input.advance(parsed.consumed);
            let Some(args) = parsed.command else { break };
            let (reply, next) = match session.may_block(&args) {
                // A client that closes while blocked (`BLPOP`) leaves the queue of the keys it
                // waited on (`crate::blocked`) — or it would hold up every client after it.
                true => tokio::select! {
                    handled = session.handle(args) => handled,
                    _ = until_closed(&mut stream, &mut input, limits.command_max_bytes) => return Ok(()),
                },
                false => session.handle(args).await,
            };
            reply.encode(session.proto, &mut out);
            // Killed (perhaps by its own `CLIENT KILL`): the reply goes, then the connection closes.
            if matches!(next, Next::Close) || killed.is_cancelled() {
                stream.write_all(&out).await?;
                return Ok(());
            }
            // Pipelined replies go out as they pile up: a burst of GETs of a large value would
            // otherwise all wait in memory for the last one. The client reading slowly then
            // slows only its own connection.
            if out.len() >= OUT_FLUSH_BYTES {
                stream.write_all(&out).await?;
                out.clear();
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
    }
}
