//! Peer authentication (DESIGN §7): before a link carries any envelope, both ends prove they hold
//! the cluster secret, by HMAC-SHA256 challenge and response, without sending it; and both derive
//! the keys that seal every frame after (`seal.rs`).
//!
//! ```text
//! dialer   ── Hello{cluster, host, nonce_d} ─────────────────────────▶ acceptor
//! dialer   ◀── Challenge{host, nonce_a} ──────────────────────────────── acceptor
//! dialer   ── Proof{proof_d = mac("dial", …)} ──────────────────────▶ acceptor
//! dialer   ◀── Welcome{proof_a = mac("accept", …)} | Refused{reason} ── acceptor
//! dialer   ◀─▶ frames sealed with mac(k_direction, seq ‖ frame) ◀─▶ acceptor
//! ```
//! Each proof covers the role, the cluster, both host names and both nonces, so a proof cannot be
//! replayed on another link, in the other direction, or for another host. Fresh random nonces on
//! both sides make every proof new. Proofs are compared in constant time (`Mac::verify_slice`).
//!
//! The dialer proves first: a proof over inputs its receiver knows lets the receiver test guesses
//! of the secret offline, so the acceptor sends its own only to a dialer that proved it holds the
//! secret. (A dialer reaches only the addresses of its config.) Someone who can read the traffic
//! can still test guesses against the proofs: the secret must be too long to guess, as
//! `cluster init`'s 32 random bytes are; the config refuses one under 16 bytes.
//!
//! The keys of the two directions, `k_dial` (dialer to acceptor) and `k_accept`, are HMACs of the
//! same transcript with their own labels: new with each connection, different for each direction.

use super::frame::{self, PeerFramed};
use super::seal::{Key, Session};
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::time::Duration;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most characters of a name the peer sent that go into an error (and so into a log line or a
/// refusal): cluster and host names are at most 64.
const PEER_TEXT_CHARS_MAX: usize = 64;

type Nonce = [u8; 32];
type Proof = [u8; 32];

#[derive(Debug, Serialize, Deserialize)]
pub enum Handshake {
    Hello { cluster: String, host: String, nonce: Nonce },
    Challenge { host: String, nonce: Nonce },
    Proof { proof: Proof },
    Welcome { proof: Proof },
    Refused { reason: String },
}

impl Handshake {
    /// The message's name, for an error that must not echo what a peer sent.
    fn kind(&self) -> &'static str {
        match self {
            Handshake::Hello { .. } => "Hello",
            Handshake::Challenge { .. } => "Challenge",
            Handshake::Proof { .. } => "Proof",
            Handshake::Welcome { .. } => "Welcome",
            Handshake::Refused { .. } => "Refused",
        }
    }
}

/// Who this end is, and the secret it proves it holds.
#[derive(Clone)]
pub struct Identity {
    pub cluster: String,
    pub host: String,
    pub secret: Vec<u8>,
}

/// Why a handshake failed. Text the peer sent is cut to `PEER_TEXT_CHARS_MAX` characters.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("connection closed during the handshake")]
    Closed,
    #[error("handshake frame: {0}")]
    Read(#[source] std::io::Error),
    #[error("handshake frame: {0}")]
    Frame(#[from] frame::FrameError),
    #[error("unexpected handshake message {0}")]
    Unexpected(&'static str),
    #[error("the peer is {found}, expected {expected}")]
    WrongHost { expected: String, found: String },
    #[error("the peer belongs to cluster {0}")]
    WrongCluster(String),
    #[error("{0} is not a host of this cluster")]
    UnknownHost(String),
    #[error("the peer's proof is wrong: it does not hold this cluster's secret")]
    BadProof,
    #[error("the peer refused us: {0}")]
    Refused(String),
    #[error("the handshake took longer than {HANDSHAKE_TIMEOUT:?}")]
    Timeout,
}

/// At most `PEER_TEXT_CHARS_MAX` characters of `text`, with control characters escaped: a peer's
/// words go into log lines.
pub(crate) fn bounded(text: &str) -> String {
    let mut out: String = text.chars().take(PEER_TEXT_CHARS_MAX).flat_map(char::escape_debug).collect();
    if text.chars().nth(PEER_TEXT_CHARS_MAX).is_some() {
        out.push('…');
    }
    out
}

/// What both proofs and both keys cover.
struct Transcript<'a> {
    cluster: &'a str,
    dialer: &'a str,
    acceptor: &'a str,
    dialer_nonce: &'a Nonce,
    acceptor_nonce: &'a Nonce,
}

impl Transcript<'_> {
    fn mac(&self, secret: &[u8], role: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
        let fields = (role, self.cluster, self.dialer, self.acceptor, self.dialer_nonce, self.acceptor_nonce);
        mac.update(&postcard::to_stdvec(&("waymark-peer-auth-v1", fields)).expect("serializes"));
        mac
    }

    fn proof(&self, secret: &[u8], role: &str) -> Proof {
        self.mac(secret, role).finalize().into_bytes().into()
    }

    fn verify(&self, secret: &[u8], role: &str, proof: &Proof) -> bool {
        self.mac(secret, role).verify_slice(proof).is_ok()
    }

    /// The key of one direction: its label differs from the proofs' roles, so no proof sent on
    /// the wire is a key.
    fn key(&self, secret: &[u8], direction: &str) -> Key {
        self.mac(secret, direction).finalize().into_bytes().into()
    }

    fn dialer_session(&self, secret: &[u8]) -> Session {
        Session::new(&self.key(secret, "key dialer to acceptor"), &self.key(secret, "key acceptor to dialer"))
    }

    fn acceptor_session(&self, secret: &[u8]) -> Session {
        Session::new(&self.key(secret, "key acceptor to dialer"), &self.key(secret, "key dialer to acceptor"))
    }
}

fn nonce() -> Nonce {
    let mut n = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

async fn send(framed: &mut PeerFramed, msg: &Handshake) -> Result<(), AuthError> {
    framed.send(frame::encode(msg)).await.map_err(|_| AuthError::Closed)
}

async fn recv(framed: &mut PeerFramed) -> Result<Handshake, AuthError> {
    let bytes = framed.next().await.ok_or(AuthError::Closed)?.map_err(AuthError::Read)?;
    Ok(frame::decode(&bytes)?)
}

/// The dialing end: proves itself to `expected`, which then proves itself; returns the keys of
/// the link's frames.
pub async fn dial(framed: &mut PeerFramed, me: &Identity, expected: &str) -> Result<Session, AuthError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, dial_steps(framed, me, expected)).await.map_err(|_| AuthError::Timeout)?
}

async fn dial_steps(framed: &mut PeerFramed, me: &Identity, expected: &str) -> Result<Session, AuthError> {
    let dialer_nonce = nonce();
    send(framed, &Handshake::Hello { cluster: me.cluster.clone(), host: me.host.clone(), nonce: dialer_nonce }).await?;
    let (host, acceptor_nonce) = match recv(framed).await? {
        Handshake::Challenge { host, nonce } => (host, nonce),
        Handshake::Refused { reason } => return Err(AuthError::Refused(bounded(&reason))),
        other => return Err(AuthError::Unexpected(other.kind())),
    };
    if host != expected {
        return Err(AuthError::WrongHost { expected: expected.into(), found: bounded(&host) });
    }
    let t = Transcript {
        cluster: &me.cluster,
        dialer: &me.host,
        acceptor: &host,
        dialer_nonce: &dialer_nonce,
        acceptor_nonce: &acceptor_nonce,
    };
    send(framed, &Handshake::Proof { proof: t.proof(&me.secret, "dial") }).await?;
    match recv(framed).await? {
        Handshake::Welcome { proof } if t.verify(&me.secret, "accept", &proof) => Ok(t.dialer_session(&me.secret)),
        Handshake::Welcome { .. } => Err(AuthError::BadProof),
        Handshake::Refused { reason } => Err(AuthError::Refused(bounded(&reason))),
        other => Err(AuthError::Unexpected(other.kind())),
    }
}

/// The accepting end: learns who dials, checks it is a known host holding the secret, proves
/// itself in turn, and returns the dialer's name and the keys of the link's frames. A peer that
/// fails is told why (it learns nothing of the secret) and disconnected.
pub async fn accept(framed: &mut PeerFramed, me: &Identity, known: &[String]) -> Result<(String, Session), AuthError> {
    let steps = accept_steps(framed, me, known);
    let result = tokio::time::timeout(HANDSHAKE_TIMEOUT, steps).await.map_err(|_| AuthError::Timeout)?;
    if let Err(e) = &result {
        let _ = send(framed, &Handshake::Refused { reason: e.to_string() }).await;
    }
    result
}

async fn accept_steps(
    framed: &mut PeerFramed,
    me: &Identity,
    known: &[String],
) -> Result<(String, Session), AuthError> {
    let (cluster, host, dialer_nonce) = match recv(framed).await? {
        Handshake::Hello { cluster, host, nonce } => (cluster, host, nonce),
        other => return Err(AuthError::Unexpected(other.kind())),
    };
    if cluster != me.cluster {
        return Err(AuthError::WrongCluster(bounded(&cluster)));
    }
    if !known.contains(&host) || host == me.host {
        return Err(AuthError::UnknownHost(bounded(&host)));
    }
    let acceptor_nonce = nonce();
    let t = Transcript {
        cluster: &me.cluster,
        dialer: &host,
        acceptor: &me.host,
        dialer_nonce: &dialer_nonce,
        acceptor_nonce: &acceptor_nonce,
    };
    // No proof of ours yet: the dialer has proven nothing.
    send(framed, &Handshake::Challenge { host: me.host.clone(), nonce: acceptor_nonce }).await?;
    match recv(framed).await? {
        Handshake::Proof { proof } if t.verify(&me.secret, "dial", &proof) => {}
        Handshake::Proof { .. } => return Err(AuthError::BadProof),
        other => return Err(AuthError::Unexpected(other.kind())),
    }
    send(framed, &Handshake::Welcome { proof: t.proof(&me.secret, "accept") }).await?;
    let session = t.acceptor_session(&me.secret);
    Ok((host, session))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::seal::TAG_BYTES;
    use tokio::net::{TcpListener, TcpStream};

    fn id(host: &str, secret: &[u8]) -> Identity {
        Identity { cluster: "c".into(), host: host.into(), secret: secret.to_vec() }
    }

    /// An acceptor on a fresh port knowing hosts `a` and `b`, and a connection to it.
    async fn accepting(
        acceptor: Identity,
    ) -> (tokio::task::JoinHandle<Result<(String, Session), AuthError>>, frame::PeerFramed) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let known = vec!["a".to_string(), "b".to_string()];
        let accepting = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut f = frame::framed(s, 1 << 20);
            accept(&mut f, &acceptor, &known).await
        });
        (accepting, frame::framed(TcpStream::connect(addr).await.unwrap(), 1 << 20))
    }

    async fn handshake(
        dialer: Identity,
        acceptor: Identity,
    ) -> (Result<Session, AuthError>, Result<(String, Session), AuthError>) {
        let (accepting, mut f) = accepting(acceptor).await;
        let dialed = dial(&mut f, &dialer, "b").await;
        drop(f); // a dialer that gave up hangs up
        (dialed, accepting.await.unwrap())
    }

    #[tokio::test]
    async fn peers_holding_the_same_secret_are_welcome() {
        let (d, a) = handshake(id("a", b"0123456789abcdef"), id("b", b"0123456789abcdef")).await;
        let mut dialer = d.unwrap();
        let (host, mut acceptor) = a.unwrap();
        assert_eq!(host, "a");
        // Both ends derived the same keys, one per direction.
        let mut to_acceptor = [&b"hello"[..], &[0; TAG_BYTES]].concat();
        dialer.sealer.seal(&mut to_acceptor);
        assert_eq!(acceptor.opener.open(&to_acceptor), Ok(&b"hello"[..]));
        let mut to_dialer = [&b"hello"[..], &[0; TAG_BYTES]].concat();
        acceptor.sealer.seal(&mut to_dialer);
        assert_eq!(dialer.opener.open(&to_dialer), Ok(&b"hello"[..]));
        assert_ne!(to_acceptor, to_dialer, "both directions sealed with one key");
    }

    #[tokio::test]
    async fn a_peer_with_another_secret_is_refused_by_both_ends() {
        let (d, a) = handshake(id("a", b"0123456789abcdef"), id("b", b"another-secret-xx")).await;
        assert!(matches!(a, Err(AuthError::BadProof)), "{a:?}");
        assert!(matches!(d, Err(AuthError::Refused(_))), "{d:?}");
    }

    /// Something listening at a peer's address that answers as the peer would, but cannot prove
    /// it: it has the dialer's proof (which it cannot use elsewhere), and the dialer hangs up.
    #[tokio::test]
    async fn a_dialer_refuses_an_acceptor_that_cannot_prove_it_holds_the_secret() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let impostor = tokio::spawn(async move {
            let mut f = frame::framed(listener.accept().await.unwrap().0, 1 << 20);
            assert!(matches!(recv(&mut f).await, Ok(Handshake::Hello { .. })));
            send(&mut f, &Handshake::Challenge { host: "b".into(), nonce: [9; 32] }).await.unwrap();
            assert!(matches!(recv(&mut f).await, Ok(Handshake::Proof { .. })));
            send(&mut f, &Handshake::Welcome { proof: [0; 32] }).await.unwrap();
        });
        let mut f = frame::framed(TcpStream::connect(addr).await.unwrap(), 1 << 20);
        let dialed = dial(&mut f, &id("a", b"0123456789abcdef"), "b").await;
        assert!(matches!(dialed, Err(AuthError::BadProof)), "{dialed:?}");
        impostor.await.unwrap();
    }

    #[test]
    fn a_peers_long_or_strange_names_are_cut_and_escaped_before_they_reach_a_log() {
        let long = "x".repeat(4000);
        assert_eq!(bounded(&long), format!("{}…", "x".repeat(PEER_TEXT_CHARS_MAX)));
        assert_eq!(bounded("node1\n\u{1b}[31m"), "node1\\n\\u{1b}[31m");
        assert!(AuthError::UnknownHost(bounded(&long)).to_string().len() < 100);
    }

    /// Everything the acceptor writes to a dialer that says Hello, then sends a proof of zeros,
    /// until the acceptor hangs up; and the acceptor's nonce, from its Challenge.
    async fn what_an_unproven_dialer_hears(acceptor: Identity) -> (Vec<u8>, Nonce) {
        let (accepting, mut f) = accepting(acceptor).await;
        send(&mut f, &Handshake::Hello { cluster: "c".into(), host: "a".into(), nonce: [7; 32] }).await.unwrap();
        let mut heard = vec![];
        let first = f.next().await.expect("the acceptor answers a Hello").unwrap();
        heard.extend_from_slice(&first);
        let Ok(Handshake::Challenge { nonce: acceptor_nonce, .. }) = frame::decode(&first) else {
            panic!("the acceptor answered a Hello with {:?}", frame::decode::<Handshake>(&first));
        };
        send(&mut f, &Handshake::Proof { proof: [0; 32] }).await.unwrap();
        while let Some(Ok(bytes)) = f.next().await {
            heard.extend_from_slice(&bytes);
        }
        assert!(accepting.await.unwrap().is_err(), "the acceptor welcomed a proof of zeros");
        (heard, acceptor_nonce)
    }

    /// A proof over known inputs lets a dialer without the secret test guesses of a weak one
    /// offline; only a dialer that proved itself may see the acceptor's.
    #[tokio::test]
    async fn an_acceptor_sends_no_proof_to_a_dialer_that_has_not_proven_itself() {
        let secret = b"0123456789abcdef";
        let (heard, acceptor_nonce) = what_an_unproven_dialer_hears(id("b", secret)).await;
        let t = Transcript {
            cluster: "c",
            dialer: "a",
            acceptor: "b",
            dialer_nonce: &[7; 32],
            acceptor_nonce: &acceptor_nonce,
        };
        let proof = t.proof(secret, "accept");
        assert!(!heard.windows(proof.len()).any(|w| w == proof), "the acceptor sent its proof to an unproven dialer");
    }

    #[tokio::test]
    async fn a_host_that_is_not_in_the_cluster_is_refused() {
        let (d, a) = handshake(id("z", b"0123456789abcdef"), id("b", b"0123456789abcdef")).await;
        assert!(matches!(a, Err(AuthError::UnknownHost(_))), "{a:?}");
        assert!(matches!(d, Err(AuthError::Refused(_))), "{d:?}");
    }
}
