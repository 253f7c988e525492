//! Frames on a peer link: a 4-byte big-endian length (checked against the configured maximum
//! before anything is read into memory, by `LengthDelimitedCodec`), then one version byte, then a
//! postcard payload — a handshake message or an `Envelope`.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{de::DeserializeOwned, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Bumped whenever the envelope or handshake encoding changes; a peer speaking another version
/// is refused at the handshake.
pub const PROTOCOL_VERSION: u8 = 2;

pub type PeerFramed = Framed<TcpStream, LengthDelimitedCodec>;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of protocol version {0}, expected {PROTOCOL_VERSION}")]
    Version(u8),
    #[error("empty frame")]
    Empty,
    #[error("frame payload does not decode: {0}")]
    Decode(#[from] postcard::Error),
}

pub fn framed(stream: TcpStream, frame_max_bytes: usize) -> PeerFramed {
    Framed::new(stream, codec(frame_max_bytes))
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

/// Appends one whole frame — the length the codec reads, the version, the payload — to `buf`, and
/// returns the length the receiver checks against its frame limit (version and payload).
pub fn encode_into<T: Serialize>(buf: &mut BytesMut, value: &T) -> usize {
    let start = buf.len();
    buf.put_u32(0);
    put_payload(buf, value);
    let len = buf.len() - start - 4;
    let len_field = u32::try_from(len).unwrap_or(u32::MAX);
    buf[start..start + 4].copy_from_slice(&len_field.to_be_bytes());
    len
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
    fn a_frame_encoded_into_a_buffer_is_what_the_codec_reads() {
        use tokio_util::codec::Decoder;
        let env = Envelope {
            from: VnodeId::new("store0", "a"),
            to: VnodeId::new("store1", "b"),
            cut: None,
            body: Body::Alter(waymark_core::alter::AlterMsg::Alive { sent_us: 0, echo_us: None }),
        };
        let mut buf = BytesMut::new();
        let first = encode_into(&mut buf, &env);
        let second = encode_into(&mut buf, &env);
        assert_eq!((first, second), (encode(&env).len(), encode(&env).len()));
        let mut codec = LengthDelimitedCodec::builder().length_field_type::<u32>().new_codec();
        for _ in 0..2 {
            let frame = codec.decode(&mut buf).unwrap().expect("a whole frame");
            assert_eq!(decode::<Envelope>(&frame).unwrap(), env);
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn garbage_and_other_versions_are_errors_not_panics() {
        assert!(matches!(decode::<Envelope>(&[]), Err(FrameError::Empty)));
        assert!(matches!(decode::<Envelope>(&[9, 1, 2]), Err(FrameError::Version(9))));
        assert!(matches!(decode::<Envelope>(&[PROTOCOL_VERSION, 0xff, 0xff, 0xff]), Err(FrameError::Decode(_))));
    }
}
