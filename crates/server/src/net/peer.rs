//! Peer links (DESIGN §7): one TCP connection per pair of hosts — the host whose name sorts first
//! dials, the other accepts — authenticated (`auth.rs`) before any envelope is accepted, then
//! carrying envelopes both ways in frames (`frame.rs`), each sealed with the connection's keys
//! (`seal.rs`). The senders write their frames themselves (`outgoing.rs`); the link's task reads,
//! and writes what the socket did not take at once. FIFO per connection; a broken connection loses
//! what was in flight, and the dialer reconnects with capped, doubling back-off.
//!
//! With `[tls]` every link is mutual TLS first (`PeerTls`): the acceptor takes only a dialer whose
//! certificate the cluster's CA signed, the dialer only an acceptor whose certificate names the
//! host it dialed; the secret's handshake and the sealed frames then run inside TLS unchanged. A
//! TLS handshake that fails is counted with the authentication failures.
//!
//! Before its handshake ends a connection may send frames of `HANDSHAKE_FRAME_MAX_BYTES` only, and
//! at most `HANDSHAKES_MAX` handshakes run at once: a connection past that is closed at once.
//!
//! A frame that is too big, fails its MAC, does not decode, or claims to come from another host
//! closes that link only, logged with the peer's address and no more than the frame's number and
//! size; nothing in it is applied.

use super::auth::{self, Identity};
use super::frame::{self, PeerFramed};
use super::outgoing::Outgoing;
use super::seal::{Opener, SealError, Session};
use super::stream::{self, PeerReader, PeerStream, PeerWriter};
use crate::router::Router;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;
use waymark_core::Envelope;

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Handshakes the accept loop runs at once; a connection past them is closed at once. A cluster's
/// own peers need one each; the bound keeps strangers from holding many sockets and tasks for
/// `auth::HANDSHAKE_TIMEOUT` each.
pub const HANDSHAKES_MAX: usize = 64;

#[derive(Default)]
pub struct LinkStats {
    pub auth_failures: AtomicU64,
    pub malformed_frames: AtomicU64,
    pub connects: AtomicU64,
    /// Connections closed unheard because `HANDSHAKES_MAX` handshakes were running.
    pub handshakes_shed: AtomicU64,
}

/// What every link of this host shares.
#[derive(Clone)]
pub struct LinkContext {
    pub me: Identity,
    pub hosts: Vec<String>,
    pub frame_max_bytes: usize,
    pub router: Arc<Router>,
    pub stats: Arc<LinkStats>,
    pub shutdown: CancellationToken,
    /// Mutual TLS on every link, when the host has `[tls]`.
    pub tls: Option<PeerTls>,
}

/// Both ends of a link's TLS: accepting with the peers' settings (a client certificate the CA
/// signed is required), dialing with this host's certificate.
#[derive(Clone)]
pub struct PeerTls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub connector: tokio_rustls::TlsConnector,
}

impl PeerTls {
    pub fn new(tls: &crate::tls::HostTls) -> PeerTls {
        PeerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(tls.peers.clone()),
            connector: tokio_rustls::TlsConnector::from(tls.dial.clone()),
        }
    }
}

/// Why a TLS handshake on a peer link failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsHandshakeError {
    #[error("TLS handshake: {0}")]
    Io(#[source] std::io::Error),
    #[error("no TLS handshake within {:?}", auth::HANDSHAKE_TIMEOUT)]
    Timeout,
    #[error("`{0}` cannot be a TLS server name")]
    Name(String),
}

/// The accepting end's TLS, within `auth::HANDSHAKE_TIMEOUT`; the plaintext stream without TLS.
async fn accept_tls(tls: Option<&PeerTls>, stream: TcpStream) -> Result<PeerStream, TlsHandshakeError> {
    let Some(tls) = tls else { return Ok(stream.into()) };
    let accepted = tokio::time::timeout(auth::HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream))
        .await
        .map_err(|_| TlsHandshakeError::Timeout)?
        .map_err(TlsHandshakeError::Io)?;
    Ok(PeerStream::Tls(Box::new(accepted.into())))
}

/// The dialing end's TLS to `host` (its certificate must name it).
async fn dial_tls(tls: Option<&PeerTls>, stream: TcpStream, host: &str) -> Result<PeerStream, TlsHandshakeError> {
    let Some(tls) = tls else { return Ok(stream.into()) };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| TlsHandshakeError::Name(auth::bounded(host)))?;
    let dialed = tokio::time::timeout(auth::HANDSHAKE_TIMEOUT, tls.connector.connect(name, stream))
        .await
        .map_err(|_| TlsHandshakeError::Timeout)?
        .map_err(TlsHandshakeError::Io)?;
    Ok(PeerStream::Tls(Box::new(dialed.into())))
}

/// One remote host: where to reach it, and what waits to be written to it.
pub struct Peer {
    pub host: String,
    pub addr: SocketAddr,
    pub out: Arc<Outgoing>,
}

/// Starts the accept loop on `listener` (bound by the node) and one link task per peer.
pub fn start(ctx: LinkContext, listener: TcpListener, peers: Vec<Peer>) {
    let mut accepted = HashMap::new();
    for peer in peers {
        if ctx.me.host < peer.host {
            tokio::spawn(dialing(ctx.clone(), peer));
        } else {
            let (tx, rx) = mpsc::channel(4);
            accepted.insert(peer.host.clone(), tx);
            tokio::spawn(accepting(ctx.clone(), peer, rx));
        }
    }
    tokio::spawn(listen_loop(ctx, listener, accepted));
}

/// A connection that passed its handshake, on its way to the link of the peer that dialed.
struct Accepted {
    framed: PeerFramed,
    session: Session,
    addr: SocketAddr,
}

async fn listen_loop(ctx: LinkContext, listener: TcpListener, accepted: HashMap<String, mpsc::Sender<Accepted>>) {
    let accepted = Arc::new(accepted);
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_MAX));
    loop {
        let (stream, addr) = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("peer listener: accept failed: {e}");
                    tokio::time::sleep(BACKOFF_MIN).await;
                    continue;
                }
            },
        };
        let Ok(handshake) = handshakes.clone().try_acquire_owned() else {
            // Counted, not logged: a flood of them would flood the log too.
            ctx.stats.handshakes_shed.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        };
        let (ctx, accepted) = (ctx.clone(), accepted.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let stream = match accept_tls(ctx.tls.as_ref(), stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    ctx.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
                    return tracing::warn!(%addr, "peer refused: {e}");
                }
            };
            let mut framed = frame::handshaking(stream);
            let result = auth::accept(&mut framed, &ctx.me, &ctx.hosts).await;
            drop(handshake);
            match result {
                Ok((host, session)) => match accepted.get(&host) {
                    Some(tx) => {
                        frame::authenticated(&mut framed, ctx.frame_max_bytes);
                        drop(tx.send(Accepted { framed, session, addr }).await)
                    }
                    None => tracing::warn!(%addr, "peer {host} dialed, but this host dials it: closing"),
                },
                Err(e) => {
                    ctx.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%addr, "peer refused: {e}");
                }
            }
        });
    }
}

/// This host dials `peer`, again and again with capped back-off whenever the link breaks.
async fn dialing(ctx: LinkContext, mut peer: Peer) {
    let mut backoff = BACKOFF_MIN;
    while !ctx.shutdown.is_cancelled() {
        match connect(&ctx, &peer).await {
            Ok((framed, session)) => {
                backoff = BACKOFF_MIN;
                tracing::info!(peer = %peer.host, addr = %peer.addr, "peer link up");
                let why = run(&ctx, &mut peer, framed, session, None).await;
                tracing::warn!(peer = %peer.host, addr = %peer.addr, "peer link down: {why}");
            }
            Err(e) => tracing::debug!(peer = %peer.host, addr = %peer.addr, "cannot link: {e}"),
        }
        // What was sent during the last back-off goes out on the next connection; older is lost.
        peer.out.discard();
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Why a dial of a peer did not give an authenticated link (it is tried again after a back-off).
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("connect timed out")]
    TimedOut,
    #[error("{0}")]
    Io(#[source] std::io::Error),
    #[error("{0}")]
    Auth(#[source] auth::AuthError),
    #[error("{0}")]
    Tls(#[source] TlsHandshakeError),
}

async fn connect(ctx: &LinkContext, peer: &Peer) -> Result<(PeerFramed, Session), ConnectError> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(peer.addr))
        .await
        .map_err(|_| ConnectError::TimedOut)?
        .map_err(ConnectError::Io)?;
    let _ = stream.set_nodelay(true);
    let stream = match dial_tls(ctx.tls.as_ref(), stream, &peer.host).await {
        Ok(stream) => stream,
        Err(e) => {
            ctx.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(peer = %peer.host, addr = %peer.addr, "{e}");
            return Err(ConnectError::Tls(e));
        }
    };
    let mut framed = frame::handshaking(stream);
    let session = match auth::dial(&mut framed, &ctx.me, &peer.host).await {
        Ok(session) => session,
        Err(e) => {
            ctx.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(peer = %peer.host, addr = %peer.addr, "authentication failed: {e}");
            return Err(ConnectError::Auth(e));
        }
    };
    frame::authenticated(&mut framed, ctx.frame_max_bytes);
    ctx.stats.connects.fetch_add(1, Ordering::Relaxed);
    Ok((framed, session))
}

/// `peer` dials this host: each authenticated connection it makes replaces the previous one.
async fn accepting(ctx: LinkContext, mut peer: Peer, mut accepted: mpsc::Receiver<Accepted>) {
    let mut next = None;
    loop {
        let Accepted { framed, session, addr } = match next.take() {
            Some(c) => c,
            None => tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                c = accepted.recv() => match c { Some(c) => c, None => return },
                // While the peer is away, what is queued for it is lost, as on a broken link.
                _ = tokio::time::sleep(BACKOFF_MAX) => { peer.out.discard(); continue; }
            },
        };
        ctx.stats.connects.fetch_add(1, Ordering::Relaxed);
        tracing::info!(peer = %peer.host, %addr, "peer link up");
        peer.addr = addr;
        let why = run(&ctx, &mut peer, framed, session, Some(&mut accepted)).await;
        tracing::warn!(peer = %peer.host, %addr, "peer link down: {why}");
        if let Why::Replaced(c) = why {
            next = Some(*c);
        }
    }
}

enum Why {
    Shutdown,
    Closed,
    Write(std::io::Error),
    Malformed(Malformed),
    Replaced(Box<Accepted>),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Shutdown => write!(f, "shutting down"),
            Why::Closed => write!(f, "closed by the peer"),
            Why::Write(e) => write!(f, "write: {e}"),
            Why::Malformed(e) => write!(f, "malformed frame: {e}"),
            Why::Replaced(_) => write!(f, "replaced by a new connection"),
        }
    }
}

/// Carries envelopes both ways until the connection breaks, shutdown, or a new connection. While
/// it runs, the senders write to this connection; when it ends, what waits for it is dropped.
async fn run(
    ctx: &LinkContext,
    peer: &mut Peer,
    framed: PeerFramed,
    session: Session,
    replacement: Option<&mut mpsc::Receiver<Accepted>>,
) -> Why {
    let (mut stream, conn) = split(framed);
    let mut opener = session.opener;
    peer.out.attach(conn.clone(), session.sealer);
    let write = async { Why::Write(peer.out.write_backlog(&conn).await) };
    let (host, addr) = (peer.host.clone(), peer.addr);
    let read = async {
        loop {
            let bytes = match stream.next().await {
                None => return Why::Closed,
                Some(Err(e)) => return malformed(ctx, &host, addr, Malformed::Read(e)),
                Some(Ok(b)) => b,
            };
            let env = match open(&mut opener, &bytes) {
                Ok(env) => env,
                Err(e) => return malformed(ctx, &host, addr, e),
            };
            if env.from.host != host || env.to.host != ctx.me.host {
                let e = Malformed::Misaddressed { from: env.from, to: env.to, host: host.clone() };
                return malformed(ctx, &host, addr, e);
            }
            ctx.router.deliver(env).await;
        }
    };
    let replaced = async {
        match replacement {
            Some(rx) => match rx.recv().await {
                Some(c) => Why::Replaced(Box::new(c)),
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    };
    let why = tokio::select! {
        _ = ctx.shutdown.cancelled() => Why::Shutdown,
        w = write => w,
        r = read => r,
        c = replaced => c,
    };
    peer.out.detach();
    why
}

/// The authenticated connection as a reader of frames (keeping what the handshake read ahead) and
/// a writer the senders share.
fn split(framed: PeerFramed) -> (FramedRead<PeerReader, LengthDelimitedCodec>, Arc<PeerWriter>) {
    let parts = framed.into_parts();
    // The handshake's frames were flushed before it ended (`auth.rs` sends with `SinkExt::send`).
    debug_assert!(parts.write_buf.is_empty(), "the handshake left bytes unwritten");
    let (read, write) = stream::split(parts.io);
    let mut reader = FramedRead::new(read, parts.codec);
    reader.read_buffer_mut().extend_from_slice(&parts.read_buf);
    (reader, write)
}

/// The envelope in a frame whose MAC is right.
fn open(opener: &mut Opener, frame: &[u8]) -> Result<Envelope, Malformed> {
    let body = opener.open(frame).map_err(Malformed::Seal)?;
    frame::decode(body).map_err(Malformed::Decode)
}

/// What was wrong with a frame that closed its link. Nothing of the frame's bytes is in it.
#[derive(Debug, thiserror::Error)]
enum Malformed {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("{0}")]
    Seal(SealError),
    #[error("{0}")]
    Decode(frame::FrameError),
    #[error("envelope from {from} to {to} on the link of {host}")]
    Misaddressed { from: waymark_core::VnodeId, to: waymark_core::VnodeId, host: String },
}

fn malformed(ctx: &LinkContext, host: &str, addr: SocketAddr, e: Malformed) -> Why {
    ctx.stats.malformed_frames.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(peer = %host, %addr, "malformed frame: {e}; closing this link");
    Why::Malformed(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::seal::{Sealer, TAG_BYTES};
    use crate::vnode::VnodeCmd;
    use futures_util::SinkExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use waymark_core::alter::AlterMsg;
    use waymark_core::{Body, VnodeId};

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    /// Well under `auth::HANDSHAKE_TIMEOUT` (5 s): a connection closed within it was closed at
    /// once, not by the handshake's timeout.
    const CLOSED_AT_ONCE_WITHIN: Duration = Duration::from_secs(1);
    /// How long a test waits for what should happen before it fails rather than hangs.
    const WITHIN: Duration = Duration::from_secs(10);

    fn identity(host: &str) -> Identity {
        Identity { cluster: "c".into(), host: host.into(), secret: SECRET.to_vec() }
    }

    /// Host `b` listening for its peer `a` (which dials it, its name sorting first), with a large
    /// frame limit after authentication; and the queue of b's vnode `store0@b`.
    async fn b_listening() -> (SocketAddr, Arc<LinkStats>, mpsc::Receiver<VnodeCmd>, tokio_util::sync::DropGuard) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let out = Arc::new(Outgoing::new(16, 64 << 20));
        let router = Arc::new(Router::new("b".into(), [("a".to_string(), out.clone())].into()));
        let (tx, rx) = mpsc::channel(16);
        router.add_local(VnodeId::new("store0", "b"), tx);
        let stats = Arc::new(LinkStats::default());
        let shutdown = CancellationToken::new();
        let ctx = LinkContext {
            me: identity("b"),
            hosts: vec!["a".into(), "b".into()],
            frame_max_bytes: 64 << 20,
            router,
            stats: stats.clone(),
            shutdown: shutdown.clone(),
            tls: None,
        };
        let peer = Peer { host: "a".into(), addr: "127.0.0.1:1".parse().unwrap(), out };
        start(ctx, listener, vec![peer]);
        (addr, stats, rx, shutdown.drop_guard())
    }

    /// Whether the other end closed `stream` within `limit` (anything it sent before is skipped).
    async fn closed_within(stream: &mut (impl tokio::io::AsyncRead + Unpin), limit: Duration) -> bool {
        let mut rest = vec![];
        tokio::time::timeout(limit, stream.read_to_end(&mut rest)).await.is_ok()
    }

    #[tokio::test]
    async fn a_hello_announcing_more_than_the_handshake_frame_limit_is_refused_at_once() {
        let (addr, _stats, _rx, _stop) = b_listening().await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(&(1u32 << 20).to_be_bytes()).await.unwrap();
        stream.write_all(&[0; 64]).await.unwrap();
        assert!(closed_within(&mut stream, CLOSED_AT_ONCE_WITHIN).await, "b waits for a 1 MiB Hello");
    }

    #[tokio::test]
    async fn connections_past_the_bound_on_handshakes_are_closed_at_once() {
        let (addr, stats, _rx, _stop) = b_listening().await;
        let mut idle = vec![];
        for _ in 0..HANDSHAKES_MAX {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let mut one_more = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut one_more, CLOSED_AT_ONCE_WITHIN).await, "b took a handshake past the bound");
        assert_eq!(stats.handshakes_shed.load(Ordering::Relaxed), 1);
        // Those within the bound wait for their Hello until the handshake's timeout.
        assert!(
            !closed_within(&mut idle[0], Duration::from_millis(100)).await,
            "b closed a handshake within the bound"
        );
    }

    fn alive(sent_us: u64) -> Envelope {
        let body = Body::Alter(AlterMsg::Alive { sent_us, echo_us: None });
        Envelope { from: VnodeId::new("store0", "a"), to: VnodeId::new("store0", "b"), cut: None, body }
    }

    /// Dials b as `a`, holding the cluster secret.
    async fn dial_b_as_a(addr: SocketAddr) -> (PeerFramed, Session) {
        let mut framed = frame::framed(TcpStream::connect(addr).await.unwrap(), 64 << 20);
        let session = auth::dial(&mut framed, &identity("a"), "b").await.expect("a is welcome");
        (framed, session)
    }

    /// Writes `env` framed as `a` frames it, with one byte of its `sent_us` changed by `alter`
    /// after it was sealed.
    async fn send_altered(framed: &mut PeerFramed, sealer: &mut Sealer, env: &Envelope, alter: u8) {
        let mut bytes = frame::encode_sealed(env, sealer).to_vec();
        // The last two bytes of an `Alive`, before the tag: `sent_us` (one byte when under 128)
        // and `echo_us`.
        let at = bytes.len() - TAG_BYTES - 2;
        bytes[at] ^= alter;
        framed.send(bytes::Bytes::from(bytes)).await.unwrap();
    }

    async fn delivered(rx: &mut mpsc::Receiver<VnodeCmd>) -> Option<Envelope> {
        match tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
            Ok(Some(VnodeCmd::Deliver(env))) => Some(env),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_frame_altered_on_the_wire_closes_the_link_and_is_not_delivered() {
        let (addr, stats, mut rx, _stop) = b_listening().await;
        let (mut framed, mut session) = dial_b_as_a(addr).await;
        send_altered(&mut framed, &mut session.sealer, &alive(1), 0).await;
        assert_eq!(delivered(&mut rx).await, Some(alive(1)), "an unaltered frame is delivered");
        send_altered(&mut framed, &mut session.sealer, &alive(2), 0b1).await;
        assert_eq!(delivered(&mut rx).await, None, "b delivered an altered frame");
        let mut stream = framed.into_inner();
        assert!(closed_within(&mut stream, WITHIN).await, "b kept the link open after an altered frame");
        assert_eq!(stats.malformed_frames.load(Ordering::Relaxed), 1);
    }
}
