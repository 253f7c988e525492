//! Streaming, bounds-checked frame reading over one segment file.
//!
//! Both recovery (scanning a tail) and the public reader walk frames the same
//! way, so the checks live once here: the length field is validated against
//! `max_record_bytes` and the bytes left before the bound *before* the payload
//! buffer is sized, and no record is returned before its checksum matches.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{io_err, FrameError, HeaderError, Result, WalError};
use crate::segment::{decode_header, FrameHeader, FRAME_HEADER_BYTES, HEADER_BYTES};

/// Read-ahead for sequential scans; large enough that small records cost few
/// syscalls, small enough not to matter per open reader.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Reads and checks the header of a segment file.
pub(crate) fn check_header(file: &mut File, path: &Path, name_base: u64, file_len: u64) -> Result<()> {
    let bad = |reason| WalError::BadHeader { path: path.to_owned(), reason };
    if file_len < HEADER_BYTES {
        return Err(bad(HeaderError::Truncated { len: file_len, expected: HEADER_BYTES }));
    }
    let mut bytes = [0u8; HEADER_BYTES as usize];
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(io_err("reading header of", path))?;
    let header_base = decode_header(&bytes).map_err(bad)?;
    if header_base != name_base {
        return Err(bad(HeaderError::BaseMismatch { header_base, name_base }));
    }
    Ok(())
}

/// Where the data of `path` ends, looking from `offset`: just past its last
/// non-zero byte, or `offset` itself when every byte from there on is zero —
/// a preallocated tail never written, which is the end of the log and not
/// damage. A frame's header is never all zeros (the checksum of a zero
/// length and kind is not zero), so a real record cannot look like this.
pub(crate) fn data_end(path: &Path, offset: u64) -> Result<u64> {
    let mut file = File::open(path).map_err(io_err("opening", path))?;
    file.seek(SeekFrom::Start(offset)).map_err(io_err("seeking in", path))?;
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let (mut at, mut end) = (offset, offset);
    loop {
        let chunk = reader.fill_buf().map_err(io_err("reading", path))?;
        if chunk.is_empty() {
            return Ok(end);
        }
        if let Some(last) = chunk.iter().rposition(|&b| b != 0) {
            end = at + last as u64 + 1;
        }
        let n = chunk.len();
        at += n as u64;
        reader.consume(n);
    }
}

/// A frame read by the cursor: where it started and its kind. The payload is
/// in the buffer passed to [`SegmentCursor::next_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameAt {
    pub offset: u64,
    pub kind: u8,
}

/// Iterates frames of one segment up to a fixed byte bound.
///
/// Invariant: `HEADER_BYTES <= offset <= end`, and every byte before
/// `offset` (past the header) belongs to a frame whose checksum matched.
pub(crate) struct SegmentCursor {
    path: PathBuf,
    reader: BufReader<File>,
    offset: u64,
    end: u64,
    max_record_bytes: u64,
}

impl SegmentCursor {
    /// Opens the segment `base` at `path`, checks its header, and positions
    /// at `start` (clamped up to the first record). Frames are read up to
    /// `end` bytes into the file.
    pub(crate) fn open(path: &Path, base: u64, start: u64, end: u64, max_record_bytes: u64) -> Result<SegmentCursor> {
        let mut file = File::open(path).map_err(io_err("opening", path))?;
        check_header(&mut file, path, base, end)?;
        let offset = start.max(HEADER_BYTES);
        debug_assert!(offset <= end, "cursor start {offset} beyond bound {end}");
        file.seek(SeekFrom::Start(offset)).map_err(io_err("seeking in", path))?;
        Ok(SegmentCursor {
            path: path.to_owned(),
            reader: BufReader::with_capacity(READ_BUFFER_BYTES, file),
            offset,
            end,
            max_record_bytes,
        })
    }

    /// Offset of the next frame (equals the end of the last good one).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next frame's payload into `payload`. `Ok(None)` exactly at
    /// the bound; a bad or partial frame is `WalError::CorruptRecord` at the
    /// frame's start, and the cursor does not move past it.
    pub(crate) fn next_into(&mut self, payload: &mut Vec<u8>) -> Result<Option<FrameAt>> {
        if self.offset == self.end {
            return Ok(None);
        }
        let start = self.offset;
        let available = self.end - start;
        let frame = self.read_frame(available, payload).map_err(|e| match e {
            ReadFail::Frame(reason) => WalError::CorruptRecord { path: self.path.clone(), offset: start, reason },
            ReadFail::Io(source) => io_err("reading", &self.path)(source),
        })?;
        self.offset += FRAME_HEADER_BYTES as u64 + payload.len() as u64;
        debug_assert!(self.offset <= self.end);
        Ok(Some(FrameAt { offset: start, kind: frame.kind }))
    }

    /// Reads one frame given `available` bytes before the bound.
    fn read_frame(&mut self, available: u64, payload: &mut Vec<u8>) -> std::result::Result<FrameHeader, ReadFail> {
        let truncated = |needed: u64| ReadFail::Frame(FrameError::Truncated { needed, available });
        if available < FRAME_HEADER_BYTES as u64 {
            return Err(truncated(FRAME_HEADER_BYTES as u64));
        }
        let mut head = [0u8; FRAME_HEADER_BYTES];
        self.read_exact(&mut head, FRAME_HEADER_BYTES as u64, available)?;
        let header = FrameHeader::parse(&head);
        let remaining = available - FRAME_HEADER_BYTES as u64;
        header.check_len(remaining, self.max_record_bytes).map_err(ReadFail::Frame)?;
        // Safe to size now: len <= max_record_bytes and len <= bytes left.
        payload.clear();
        payload.resize(header.len as usize, 0);
        let needed = FRAME_HEADER_BYTES as u64 + u64::from(header.len);
        self.read_exact(payload, needed, available)?;
        header.check_crc(payload).map_err(ReadFail::Frame)?;
        Ok(header)
    }

    /// `read_exact` where hitting end-of-file early (the file shrank under
    /// us) is reported as a truncated frame, not as an I/O failure.
    fn read_exact(&mut self, buf: &mut [u8], needed: u64, available: u64) -> std::result::Result<(), ReadFail> {
        self.reader.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ReadFail::Frame(FrameError::Truncated { needed, available }),
            _ => ReadFail::Io(e),
        })
    }
}

/// Internal split between damage (decided by the caller) and I/O failures.
enum ReadFail {
    Frame(FrameError),
    Io(io::Error),
}
