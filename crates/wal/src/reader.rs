//! Reading records back, in order, across segment files.
//!
//! The reader trusts nothing on disk: each segment's header and the
//! contiguity of bases are checked, every frame is bounds-checked before its
//! payload is allocated and checksummed before it is returned. Damage ends
//! the iteration with one error item (never garbage, never a skip).

use std::collections::VecDeque;
use std::path::Path;

use crate::cursor::{data_end, SegmentCursor};
use crate::dir::{list_segments, SegmentInfo};
use crate::error::{Result, WalError};
use crate::position::Position;
use crate::recovery::check_contiguous;
use crate::segment::HEADER_BYTES;

/// One record read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Where the record starts (what `append` returned for it).
    pub position: Position,
    /// The caller's record type.
    pub kind: u8,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Iterates records from a position to the end of the log as it was when
/// the reader was made. Yields `Err` at most once, then stops.
pub struct Reader {
    /// Segments not yet opened, each with the length to read up to.
    pending: VecDeque<SegmentInfo>,
    /// Offset to start at in the first pending segment.
    first_offset: u64,
    current: Option<(u64, SegmentCursor)>,
    max_record_bytes: u64,
    done: bool,
}

impl Reader {
    /// Reads a log directory that no writer is appending to (for a live log
    /// use `Wal::reader_from`, which bounds reads to what has been written).
    /// A torn tail shows up as an error item here: run `Wal::open` to repair.
    pub fn open(dir: impl AsRef<Path>, from: Position, max_record_bytes: u64) -> Result<Reader> {
        let segments = list_segments(dir.as_ref())?;
        Reader::from_segments(segments, from, max_record_bytes)
    }

    /// Like [`Reader::open`], from the oldest record still in the log.
    pub fn open_from_start(dir: impl AsRef<Path>, max_record_bytes: u64) -> Result<Reader> {
        let segments = list_segments(dir.as_ref())?;
        let from = segments.first().map_or(Position::ZERO, |s| Position::new(s.base, 0));
        Reader::from_segments(segments, from, max_record_bytes)
    }

    /// A reader over `segments` (oldest first; `len` is the read bound).
    pub(crate) fn from_segments(segments: Vec<SegmentInfo>, from: Position, max_record_bytes: u64) -> Result<Reader> {
        check_contiguous(&segments)?;
        let mut pending: VecDeque<SegmentInfo> = segments.into();
        let first_offset = seek_start(&mut pending, from)?;
        Ok(Reader { pending, first_offset, current: None, max_record_bytes, done: false })
    }

    /// Next record or error, opening segments as the previous one ends.
    fn advance(&mut self) -> Result<Option<Record>> {
        loop {
            if self.current.is_none() {
                let Some(segment) = self.pending.pop_front() else {
                    return Ok(None);
                };
                let start = std::mem::replace(&mut self.first_offset, 0);
                let cursor =
                    SegmentCursor::open(&segment.path, segment.base, start, segment.len, self.max_record_bytes)?;
                self.current = Some((segment.base, cursor));
            }
            let Some((base, cursor)) = self.current.as_mut() else {
                continue;
            };
            let mut payload = Vec::new();
            match cursor.next_into(&mut payload) {
                Ok(Some(frame)) => {
                    return Ok(Some(Record { position: Position::new(*base, frame.offset), kind: frame.kind, payload }))
                }
                Ok(None) => self.current = None,
                Err(WalError::CorruptRecord { path, offset, reason }) => {
                    // The last segment of a log that was not closed ends in its preallocated zeros.
                    if self.pending.is_empty() && data_end(&path, offset)? == offset {
                        return Ok(None);
                    }
                    return Err(WalError::CorruptRecord { path, offset, reason });
                }
                Err(other) => return Err(other),
            }
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.advance().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

/// Drops segments before `from` and returns the offset to start at in the
/// first remaining one. `from` must be a record position, a segment start,
/// or the end of the log.
pub(crate) fn seek_start(pending: &mut VecDeque<SegmentInfo>, from: Position) -> Result<u64> {
    let (Some(first), Some(last)) = (pending.front(), pending.back()) else {
        return Ok(0);
    };
    if from < Position::new(first.base, 0) {
        return Err(WalError::PositionTruncated { requested: from, first: Position::new(first.base, HEADER_BYTES) });
    }
    let end = Position::new(last.base, last.len);
    let out_of_range = WalError::PositionOutOfRange { requested: from, end };
    while pending.front().is_some_and(|s| s.base < from.segment) {
        pending.pop_front();
    }
    match pending.front() {
        Some(segment) if segment.base == from.segment && from.offset <= segment.len => Ok(from.offset),
        _ => Err(out_of_range),
    }
}
