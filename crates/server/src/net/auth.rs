//! Peer authentication (DESIGN §7): before a link carries any envelope, both ends prove they hold
//! the cluster secret, by HMAC-SHA256 challenge and response, without sending it.
//!
//! ```text
//! dialer   ── Hello{cluster, host, nonce_d} ─────────────────────▶ acceptor
//! dialer   ◀── Challenge{host, nonce_a, proof_a = mac("accept", …)} ── acceptor
//! dialer   ── Proof{proof_d = mac("dial", …)} ──────────────────▶ acceptor
//! dialer   ◀── Welcome | Refused{reason} ────────────────────────── acceptor
//! ```
//! Each proof covers the role, the cluster, both host names and both nonces, so a proof cannot be
//! replayed on another link, in the other direction, or for another host. Fresh random nonces on
//! both sides make every proof new. Proofs are compared in constant time (`Mac::verify_slice`).

use super::frame::{self, PeerFramed};
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::time::Duration;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

type Nonce = [u8; 32];
type Proof = [u8; 32];

#[derive(Debug, Serialize, Deserialize)]
pub enum Handshake {
    Hello { cluster: String, host: String, nonce: Nonce },
    Challenge { host: String, nonce: Nonce, proof: Proof },
    Proof { proof: Proof },
    Welcome,
    Refused { reason: String },
}

/// Who this end is, and the secret it proves it holds.
#[derive(Clone)]
pub struct Identity {
    pub cluster: String,
    pub host: String,
    pub secret: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("connection closed during the handshake")]
    Closed,
    #[error("handshake frame: {0}")]
    Read(#[source] std::io::Error),
    #[error("handshake frame: {0}")]
    Frame(#[from] frame::FrameError),
    #[error("unexpected handshake message {0:?}")]
    Unexpected(Box<Handshake>),
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

/// What both proofs cover.
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

/// The dialing end: proves itself to `expected`, which must prove itself first.
pub async fn dial(framed: &mut PeerFramed, me: &Identity, expected: &str) -> Result<(), AuthError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, dial_steps(framed, me, expected)).await.map_err(|_| AuthError::Timeout)?
}

async fn dial_steps(framed: &mut PeerFramed, me: &Identity, expected: &str) -> Result<(), AuthError> {
    let dialer_nonce = nonce();
    send(framed, &Handshake::Hello { cluster: me.cluster.clone(), host: me.host.clone(), nonce: dialer_nonce }).await?;
    let (host, acceptor_nonce, proof) = match recv(framed).await? {
        Handshake::Challenge { host, nonce, proof } => (host, nonce, proof),
        Handshake::Refused { reason } => return Err(AuthError::Refused(reason)),
        other => return Err(AuthError::Unexpected(Box::new(other))),
    };
    if host != expected {
        return Err(AuthError::WrongHost { expected: expected.into(), found: host });
    }
    let t = Transcript {
        cluster: &me.cluster,
        dialer: &me.host,
        acceptor: &host,
        dialer_nonce: &dialer_nonce,
        acceptor_nonce: &acceptor_nonce,
    };
    if !t.verify(&me.secret, "accept", &proof) {
        return Err(AuthError::BadProof);
    }
    send(framed, &Handshake::Proof { proof: t.proof(&me.secret, "dial") }).await?;
    match recv(framed).await? {
        Handshake::Welcome => Ok(()),
        Handshake::Refused { reason } => Err(AuthError::Refused(reason)),
        other => Err(AuthError::Unexpected(Box::new(other))),
    }
}

/// The accepting end: learns who dials, checks it is a known host holding the secret, and returns
/// its name. A peer that fails is told why (it learns nothing of the secret) and disconnected.
pub async fn accept(framed: &mut PeerFramed, me: &Identity, known: &[String]) -> Result<String, AuthError> {
    let steps = accept_steps(framed, me, known);
    let result = tokio::time::timeout(HANDSHAKE_TIMEOUT, steps).await.map_err(|_| AuthError::Timeout)?;
    if let Err(e) = &result {
        let _ = send(framed, &Handshake::Refused { reason: e.to_string() }).await;
    }
    result
}

async fn accept_steps(framed: &mut PeerFramed, me: &Identity, known: &[String]) -> Result<String, AuthError> {
    let (cluster, host, dialer_nonce) = match recv(framed).await? {
        Handshake::Hello { cluster, host, nonce } => (cluster, host, nonce),
        other => return Err(AuthError::Unexpected(Box::new(other))),
    };
    if cluster != me.cluster {
        return Err(AuthError::WrongCluster(cluster));
    }
    if !known.contains(&host) || host == me.host {
        return Err(AuthError::UnknownHost(host));
    }
    let acceptor_nonce = nonce();
    let t = Transcript {
        cluster: &me.cluster,
        dialer: &host,
        acceptor: &me.host,
        dialer_nonce: &dialer_nonce,
        acceptor_nonce: &acceptor_nonce,
    };
    let proof = t.proof(&me.secret, "accept");
    send(framed, &Handshake::Challenge { host: me.host.clone(), nonce: acceptor_nonce, proof }).await?;
    match recv(framed).await? {
        Handshake::Proof { proof } if t.verify(&me.secret, "dial", &proof) => {}
        Handshake::Proof { .. } => return Err(AuthError::BadProof),
        other => return Err(AuthError::Unexpected(Box::new(other))),
    }
    send(framed, &Handshake::Welcome).await?;
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    fn id(host: &str, secret: &[u8]) -> Identity {
        Identity { cluster: "c".into(), host: host.into(), secret: secret.to_vec() }
    }

    async fn handshake(dialer: Identity, acceptor: Identity) -> (Result<(), AuthError>, Result<String, AuthError>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let known = vec!["a".to_string(), "b".to_string()];
        let accepting = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut f = frame::framed(s, 1 << 20);
            accept(&mut f, &acceptor, &known).await
        });
        let mut f = frame::framed(TcpStream::connect(addr).await.unwrap(), 1 << 20);
        let dialed = dial(&mut f, &dialer, "b").await;
        drop(f); // a dialer that gave up hangs up
        (dialed, accepting.await.unwrap())
    }

    #[tokio::test]
    async fn peers_holding_the_same_secret_are_welcome() {
        let (d, a) = handshake(id("a", b"0123456789abcdef"), id("b", b"0123456789abcdef")).await;
        assert!(d.is_ok(), "{d:?}");
        assert_eq!(a.unwrap(), "a");
    }

    #[tokio::test]
    async fn a_peer_with_another_secret_is_refused_by_both_ends() {
        let (d, a) = handshake(id("a", b"0123456789abcdef"), id("b", b"another-secret-xx")).await;
        assert!(matches!(d, Err(AuthError::BadProof)), "{d:?}");
        assert!(a.is_err());
    }

    /// Everything the acceptor writes to a dialer that says Hello, then sends a proof of zeros,
    /// until the acceptor hangs up; and the acceptor's nonce, from its Challenge.
    async fn what_an_unproven_dialer_hears(acceptor: Identity) -> (Vec<u8>, Nonce) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let known = vec!["a".to_string(), "b".to_string()];
        let accepting = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut f = frame::framed(s, 1 << 20);
            accept(&mut f, &acceptor, &known).await
        });
        let mut f = frame::framed(TcpStream::connect(addr).await.unwrap(), 1 << 20);
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
