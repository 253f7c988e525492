//! Reading a log's frames in large reads into one reused buffer, lending each payload instead of
//! copying it out.
//!
//! A snapshot's replay reads hundreds of megabytes once, in order, and keeps only what it
//! restores; the [`Reader`](crate::Reader) copies every payload into a `Vec` of its own, which
//! costs an allocation and a copy per record and tempts callers to keep them all. The
//! [`FrameScanner`] checks what the reader checks, in the same order: each segment's header and
//! the contiguity of bases, every length field against `max_record_bytes` and against the bytes
//! left in the segment *before* the buffer grows for it, every checksum before the frame is lent.
//! Damage ends the scan with one error naming the file and offset; a zero tail of the last
//! segment is its end, as for the reader.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::cursor::{check_header, data_end};
use crate::dir::{list_segments, SegmentInfo};
use crate::error::{io_err, FrameError, Result, WalError};
use crate::position::Position;
use crate::reader::seek_start;
use crate::recovery::check_contiguous;
use crate::segment::{FrameHeader, FRAME_HEADER_BYTES, HEADER_BYTES};

/// Bytes asked of the kernel per read. Large enough that a read costs little against the bytes it
/// brings; small enough that what was read is still in the core's cache when the frames in it are
/// checksummed and decoded (a replay touches each byte three times: read, crc, copy out).
pub const SCAN_READ_BYTES: usize = 1 << 20;

/// A frame lent by [`FrameScanner::next_frame`]: valid until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Where the frame starts (what `append` returned for it).
    pub position: Position,
    /// The caller's record type.
    pub kind: u8,
    /// The payload, checksum verified, borrowed from the scanner's buffer.
    pub payload: &'a [u8],
}

/// Scans frames from a position to the end of a log no writer is appending to.
pub struct FrameScanner {
    /// Segments not yet opened, each with the length to read up to.
    pending: VecDeque<SegmentInfo>,
    /// Offset to start at in the first pending segment.
    first_offset: u64,
    current: Option<OpenSegment>,
    window: Window,
    max_record_bytes: u64,
    done: bool,
}

/// The segment being scanned.
///
/// Invariant: `HEADER_BYTES <= at <= read_to <= end`.
struct OpenSegment {
    path: PathBuf,
    base: u64,
    file: File,
    /// File offset of the next frame (of `window.buf[lo]`).
    at: u64,
    /// File offset just past the bytes read so far (of `window.buf[hi]`).
    read_to: u64,
    /// The read bound: the segment's length.
    end: u64,
}

/// The read buffer, reused across reads and segments; it grows only for a frame larger than it,
/// after that frame's length was checked.
///
/// Invariant: `lo <= hi <= buf.len()`; `buf[lo..hi]` are the current segment's bytes from `at`.
struct Window {
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
}

/// Where a checked frame lies in the window.
type Found = (Position, u8, std::ops::Range<usize>);

impl FrameScanner {
    /// Scans the log in `dir` from `from` (a record position, a segment start or the end), in
    /// reads of [`SCAN_READ_BYTES`].
    pub fn open(dir: impl AsRef<Path>, from: Position, max_record_bytes: u64) -> Result<FrameScanner> {
        FrameScanner::with_read_bytes(dir, from, max_record_bytes, SCAN_READ_BYTES)
    }

    /// Like [`FrameScanner::open`], reading `read_bytes` at a time (at least one frame header).
    pub fn with_read_bytes(
        dir: impl AsRef<Path>,
        from: Position,
        max_record_bytes: u64,
        read_bytes: usize,
    ) -> Result<FrameScanner> {
        let segments = list_segments(dir.as_ref())?;
        check_contiguous(&segments)?;
        let mut pending: VecDeque<SegmentInfo> = segments.into();
        let first_offset = seek_start(&mut pending, from)?;
        let window = Window { buf: vec![0; read_bytes.max(FRAME_HEADER_BYTES)], lo: 0, hi: 0 };
        Ok(FrameScanner { pending, first_offset, current: None, window, max_record_bytes, done: false })
    }

    /// The next frame, `Ok(None)` at the end of the log. After an error, always `Ok(None)`.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>> {
        if self.done {
            return Ok(None);
        }
        match self.advance() {
            Ok(Some((position, kind, range))) => Ok(Some(Frame { position, kind, payload: &self.window.buf[range] })),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Finds the next good frame; returns where it lies rather than the slice, so that the buffer
    /// is borrowed only once the scanner is done moving.
    fn advance(&mut self) -> Result<Option<Found>> {
        loop {
            let Some(segment) = self.current.as_mut() else {
                if !self.open_next()? {
                    return Ok(None);
                }
                continue;
            };
            if segment.at == segment.end {
                self.current = None;
                continue;
            }
            let at = segment.at;
            return match self.window.frame(segment, self.max_record_bytes) {
                Ok(found) => Ok(Some(found)),
                Err(ScanFail::Frame(reason)) => self.damage(at, reason),
                Err(ScanFail::Io(source)) => Err(io_err("reading", segment.path.clone())(source)),
            };
        }
    }

    /// Opens the next pending segment; false when there is none.
    fn open_next(&mut self) -> Result<bool> {
        let Some(segment) = self.pending.pop_front() else {
            return Ok(false);
        };
        let start = std::mem::replace(&mut self.first_offset, 0).max(HEADER_BYTES);
        let path = segment.path;
        let mut file = File::open(&path).map_err(io_err("opening", &path))?;
        check_header(&mut file, &path, segment.base, segment.len)?;
        debug_assert!(start <= segment.len, "scan start {start} beyond bound {}", segment.len);
        file.seek(SeekFrom::Start(start)).map_err(io_err("seeking in", &path))?;
        (self.window.lo, self.window.hi) = (0, 0);
        self.current =
            Some(OpenSegment { path, base: segment.base, file, at: start, read_to: start, end: segment.len });
        Ok(true)
    }

    /// A bad frame at `offset`: the end of the log if it is the last segment's zero tail,
    /// otherwise damage.
    fn damage(&mut self, offset: u64, reason: FrameError) -> Result<Option<Found>> {
        let Some(segment) = self.current.take() else {
            return Ok(None);
        };
        // The last segment of a log that was not closed ends in its preallocated zeros.
        if self.pending.is_empty() && data_end(&segment.path, offset)? == offset {
            return Ok(None);
        }
        Err(WalError::CorruptRecord { path: segment.path, offset, reason })
    }
}

impl Window {
    /// Checks the frame at `segment.at` and steps past it.
    fn frame(&mut self, segment: &mut OpenSegment, max_record_bytes: u64) -> std::result::Result<Found, ScanFail> {
        let at = segment.at;
        let available = segment.end - at;
        if available < FRAME_HEADER_BYTES as u64 {
            return Err(ScanFail::Frame(FrameError::Truncated { needed: FRAME_HEADER_BYTES as u64, available }));
        }
        self.fill(segment, FRAME_HEADER_BYTES, available)?;
        let mut head = [0u8; FRAME_HEADER_BYTES];
        head.copy_from_slice(&self.buf[self.lo..self.lo + FRAME_HEADER_BYTES]);
        let header = FrameHeader::parse(&head);
        header.check_len(available - FRAME_HEADER_BYTES as u64, max_record_bytes).map_err(ScanFail::Frame)?;
        // Safe to size the buffer for it now: len <= max_record_bytes and len <= bytes left.
        let total = FRAME_HEADER_BYTES + header.len as usize;
        self.fill(segment, total, available)?;
        let payload = self.lo + FRAME_HEADER_BYTES..self.lo + total;
        header.check_crc(&self.buf[payload.clone()]).map_err(ScanFail::Frame)?;
        self.lo += total;
        segment.at += total as u64;
        Ok((Position::new(segment.base, at), header.kind, payload))
    }

    /// Makes `buf[lo..hi]` hold at least `need` bytes (`need <= available`, the bytes from `at` to
    /// the segment's end), moving a partial frame to the front, and growing the buffer only for a
    /// frame larger than it. Reads as much as fits, up to the segment's end.
    fn fill(&mut self, segment: &mut OpenSegment, need: usize, available: u64) -> std::result::Result<(), ScanFail> {
        debug_assert!(need as u64 <= available);
        if self.hi - self.lo >= need {
            return Ok(());
        }
        if self.buf.len() - self.lo < need {
            self.buf.copy_within(self.lo..self.hi, 0);
            (self.lo, self.hi) = (0, self.hi - self.lo);
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
        }
        while self.hi - self.lo < need {
            let room = (self.buf.len() - self.hi) as u64;
            let want = room.min(segment.end - segment.read_to) as usize;
            let n = match segment.file.read(&mut self.buf[self.hi..self.hi + want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ScanFail::Io(e)),
            };
            if n == 0 {
                // The file shrank under us: the frame is cut short, not an I/O failure.
                return Err(ScanFail::Frame(FrameError::Truncated { needed: need as u64, available }));
            }
            self.hi += n;
            segment.read_to += n as u64;
        }
        Ok(())
    }
}

/// Internal split between damage (decided by the caller) and I/O failures.
enum ScanFail {
    Frame(FrameError),
    Io(io::Error),
}
