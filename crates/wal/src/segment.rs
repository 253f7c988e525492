//! The on-disk format of one segment file: its header and its record frames.
//!
//! This module is pure (no I/O) so that it can be unit-tested and fuzzed
//! directly: everything that touches files lives in `recovery`, `reader` and
//! `wal`, and calls into here to encode or check bytes.
//!
//! Header (24 bytes): `magic[8] | version u32 LE | base u64 LE | crc32c u32 LE`
//! where the crc covers the 20 bytes before it.
//!
//! Frame: `len u32 LE | crc32c u32 LE | kind u8 | payload[len]` where the crc
//! covers `len` (its 4 LE bytes), `kind` and `payload`. Covering `len` means a
//! damaged length field is caught by the checksum too, not only by bounds.

use crate::error::{FrameError, HeaderError};

/// Identifies a Waymark WAL segment.
pub const MAGIC: [u8; 8] = *b"WAYMKWAL";
/// The only format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes in a segment header; the first record starts here.
pub const HEADER_BYTES: u64 = 24;
/// Bytes of a frame before its payload (len, crc, kind).
pub const FRAME_HEADER_BYTES: usize = 9;
/// File name suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".wal";

/// Encodes the header of the segment whose first global offset is `base`.
pub fn encode_header(base: u64) -> [u8; HEADER_BYTES as usize] {
    let mut out = [0u8; HEADER_BYTES as usize];
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out[12..20].copy_from_slice(&base.to_le_bytes());
    let crc = crc32c::crc32c(&out[0..20]);
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a header and returns the base it records. Magic and version are
/// checked before the checksum so that a foreign or newer file gets the more
/// useful message.
pub fn decode_header(bytes: &[u8; HEADER_BYTES as usize]) -> Result<u64, HeaderError> {
    let found: [u8; 8] = take(bytes, 0);
    if found != MAGIC {
        return Err(HeaderError::BadMagic { found, expected: MAGIC });
    }
    let version = u32::from_le_bytes(take(bytes, 8));
    if version != FORMAT_VERSION {
        return Err(HeaderError::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
    }
    let stored = u32::from_le_bytes(take(bytes, 20));
    let computed = crc32c::crc32c(&bytes[0..20]);
    if stored != computed {
        return Err(HeaderError::Checksum { stored, computed });
    }
    Ok(u64::from_le_bytes(take(bytes, 12)))
}

/// Copies `N` bytes at `at`; callers index within fixed-size arrays.
fn take<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// The checksum of a frame: over the LE length, the kind and the payload.
pub fn frame_crc(len: u32, kind: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &[kind]);
    crc32c::crc32c_append(crc, payload)
}

/// Total bytes a frame with a payload of `payload_len` occupies on disk.
pub const fn frame_bytes(payload_len: u64) -> u64 {
    FRAME_HEADER_BYTES as u64 + payload_len
}

/// Appends the frame header for `(kind, payload)` to `out`; the caller
/// appends the payload itself (so a large payload can be written without
/// first being copied next to its header).
///
/// Invariant: `payload.len() <= u32::MAX` (checked by the writer against
/// `max_record_bytes`, which is itself at most `u32::MAX`).
pub fn encode_frame_header(kind: u8, payload: &[u8]) -> [u8; FRAME_HEADER_BYTES] {
    debug_assert!(u32::try_from(payload.len()).is_ok());
    let len = payload.len() as u32;
    let mut out = [0u8; FRAME_HEADER_BYTES];
    out[0..4].copy_from_slice(&len.to_le_bytes());
    out[4..8].copy_from_slice(&frame_crc(len, kind, payload).to_le_bytes());
    out[8] = kind;
    out
}

/// Appends a whole frame for `(kind, payload)` to `out`.
pub fn encode_frame(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&encode_frame_header(kind, payload));
    out.extend_from_slice(payload);
}

/// The fixed-size start of a frame, parsed but not yet trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (not counting kind).
    pub len: u32,
    /// Stored checksum.
    pub crc: u32,
    /// Caller's record type.
    pub kind: u8,
}

impl FrameHeader {
    /// Parses the 9 header bytes; nothing is validated yet.
    pub fn parse(bytes: &[u8; FRAME_HEADER_BYTES]) -> FrameHeader {
        FrameHeader { len: u32::from_le_bytes(take(bytes, 0)), crc: u32::from_le_bytes(take(bytes, 4)), kind: bytes[8] }
    }

    /// Checks the length field before anything is allocated for the payload:
    /// against the configured maximum and against the bytes that actually
    /// remain after the frame header. This is what keeps a damaged length of
    /// 4 GiB from turning into a 4 GiB allocation.
    pub fn check_len(&self, remaining_bytes: u64, max_record_bytes: u64) -> Result<(), FrameError> {
        let len = u64::from(self.len);
        if len > max_record_bytes {
            return Err(FrameError::TooLarge { len, max_record_bytes });
        }
        if len > remaining_bytes {
            return Err(FrameError::Truncated {
                needed: frame_bytes(len),
                available: FRAME_HEADER_BYTES as u64 + remaining_bytes,
            });
        }
        Ok(())
    }

    /// Checks the stored checksum against the payload.
    pub fn check_crc(&self, payload: &[u8]) -> Result<(), FrameError> {
        let computed = frame_crc(self.len, self.kind, payload);
        if computed != self.crc {
            return Err(FrameError::Checksum { stored: self.crc, computed });
        }
        Ok(())
    }
}

/// One record decoded from a byte slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord<'a> {
    /// Offset of the frame start within the decoded slice.
    pub offset: usize,
    /// Caller's record type.
    pub kind: u8,
    /// Stored checksum (already verified).
    pub crc: u32,
    /// The payload, borrowed from the input.
    pub payload: &'a [u8],
}

/// Result of decoding a run of frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Records that decoded and checksummed correctly, in order.
    pub records: Vec<DecodedRecord<'a>>,
    /// Length of the valid prefix: the end of the last good record.
    ///
    /// Invariant: `valid_bytes <= input.len()`, and equals `input.len()`
    /// exactly when `error` is `None`.
    pub valid_bytes: usize,
    /// Why decoding stopped before the end of the input, if it did.
    pub error: Option<FrameError>,
}

/// Decodes consecutive frames (the bytes after a segment header) until the
/// input ends or a frame is bad. Never panics on any input; every returned
/// record has a verified checksum. This is the function the fuzzer drives.
pub fn decode_records(bytes: &[u8], max_record_bytes: u64) -> Decoded<'_> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        match decode_one(&bytes[at..], max_record_bytes) {
            Ok((header, payload)) => {
                records.push(DecodedRecord { offset: at, kind: header.kind, crc: header.crc, payload });
                at += FRAME_HEADER_BYTES + payload.len();
            }
            Err(error) => return Decoded { records, valid_bytes: at, error: Some(error) },
        }
    }
    debug_assert_eq!(at, bytes.len());
    Decoded { records, valid_bytes: at, error: None }
}

/// Decodes the frame at the start of `bytes`.
fn decode_one(bytes: &[u8], max_record_bytes: u64) -> Result<(FrameHeader, &[u8]), FrameError> {
    let Some(head) = bytes.first_chunk::<FRAME_HEADER_BYTES>() else {
        return Err(FrameError::Truncated { needed: FRAME_HEADER_BYTES as u64, available: bytes.len() as u64 });
    };
    let header = FrameHeader::parse(head);
    let rest = &bytes[FRAME_HEADER_BYTES..];
    header.check_len(rest.len() as u64, max_record_bytes)?;
    let payload = &rest[..header.len as usize];
    header.check_crc(payload)?;
    Ok((header, payload))
}

/// File name of the segment with `base`: 20 zero-padded digits + `.wal`, so
/// that lexical order of names is numeric order of bases.
pub fn segment_file_name(base: u64) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

/// Parses a segment file name. `None` if it is not a segment name at all;
/// `Some(Err(()))` if it ends in `.wal` but the base is malformed.
pub fn parse_segment_file_name(name: &str) -> Option<Result<u64, ()>> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Err(()));
    }
    Some(digits.parse::<u64>().map_err(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(records: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (kind, payload) in records {
            encode_frame(*kind, payload, &mut out);
        }
        out
    }

    #[test]
    fn header_round_trips() {
        let bytes = encode_header(123_456);
        assert_eq!(decode_header(&bytes), Ok(123_456));
    }

    #[test]
    fn header_rejects_bad_magic_version_and_crc() {
        let mut bad_magic = encode_header(7);
        bad_magic[0] ^= 1;
        assert!(matches!(decode_header(&bad_magic), Err(HeaderError::BadMagic { .. })));

        let mut bad_version = encode_header(7);
        bad_version[8] = 2;
        assert_eq!(decode_header(&bad_version), Err(HeaderError::UnsupportedVersion { found: 2, supported: 1 }));

        let mut bad_base = encode_header(7);
        bad_base[12] ^= 0x10;
        assert!(matches!(decode_header(&bad_base), Err(HeaderError::Checksum { .. })));
    }

    #[test]
    fn frames_round_trip() {
        let bytes = frames(&[(1, b"hello"), (2, b""), (255, &[9u8; 1000])]);
        let decoded = decode_records(&bytes, 1 << 20);
        assert_eq!(decoded.error, None);
        assert_eq!(decoded.valid_bytes, bytes.len());
        let got: Vec<(u8, &[u8])> = decoded.records.iter().map(|r| (r.kind, r.payload)).collect();
        assert_eq!(got, vec![(1, &b"hello"[..]), (2, &b""[..]), (255, &[9u8; 1000][..])]);
        assert_eq!(decoded.records[1].offset, 14);
    }

    #[test]
    fn every_cut_yields_a_prefix() {
        let bytes = frames(&[(1, b"abc"), (2, b"defgh"), (3, b"")]);
        let ends = [12usize, 26, 35];
        for cut in 0..=bytes.len() {
            let decoded = decode_records(&bytes[..cut], 1 << 20);
            let complete = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(decoded.records.len(), complete, "cut {cut}");
            assert_eq!(decoded.error.is_none(), cut == 0 || ends.contains(&cut));
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let bytes = frames(&[(4, b"payload!")]);
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let decoded = decode_records(&flipped, 1 << 20);
            assert!(decoded.records.is_empty(), "bit {bit} went undetected");
            assert!(decoded.error.is_some());
        }
    }

    #[test]
    fn huge_length_is_rejected_before_allocation() {
        let mut bytes = frames(&[(1, b"x")]);
        bytes[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let decoded = decode_records(&bytes, 1 << 20);
        assert!(matches!(decoded.error, Some(FrameError::TooLarge { len, .. }) if len == u64::from(u32::MAX)));
        let decoded = decode_records(&bytes, u64::from(u32::MAX));
        assert!(matches!(decoded.error, Some(FrameError::Truncated { .. })));
    }

    /// Recovery reads a zeroed (preallocated) tail as the end of the log; that is only sound if
    /// no frame can be all zeros.
    #[test]
    fn an_all_zero_frame_never_verifies() {
        assert_ne!(frame_crc(0, 0, &[]), 0);
        let decoded = decode_records(&[0u8; 64], 1 << 20);
        assert!(decoded.records.is_empty());
        assert!(matches!(decoded.error, Some(FrameError::Checksum { stored: 0, .. })));
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(segment_file_name(0), "00000000000000000000.wal");
        assert_eq!(parse_segment_file_name("00000000000000004096.wal"), Some(Ok(4096)));
        assert_eq!(parse_segment_file_name("4096.wal"), Some(Err(())));
        assert_eq!(parse_segment_file_name("99999999999999999999.wal"), Some(Err(())));
        assert_eq!(parse_segment_file_name("notes.txt"), None);
    }
}
