//! File-system plumbing for a log directory: listing segments, creating
//! them atomically, and the directory fsyncs that make creations, renames and
//! deletions themselves durable (a file's own fsync does not cover its name).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Result, WalError};
use crate::segment::{encode_header, parse_segment_file_name, segment_file_name, HEADER_BYTES};

/// Suffix of half-made files; any found on open are leftovers of a crash.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

/// Describes a segment file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SegmentInfo {
    /// First global offset of the segment (and its file name).
    pub base: u64,
    /// Path of the file.
    pub path: PathBuf,
    /// Length in bytes, header included: up to the end of the last record.
    /// Equal to the file's length, except for the last segment of a log
    /// whose preallocated zero tail has not been found yet (a listing).
    pub len: u64,
}

impl SegmentInfo {
    /// Global offset just past this segment: the next segment's base.
    pub fn end_global(&self) -> u64 {
        self.base + self.len
    }
}

/// Path of the segment with `base` in `dir`.
pub(crate) fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(segment_file_name(base))
}

/// Makes the directory's entries durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(io_err("opening directory", dir))?;
    handle.sync_all().map_err(io_err("syncing directory", dir))
}

/// Lists segment files sorted by base, with their current lengths.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("listing", dir))? {
        let entry = entry.map_err(io_err("listing", dir))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(parsed) = parse_segment_file_name(&name) else {
            continue;
        };
        let base = parsed.map_err(|()| WalError::BadSegmentName { path: path.clone() })?;
        let len = entry.metadata().map_err(io_err("reading metadata of", &path))?.len();
        out.push(SegmentInfo { base, path, len });
    }
    out.sort_by_key(|s| s.base);
    Ok(out)
}

/// Deletes leftover temporary files from an interrupted segment creation or
/// copy. Returns how many were removed.
pub(crate) fn remove_temp_files(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir).map_err(io_err("listing", dir))? {
        let entry = entry.map_err(io_err("listing", dir))?;
        if entry.file_name().to_string_lossy().ends_with(TEMP_SUFFIX) {
            let path = entry.path();
            fs::remove_file(&path).map_err(io_err("removing", &path))?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// Creates the segment `base` with a durable header and returns it opened
/// for writing, positioned after the header. With `preallocate_bytes` past
/// the header the file is extended to that length with zeros (which read as
/// the end of the log, see `cursor::rest_is_zeros`).
///
/// The header is written to a temporary file, synced and then renamed into
/// place, so a segment file under its real name always has a complete
/// header: a crash leaves either no segment or a valid empty one.
pub(crate) fn create_segment(dir: &Path, base: u64, preallocate_bytes: u64) -> Result<(File, PathBuf)> {
    let path = segment_path(dir, base);
    let temp = dir.join(format!("{}{TEMP_SUFFIX}", segment_file_name(base)));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(io_err("creating", &temp))?;
    file.write_all(&encode_header(base)).map_err(io_err("writing header to", &temp))?;
    if preallocate_bytes > HEADER_BYTES {
        // The write position stays after the header; the length is what the sync below commits.
        file.set_len(preallocate_bytes).map_err(io_err("preallocating", &temp))?;
    }
    file.sync_all().map_err(io_err("syncing", &temp))?;
    fs::rename(&temp, &path).map_err(io_err("renaming into place", &path))?;
    sync_dir(dir)?;
    Ok((file, path))
}
