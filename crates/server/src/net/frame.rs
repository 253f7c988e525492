//! Frames on a peer link: a 4-byte big-endian length (checked against the limit before anything
//! is read into memory, by `LengthDelimitedCodec`), then one version byte, then a postcard payload
//! — a handshake message or an `Envelope` — and, once the handshake is done, the frame's MAC
//! (`seal.rs`). Until then the limit is `HANDSHAKE_FRAME_MAX_BYTES`, then `limits.frame_max_bytes`.

use super::seal::{Sealer, TAG_BYTES};
use super::stream::PeerStream;
use bytes::{BufMut, Bytes, BytesMut};
use serde::{de::DeserializeOwned, Serialize};
use std::ops::Range;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Bumped whenever the envelope, frame or handshake encoding changes; a peer speaking another
/// version is refused at the handshake. 3: the dialer proves first, and frames carry a MAC.
pub const PROTOCOL_VERSION: u8 = 3;

/// The largest frame before the handshake ends: its messages are a few hundred bytes, and a peer
/// that has proven nothing must not make this host wait for, or buffer, 64 MiB.
pub const HANDSHAKE_FRAME_MAX_BYTES: usize = 4 << 10;

pub type PeerFramed = Framed<PeerStream, LengthDelimitedCodec>;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of protocol version {0}, expected {PROTOCOL_VERSION}")]
    Version(u8),
    #[error("empty frame")]
    Empty,
    #[error("frame payload does not decode: {0}")]
    Decode(#[from] postcard::Error),
}

pub fn framed(stream: impl Into<PeerStream>, frame_max_bytes: usize) -> PeerFramed {
    Framed::new(stream.into(), codec(frame_max_bytes))
}

/// A new connection, framed for its handshake.
pub fn handshaking(stream: impl Into<PeerStream>) -> PeerFramed {
    framed(stream, HANDSHAKE_FRAME_MAX_BYTES)
}

/// The handshake is done: frames up to `frame_max_bytes` from now on. The frames the handshake
/// read were all decoded under the small limit (it reads nothing past its last message).
pub fn authenticated(framed: &mut PeerFramed, frame_max_bytes: usize) {
    framed.codec_mut().set_max_frame_length(frame_max_bytes);
}

/// The codec that splits a peer link's bytes into frames, refusing a length over `frame_max_bytes`.
pub fn codec(frame_max_bytes: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().length_field_type::<u32>().max_frame_length(frame_max_bytes).new_codec()
}

/// A frame's payload, for a codec that adds the length: the version, then the value.
pub fn encode<T: Serialize>(value: &T) -> Bytes {
    let mut buf = BytesMut::with_capacity(128);
    put_payload(&mut buf, value);
    buf.freeze()
}

fn put_payload<T: Serialize>(buf: &mut BytesMut, value: &T) {
    buf.put_u8(PROTOCOL_VERSION);
    postcard::to_io(value, buf.writer()).expect("writing to memory cannot fail");
}

/// Appends one whole frame with `TAG_BYTES` of room at its end (its length counts them), and
/// returns where the frame's body and room lie in `buf`: what `Sealer::seal` takes. The body's
/// length plus the room is the length the receiver checks against its frame limit.
pub fn encode_sealable_into<T: Serialize>(buf: &mut BytesMut, value: &T) -> Range<usize> {
    let start = buf.len();
    buf.put_u32(0);
    put_payload(buf, value);
    buf.put_bytes(0, TAG_BYTES);
    let len = buf.len() - start - 4;
    let len_field = u32::try_from(len).unwrap_or(u32::MAX);
    buf[start..start + 4].copy_from_slice(&len_field.to_be_bytes());
    start + 4..buf.len()
}

/// A sealed frame without its length, for a codec that adds it (tests write frames this way).
pub fn encode_sealed<T: Serialize>(value: &T, sealer: &mut Sealer) -> Bytes {
    let mut buf = BytesMut::with_capacity(128);
    let body = encode_sealable_into(&mut buf, value);
    sealer.seal(&mut buf[body.clone()]);
    buf.split_off(body.start).freeze()
}

pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, FrameError> {
    let (&version, payload) = frame.split_first().ok_or(FrameError::Empty)?;
    if version != PROTOCOL_VERSION {
        return Err(FrameError::Version(version));
    }
    Ok(postcard::from_bytes(payload)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::seal::Session;
    use waymark_core::{Body, Envelope, VnodeId};

    #[test]
    fn an_envelope_survives_a_frame() {
        let env = Envelope {
            from: VnodeId::new("store0", "a"),
            to: VnodeId::new("store0", "b"),
            cut: None,
            body: Body::Alter(waymark_core::alter::AlterMsg::Alive { sent_us: 0, echo_us: None }),
        };
        assert_eq!(decode::<Envelope>(&encode(&env)).unwrap(), env);
    }

    #[test]
    fn sealed_frames_encoded_into_a_buffer_are_what_the_codec_reads_and_the_peer_opens() {
        use tokio_util::codec::Decoder;
        let env = Envelope {
            from: VnodeId::new("store0", "a"),
            to: VnodeId::new("store1", "b"),
            cut: None,
            body: Body::Alter(waymark_core::alter::AlterMsg::Alive { sent_us: 0, echo_us: None }),
        };
        let (mut a, mut b) = (Session::new(&[1; 32], &[2; 32]), Session::new(&[2; 32], &[1; 32]));
        let mut buf = BytesMut::new();
        for _ in 0..2 {
            let body = encode_sealable_into(&mut buf, &env);
            assert_eq!(body.len(), encode(&env).len() + TAG_BYTES);
            a.sealer.seal(&mut buf[body]);
        }
        let mut codec = codec(1 << 20);
        for _ in 0..2 {
            let frame = codec.decode(&mut buf).unwrap().expect("a whole frame");
            assert_eq!(decode::<Envelope>(b.opener.open(&frame).unwrap()).unwrap(), env);
        }
        assert!(buf.is_empty());
        assert_eq!(decode::<Envelope>(b.opener.open(&encode_sealed(&env, &mut a.sealer)).unwrap()).unwrap(), env);
    }

    #[test]
    fn garbage_and_other_versions_are_errors_not_panics() {
        assert!(matches!(decode::<Envelope>(&[]), Err(FrameError::Empty)));
        assert!(matches!(decode::<Envelope>(&[9, 1, 2]), Err(FrameError::Version(9))));
        assert!(matches!(decode::<Envelope>(&[PROTOCOL_VERSION, 0xff, 0xff, 0xff]), Err(FrameError::Decode(_))));
    }
}
