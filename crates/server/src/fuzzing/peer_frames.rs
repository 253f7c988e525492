//! `peer_frames`: the bytes a peer sends on a link, read as the link reads them.

use crate::net::auth::Handshake;
use crate::net::frame::{self, PROTOCOL_VERSION};
use bytes::BytesMut;
use tokio_util::codec::Decoder;
use waymark_core::Envelope;

/// Splits arbitrary bytes into frames with the link's codec (fed in reads of a size taken from
/// the input, with a small or the default frame limit), and decodes each frame as an envelope and
/// as a handshake message. Contract: no frame over the limit is handed on (a length over it is an
/// error before anything is buffered for it), a frame decodes to a value or an error (never a
/// panic, an abort or an allocation sized by a claimed length), the link's envelope decoder agrees
/// with the core's `peer_message` body (which checks the envelope further), and a decoded envelope
/// framed again decodes to itself.
///
/// After the handshake a link checks each frame's MAC (`net::seal`) before it decodes the rest,
/// so only a peer holding the connection's keys reaches the decoder; the frames here stand for
/// what its frames open to (the MAC is not fuzzed: no mutant would pass it).
///
/// The first byte picks the frame limit, the second the size of each read.
pub fn peer_frames(data: &[u8]) -> bool {
    let Some((&[limit, read], stream)) = data.split_first_chunk::<2>() else {
        return false;
    };
    let frame_max_bytes = if limit & 1 == 0 { 64 << 20 } else { 48 };
    let mut codec = frame::codec(frame_max_bytes);
    let mut buffer = BytesMut::new();
    let mut any = false;
    for read in stream.chunks(usize::from(read).max(1)) {
        buffer.extend_from_slice(read);
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(bytes)) => any |= one_frame(&bytes, frame_max_bytes),
                Ok(None) => break,
                // The link closes on a malformed frame.
                Err(_) => return any,
            }
        }
    }
    // The stream ends: what is left is a torn frame, an error.
    if let Ok(Some(bytes)) = codec.decode_eof(&mut buffer) {
        any |= one_frame(&bytes, frame_max_bytes);
    }
    any
}

fn one_frame(bytes: &[u8], frame_max_bytes: usize) -> bool {
    assert!(bytes.len() <= frame_max_bytes, "a frame of {} bytes passed a limit of {frame_max_bytes}", bytes.len());
    let _ = frame::decode::<Handshake>(bytes);
    let decoded = frame::decode::<Envelope>(bytes);
    let core_decoded = match bytes.split_first() {
        Some((&PROTOCOL_VERSION, payload)) => waymark_core::fuzzing::peer_message(payload),
        _ => false,
    };
    assert_eq!(decoded.is_ok(), core_decoded, "the link and the core disagree on an envelope: {decoded:?}");
    let Ok(envelope) = decoded else {
        return false;
    };
    let again = frame::decode::<Envelope>(&frame::encode(&envelope)).expect("a framed envelope decodes");
    assert_eq!(again, envelope);
    true
}
