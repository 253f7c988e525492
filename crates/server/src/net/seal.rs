//! Frame MACs on an authenticated peer link (DESIGN §7, issue 36): after the handshake every
//! frame carries an HMAC-SHA256 tag over its sequence number and its bytes, keyed by the key of
//! its direction on this connection, which the handshake derived (`auth.rs`).
//!
//! What each part rules out: the keys are new with every connection (both handshake nonces go
//! into them), so a frame recorded on another connection fails; each direction has its own key,
//! so a frame reflected back to its sender fails; the sequence number counts the frames of one
//! direction and is not sent — each end counts for itself, and TCP keeps the order — so a frame
//! dropped, replayed or moved fails, and so does every frame after it.
//!
//! A sealed frame on the wire: `length (4 bytes) | version | payload | tag (TAG_BYTES)`, the
//! length counting the tag; the tag covers `sequence (8 bytes, big-endian) | version | payload`.
//! The frames of the handshake itself are not sealed: its proofs cover what it says.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The bytes of the tag at the end of every sealed frame.
pub const TAG_BYTES: usize = 32;

/// The key of one direction of one connection.
pub type Key = [u8; 32];

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("frame {seq} is {frame_bytes} bytes, shorter than its MAC")]
    Short { seq: u64, frame_bytes: usize },
    #[error("frame {seq} ({frame_bytes} bytes) fails its MAC: altered, replayed, reordered or forged")]
    BadTag { seq: u64, frame_bytes: usize },
}

/// Seals the frames one end sends on one connection, in the order it sends them.
pub struct Sealer {
    keyed: Hmac<Sha256>,
    /// Invariant: the number of frames sealed so far on this connection.
    seq: u64,
}

/// Opens the frames one end receives on one connection, in the order they arrive.
pub struct Opener {
    keyed: Hmac<Sha256>,
    /// Invariant: the number of frames opened so far on this connection.
    seq: u64,
}

/// Both directions of one connection, as one end sees them.
pub struct Session {
    pub sealer: Sealer,
    pub opener: Opener,
}

impl Session {
    pub fn new(send: &Key, receive: &Key) -> Self {
        assert_ne!(send, receive, "one key for both directions would let a frame be reflected");
        Session { sealer: Sealer { keyed: keyed(send), seq: 0 }, opener: Opener { keyed: keyed(receive), seq: 0 } }
    }
}

/// Shows the sequence numbers, never the keys.
impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session {{ sealed: {}, opened: {} }}", self.sealer.seq, self.opener.seq)
    }
}

/// The HMAC state after the key (cloned per frame: the key's two blocks are hashed once).
fn keyed(key: &Key) -> Hmac<Sha256> {
    Hmac::new_from_slice(key).expect("HMAC takes keys of any length")
}

fn tag(keyed: &Hmac<Sha256>, seq: u64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = keyed.clone();
    mac.update(&seq.to_be_bytes());
    mac.update(body);
    mac
}

impl Sealer {
    /// `frame` is a frame's body (version and payload) and then `TAG_BYTES` of room, into which
    /// the body's tag is written.
    pub fn seal(&mut self, frame: &mut [u8]) {
        assert!(frame.len() > TAG_BYTES, "a frame to seal has a body and room for its tag");
        let (body, room) = frame.split_at_mut(frame.len() - TAG_BYTES);
        room.copy_from_slice(&tag(&self.keyed, self.seq, body).finalize().into_bytes());
        self.seq += 1;
    }
}

impl Opener {
    /// The body of the next frame, if its tag is right; an error otherwise, after which the
    /// connection must close (every later frame would fail too).
    pub fn open<'f>(&mut self, frame: &'f [u8]) -> Result<&'f [u8], SealError> {
        let (seq, frame_bytes) = (self.seq, frame.len());
        let body_bytes = frame_bytes.checked_sub(TAG_BYTES).ok_or(SealError::Short { seq, frame_bytes })?;
        let (body, received) = frame.split_at(body_bytes);
        tag(&self.keyed, seq, body).verify_slice(received).map_err(|_| SealError::BadTag { seq, frame_bytes })?;
        self.seq += 1;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ends of one connection: what `a` seals, `b` opens, and back.
    fn pair() -> (Session, Session) {
        let (a_to_b, b_to_a) = ([1; 32], [2; 32]);
        (Session::new(&a_to_b, &b_to_a), Session::new(&b_to_a, &a_to_b))
    }

    fn sealed(sealer: &mut Sealer, body: &[u8]) -> Vec<u8> {
        let mut frame = [body, &[0; TAG_BYTES]].concat();
        sealer.seal(&mut frame);
        frame
    }

    #[test]
    fn frames_open_in_the_order_they_were_sealed() {
        let (mut a, mut b) = pair();
        let (one, two) = (sealed(&mut a.sealer, b"one"), sealed(&mut a.sealer, b"two"));
        assert_eq!(b.opener.open(&one), Ok(&b"one"[..]));
        assert_eq!(b.opener.open(&two), Ok(&b"two"[..]));
    }

    #[test]
    fn a_frame_with_one_bit_changed_fails() {
        let (mut a, mut b) = pair();
        let mut frame = sealed(&mut a.sealer, b"one");
        frame[1] ^= 0b100;
        assert_eq!(b.opener.open(&frame), Err(SealError::BadTag { seq: 0, frame_bytes: 3 + TAG_BYTES }));
    }

    #[test]
    fn a_replayed_frame_fails() {
        let (mut a, mut b) = pair();
        let one = sealed(&mut a.sealer, b"one");
        assert!(b.opener.open(&one).is_ok());
        assert!(matches!(b.opener.open(&one), Err(SealError::BadTag { seq: 1, .. })));
    }

    #[test]
    fn a_frame_that_overtakes_the_one_sealed_before_it_fails() {
        let (mut a, mut b) = pair();
        let _one = sealed(&mut a.sealer, b"one");
        let two = sealed(&mut a.sealer, b"two");
        assert!(matches!(b.opener.open(&two), Err(SealError::BadTag { seq: 0, .. })));
    }

    #[test]
    fn a_frame_reflected_to_its_sender_fails() {
        let (mut a, _b) = pair();
        let frame = sealed(&mut a.sealer, b"one");
        assert!(a.opener.open(&frame).is_err());
    }

    #[test]
    fn a_frame_shorter_than_a_tag_is_an_error_not_a_panic() {
        let (_a, mut b) = pair();
        assert_eq!(b.opener.open(&[1, 2, 3]), Err(SealError::Short { seq: 0, frame_bytes: 3 }));
    }
}
