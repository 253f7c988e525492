//! Opening a log directory: checking its segments and repairing the tail.
//!
//! Only the last segment can legitimately be damaged by a crash, because a
//! segment is synced before the next one is created. So a bad frame in the
//! last segment is a torn write and everything from it on is cut off (and
//! reported), while any damage in a sealed segment, a missing or overlapping
//! segment, or a foreign header is a hard error that names the file and
//! offset: silently skipping it would lose acknowledged writes.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use crate::cursor::{check_header, data_end, SegmentCursor};
use crate::dir::{create_segment, list_segments, remove_temp_files, sync_dir, SegmentInfo};
use crate::error::{io_err, HeaderError, Result, WalError};
use crate::options::Options;
use crate::position::Position;
use crate::segment::{encode_header, HEADER_BYTES};

/// What opening the log found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// Number of segment files in the log after opening.
    pub segments: usize,
    /// Where the last segment was cut because its tail was torn or corrupt;
    /// `None` if the log ended cleanly.
    pub truncated_at: Option<Position>,
    /// Bytes of data removed from the end of the last segment (up to its last
    /// non-zero byte: a preallocated zero tail is not counted).
    pub bytes_dropped: u64,
    /// Leftover temporary files (interrupted segment creation) removed.
    pub temp_files_removed: usize,
    /// Where the next append will go.
    pub end: Position,
}

/// The checked state of a directory, ready for a writer.
///
/// Invariant: `sealed` followed by `active` are contiguous (each base is the
/// previous base plus the previous length), and `active.len` is the end of
/// its last good record.
pub(crate) struct Recovered {
    pub sealed: Vec<SegmentInfo>,
    pub active: SegmentInfo,
    pub report: OpenReport,
}

/// Checks every segment in `dir` (creating the directory and a first segment
/// if needed) and cuts a torn tail off the last one.
pub(crate) fn recover(dir: &Path, options: &Options) -> Result<Recovered> {
    ensure_dir(dir)?;
    let temp_files_removed = remove_temp_files(dir)?;
    let mut segments = list_segments(dir)?;
    if segments.is_empty() {
        let (_, path) = create_segment(dir, 0, options.preallocated_bytes())?;
        segments.push(SegmentInfo { base: 0, path, len: HEADER_BYTES });
    }
    check_contiguous(&segments)?;
    let Some((last, sealed)) = segments.split_last() else {
        unreachable!("at least one segment was ensured above");
    };
    for segment in sealed {
        check_sealed(segment, options)?;
    }
    let (active, truncated_at, bytes_dropped) = repair_tail(last.clone(), options)?;
    let report = OpenReport {
        segments: segments.len(),
        truncated_at,
        bytes_dropped,
        temp_files_removed,
        end: Position::new(active.base, active.len),
    };
    segments.pop();
    Ok(Recovered { sealed: segments, active, report })
}

/// Creates the log directory if missing, making its own name durable.
fn ensure_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(io_err("creating directory", dir))?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}

/// Each segment must start exactly where the previous one ends.
pub(crate) fn check_contiguous(segments: &[SegmentInfo]) -> Result<()> {
    for pair in segments.windows(2) {
        let expected_base = pair[0].end_global();
        if pair[1].base != expected_base {
            return Err(WalError::SegmentGap { path: pair[1].path.clone(), expected_base, found_base: pair[1].base });
        }
    }
    Ok(())
}

/// A sealed segment must have a good header and (if asked) only good frames
/// all the way to its end. Any failure is returned as is: a hard error.
fn check_sealed(segment: &SegmentInfo, options: &Options) -> Result<()> {
    if !options.verify_sealed_segments {
        let mut file = File::open(&segment.path).map_err(io_err("opening", &segment.path))?;
        return check_header(&mut file, &segment.path, segment.base, segment.len);
    }
    let mut cursor = SegmentCursor::open(&segment.path, segment.base, 0, segment.len, options.max_record_bytes)?;
    let mut payload = Vec::new();
    while cursor.next_into(&mut payload)?.is_some() {}
    Ok(())
}

/// Scans the last segment and cuts it at the first bad frame, unless all
/// that follows is zeros (a preallocated tail: the end of the log, kept).
/// Returns the segment with its logical length, where it was cut, and how
/// much was dropped.
fn repair_tail(mut last: SegmentInfo, options: &Options) -> Result<(SegmentInfo, Option<Position>, u64)> {
    if last.len < HEADER_BYTES {
        return rewrite_torn_header(last);
    }
    let mut cursor = SegmentCursor::open(&last.path, last.base, 0, last.len, options.max_record_bytes)?;
    let mut payload = Vec::new();
    let cut = loop {
        match cursor.next_into(&mut payload) {
            Ok(Some(_)) => continue,
            Ok(None) => break None,
            Err(WalError::CorruptRecord { offset, .. }) => break Some(offset),
            Err(other) => return Err(other),
        }
    };
    debug_assert!(cut.is_some() || cursor.offset() == last.len);
    let Some(offset) = cut else {
        return Ok((last, None, 0));
    };
    // Zeros after the records are a preallocated tail; only data is reported as dropped.
    let end = data_end(&last.path, offset)?;
    last.len = offset;
    if end == offset {
        return Ok((last, None, 0));
    }
    truncate_file(&last.path, offset)?;
    let cut_at = Position::new(last.base, offset);
    Ok((last, Some(cut_at), end - offset))
}

/// A last segment shorter than a header can only be a crash during its
/// creation. Accept it only if what is there is a prefix of the header we
/// would have written (or zeros, never-written blocks); then rewrite it.
fn rewrite_torn_header(mut last: SegmentInfo) -> Result<(SegmentInfo, Option<Position>, u64)> {
    let mut present = Vec::new();
    File::open(&last.path).and_then(|mut f| f.read_to_end(&mut present)).map_err(io_err("reading", &last.path))?;
    let expected = encode_header(last.base);
    let is_prefix = expected.starts_with(&present);
    let is_zeros = present.iter().all(|&b| b == 0);
    if present.len() as u64 >= HEADER_BYTES || !(is_prefix || is_zeros) {
        return Err(WalError::BadHeader {
            path: last.path.clone(),
            reason: HeaderError::Truncated { len: present.len() as u64, expected: HEADER_BYTES },
        });
    }
    let mut file = OpenOptions::new().write(true).open(&last.path).map_err(io_err("opening", &last.path))?;
    file.set_len(0)
        .and_then(|_| file.write_all(&expected))
        .and_then(|_| file.sync_all())
        .map_err(io_err("rewriting header of", &last.path))?;
    let dropped = present.len() as u64;
    last.len = HEADER_BYTES;
    let cut_at = Position::new(last.base, 0);
    Ok((last, Some(cut_at), dropped))
}

/// Cuts a file to `len` bytes and makes the new length durable.
fn truncate_file(path: &Path, len: u64) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).map_err(io_err("opening", path))?;
    file.set_len(len).map_err(io_err("truncating", path))?;
    file.sync_all().map_err(io_err("syncing", path))
}
