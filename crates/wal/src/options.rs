//! Tunables of a log, with their limits in the names' units.

use crate::error::{InvalidOptions, Result, WalError};
use crate::segment::{frame_bytes, HEADER_BYTES};

/// How a log is laid out and buffered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// A segment is sealed once the next record would take it past this many
    /// bytes (header included). A single record larger than this still goes
    /// alone into a fresh segment, so the limit is soft by one record.
    pub segment_size_bytes: u64,
    /// Largest accepted payload; bigger appends fail with `RecordTooLarge`.
    /// It is also the cap on what a reader allocates for one record, so it
    /// must never be lowered below a record already in the log: recovery
    /// treats a larger length field in the tail as damage.
    pub max_record_bytes: u64,
    /// Appends collect in a user-space buffer of about this size and are
    /// handed to the OS in chunks of it (fewer syscalls, large writes).
    pub write_buffer_bytes: usize,
    /// On open, checksum every record of every sealed segment (not only the
    /// tail of the last one). Costs one read of the whole log; turning it off
    /// defers detection of damage in sealed segments to the reader.
    pub verify_sealed_segments: bool,
    /// Extend a new active segment to `segment_size_bytes` when it is created (and on open), so
    /// that an append's `fdatasync` does not also commit a change of the file's size. The
    /// logical end is tracked in memory; recovery finds it from the frames (a zeroed tail reads
    /// as the end of the log). A segment is trimmed to its logical length when it is sealed or
    /// the log is closed, so only the last segment of a log can have a zero tail.
    pub preallocate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size_bytes: 64 << 20,
            max_record_bytes: 16 << 20,
            write_buffer_bytes: 1 << 20,
            verify_sealed_segments: true,
            preallocate: true,
        }
    }
}

impl Options {
    /// The length a new active segment is given at creation (0: none).
    pub(crate) fn preallocated_bytes(&self) -> u64 {
        if self.preallocate {
            self.segment_size_bytes
        } else {
            0
        }
    }

    /// Rejects settings that cannot work, before any file is touched.
    pub fn validate(&self) -> Result<()> {
        if self.max_record_bytes > u64::from(u32::MAX) {
            return Err(WalError::InvalidOptions(InvalidOptions::RecordLimit {
                max_record_bytes: self.max_record_bytes,
            }));
        }
        if self.segment_size_bytes < HEADER_BYTES + frame_bytes(0) {
            return Err(WalError::InvalidOptions(InvalidOptions::SegmentSize {
                segment_size_bytes: self.segment_size_bytes,
                least: HEADER_BYTES + frame_bytes(0),
            }));
        }
        if self.write_buffer_bytes == 0 {
            return Err(WalError::InvalidOptions(InvalidOptions::WriteBuffer));
        }
        Ok(())
    }
}
