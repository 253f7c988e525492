//! Error types.
//!
//! Every error that comes from on-disk data names the file, the byte offset
//! and what was expected there, because the person reading it is usually
//! debugging a damaged log and needs to find the bad bytes.

use std::io;
use std::path::PathBuf;

use crate::position::Position;

/// Result alias for the crate.
pub type Result<T, E = WalError> = std::result::Result<T, E>;

/// Why a record frame could not be decoded. Offsets are added by the caller,
/// which knows the file (see [`WalError::CorruptRecord`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The bytes end before the frame does (a torn write, or a cut file).
    #[error("frame truncated: needed {needed} bytes, only {available} remain")]
    Truncated {
        /// Bytes the frame needs from its start.
        needed: u64,
        /// Bytes left from the frame's start to the end of the data.
        available: u64,
    },
    /// The length field is larger than any record the log accepts.
    #[error("length field {len} exceeds max_record_bytes {max_record_bytes}")]
    TooLarge {
        /// Payload length read from the frame.
        len: u64,
        /// Configured limit.
        max_record_bytes: u64,
    },
    /// The checksum stored in the frame does not match its content.
    #[error("checksum mismatch: stored crc32c {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Value stored in the frame.
        stored: u32,
        /// Value computed over length, kind and payload.
        computed: u32,
    },
}

/// Why a segment header is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The file is shorter than a header.
    #[error("header truncated: {len} bytes, expected {expected}")]
    Truncated {
        /// Actual file length.
        len: u64,
        /// Header length.
        expected: u64,
    },
    /// Not a Waymark segment at all.
    #[error("bad magic {found:02x?}, expected {expected:02x?}")]
    BadMagic {
        /// Bytes found.
        found: [u8; 8],
        /// Bytes expected.
        expected: [u8; 8],
    },
    /// A format this code does not know how to read.
    #[error("unknown format version {found}, this build reads version {supported}")]
    UnsupportedVersion {
        /// Version found.
        found: u32,
        /// Version supported.
        supported: u32,
    },
    /// The header bytes were damaged.
    #[error("header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Value stored.
        stored: u32,
        /// Value computed.
        computed: u32,
    },
    /// The header says a different base than the file name.
    #[error("header base {header_base} does not match base {name_base} from the file name")]
    BaseMismatch {
        /// Base in the header.
        header_base: u64,
        /// Base parsed from the file name.
        name_base: u64,
    },
}

/// Everything that can go wrong in the log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// An operating-system I/O call failed.
    #[error("I/O error while {action} {path}: {source}")]
    Io {
        /// What the log was doing.
        action: &'static str,
        /// File or directory involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// A segment header is damaged or belongs to another file.
    #[error("bad segment header in {path} at offset 0: {reason}")]
    BadHeader {
        /// Segment file.
        path: PathBuf,
        /// What was wrong.
        reason: HeaderError,
    },
    /// A record could not be decoded where one was expected.
    #[error("corrupt record in {path} at offset {offset}: {reason}")]
    CorruptRecord {
        /// Segment file.
        path: PathBuf,
        /// Byte offset of the frame start within the file.
        offset: u64,
        /// What was wrong.
        reason: FrameError,
    },
    /// Consecutive segments do not line up (a file is missing or overlaps).
    #[error("segment gap: {path} has base {found_base}, expected {expected_base} (previous base + previous length)")]
    SegmentGap {
        /// The segment whose base is wrong.
        path: PathBuf,
        /// Base implied by the previous segment.
        expected_base: u64,
        /// Base found.
        found_base: u64,
    },
    /// A `*.wal` file whose name is not a 20-digit base.
    #[error("unexpected segment file name {path}: expected 20 decimal digits + \".wal\"")]
    BadSegmentName {
        /// Offending path.
        path: PathBuf,
    },
    /// An append larger than `max_record_bytes`.
    #[error("record of {len} bytes exceeds max_record_bytes {max}")]
    RecordTooLarge {
        /// Payload length.
        len: u64,
        /// Configured limit.
        max: u64,
    },
    /// Options that cannot work.
    #[error("invalid options: {0}")]
    InvalidOptions(#[source] InvalidOptions),
    /// A read position before the oldest kept segment.
    #[error("position {requested} is no longer in the log; it starts at {first}")]
    PositionTruncated {
        /// Requested start.
        requested: Position,
        /// First position available.
        first: Position,
    },
    /// A read position that is not inside the log.
    #[error("position {requested} is not in the log (log ends at {end})")]
    PositionOutOfRange {
        /// Requested start.
        requested: Position,
        /// End of the log.
        end: Position,
    },
    /// A destination file for link/copy already exists.
    #[error("destination {path} already exists")]
    DestinationExists {
        /// Existing path.
        path: PathBuf,
    },
    /// An earlier write or sync failed; the on-disk state is unknown, so the
    /// log refuses further writes (retrying fsync can silently lose data).
    #[error("the log is unusable after an earlier I/O failure; reopen it to recover")]
    Poisoned,
}

/// Builds a closure that wraps an `io::Error` with action and path.
pub(crate) fn io_err(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> WalError {
    let path = path.into();
    move |source| WalError::Io { action, path, source }
}

/// A setting of [`crate::Options`] that cannot work, and the bound it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidOptions {
    #[error("max_record_bytes {max_record_bytes} exceeds the u32 length field ({})", u32::MAX)]
    RecordLimit { max_record_bytes: u64 },
    #[error("segment_size_bytes {segment_size_bytes} cannot hold a header and an empty record ({least} bytes)")]
    SegmentSize { segment_size_bytes: u64, least: u64 },
    #[error("write_buffer_bytes must be > 0")]
    WriteBuffer,
}
