//! Segmented, checksummed write-ahead log for Waymark.
//!
//! A log is a directory of segment files named by their base (first global
//! byte offset) as 20 zero-padded digits plus `.wal`. Each file starts with a
//! header (magic, version, base) followed by frames
//! `[len u32 LE][crc32c u32 LE][kind u8][payload]`.
//!
//! * [`Wal`] appends into a buffer, group-commits with one `fdatasync` per
//!   [`Wal::sync`], rolls segments at `segment_size_bytes`, and can remove
//!   or hard-link sealed segments.
//! * [`Wal::open`] recovers after a crash: a torn tail of the last segment is
//!   cut and reported in [`OpenReport`]; damage anywhere else is an error.
//! * [`Reader`] yields [`Record`]s in order across segments.
//! * [`FrameScanner`] lends the same frames from large reads into one reused
//!   buffer, for replays that read a whole log once.
//! * [`segment`] holds the pure byte format. The log is fuzzed as a start
//!   and a snapshot's replay read it, through the server
//!   (`waymark_server::fuzzing::wal_segment`).

mod cursor;
mod dir;
mod error;
mod link;
mod options;
mod position;
mod reader;
mod recovery;
mod scan;
pub mod segment;
mod wal;

pub use dir::SegmentInfo;
pub use error::{FrameError, HeaderError, InvalidOptions, Result, WalError};
pub use options::Options;
pub use position::Position;
pub use reader::{Reader, Record};
pub use recovery::OpenReport;
pub use scan::{Frame, FrameScanner, SCAN_READ_BYTES};
pub use wal::Wal;
