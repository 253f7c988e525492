//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use waymark_wal::{Options, Position, Reader, Record, Wal};

/// Small segments so tests roll over often.
pub fn small_options(segment_size_bytes: u64) -> Options {
    Options {
        segment_size_bytes,
        max_record_bytes: 1 << 20,
        write_buffer_bytes: 4096,
        verify_sealed_segments: true,
        preallocate: true,
    }
}

/// Deterministic payload for record `i`.
pub fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// Reads every record from `from`, panicking on an error item.
pub fn read_all(dir: &Path, from: Position) -> Vec<Record> {
    Reader::open(dir, from, 1 << 20).expect("reader opens").map(|r| r.expect("record reads")).collect()
}

/// Writes `records` (kind, payload) syncing after each, and returns
/// their positions.
pub fn write_synced(dir: &Path, options: Options, records: &[(u8, Vec<u8>)]) -> Vec<Position> {
    let (mut wal, _) = Wal::open(dir, options).expect("open");
    let mut positions = Vec::new();
    for (kind, data) in records {
        positions.push(wal.append(*kind, data).expect("append"));
        wal.sync().expect("sync");
    }
    wal.close().expect("close");
    positions
}

/// Segment files in `dir`, sorted.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

/// Copies every file of `src` into a fresh directory `dest`.
pub fn copy_dir(src: &Path, dest: &Path) {
    fs::create_dir_all(dest).expect("mkdir");
    for file in segment_files(src) {
        fs::copy(&file, dest.join(file.file_name().expect("name"))).expect("copy");
    }
}
