//! Crash simulation: cut or damage segment files the way a crash or a bad
//! disk would, reopen, and check that recovery returns exactly a prefix of
//! what was written, keeps everything that was synced before the damage, and
//! never returns a corrupted record. Damage to sealed segments must be a hard
//! error naming the file and offset.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{payload, read_all, segment_files, small_options, write_synced};
use waymark_wal::{Options, Position, Reader, Wal, WalError};

const SEGMENT_BYTES: u64 = 1024;

/// A log of several segments whose last segment holds a few records of
/// awkward sizes. Returns the records and their positions.
fn build_log(dir: &Path) -> (Vec<(u8, Vec<u8>)>, Vec<Position>) {
    let mut records: Vec<(u8, Vec<u8>)> = (0..20).map(|i| ((i % 5) as u8, payload(i, 90 + i))).collect();
    // Force a fresh segment, then a few small and odd-sized records.
    records.push((7, payload(100, 700)));
    for (i, len) in [0usize, 1, 17, 40].into_iter().enumerate() {
        records.push((i as u8, payload(200 + i, len)));
    }
    let positions = write_synced(dir, small_options(SEGMENT_BYTES), &records);
    (records, positions)
}

/// A fresh copy of `src` where the last segment holds `last_bytes`; sealed
/// segments are hard-linked (recovery never writes them).
fn damaged_copy(src: &Path, dest: &Path, last_bytes: &[u8]) {
    fs::create_dir_all(dest).unwrap();
    let files = segment_files(src);
    let (last, sealed) = files.split_last().unwrap();
    for file in sealed {
        fs::hard_link(file, dest.join(file.file_name().unwrap())).unwrap();
    }
    fs::write(dest.join(last.file_name().unwrap()), last_bytes).unwrap();
}

/// Opens `dir`, reads everything back and checks it is exactly the first
/// `expect_count` written records.
fn assert_recovers_prefix(
    dir: &Path,
    records: &[(u8, Vec<u8>)],
    positions: &[Position],
    expect_count: usize,
    what: &str,
) {
    let (wal, report) =
        Wal::open(dir, small_options(SEGMENT_BYTES)).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
    let got = read_all(dir, Position::ZERO);
    assert_eq!(got.len(), expect_count, "{what}: report {report:?}");
    for (i, record) in got.iter().enumerate() {
        assert_eq!(record.position, positions[i], "{what}");
        assert_eq!((record.kind, &record.payload), (records[i].0, &records[i].1), "{what}: record {i}");
    }
    assert_eq!(report.end, wal.appended());
}

fn last_segment(dir: &Path) -> (PathBuf, Vec<u8>, u64) {
    let last = segment_files(dir).pop().unwrap();
    let bytes = fs::read(&last).unwrap();
    let name = last.file_name().unwrap().to_str().unwrap();
    let base: u64 = name.trim_end_matches(".wal").parse().unwrap();
    (last, bytes, base)
}

#[test]
fn truncation_at_every_byte_of_the_tail_recovers_a_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let (records, positions) = build_log(&src);
    let (_, bytes, base) = last_segment(&src);
    let in_last: Vec<usize> = (0..records.len()).filter(|&i| positions[i].segment == base).collect();
    assert!(in_last.len() >= 4, "test needs several records in the last segment");
    let ends: Vec<u64> = in_last.iter().map(|&i| positions[i].offset + 9 + records[i].1.len() as u64).collect();
    assert_eq!(*ends.last().unwrap(), bytes.len() as u64);
    let before_last = in_last[0];

    for cut in 0..=bytes.len() {
        let dir = tmp.path().join(format!("cut{cut}"));
        damaged_copy(&src, &dir, &bytes[..cut]);
        // Every record whose bytes all precede the cut was synced before
        // the "crash" and must survive; nothing after it may appear.
        let complete = ends.iter().filter(|&&end| end <= cut as u64).count();
        assert_recovers_prefix(&dir, &records, &positions, before_last + complete, &format!("cut {cut}"));
        // The repaired log accepts appends and keeps them.
        let (mut wal, _) = Wal::open(&dir, small_options(SEGMENT_BYTES)).unwrap();
        let at = wal.append(42, b"after recovery").unwrap();
        wal.close().unwrap();
        let got = read_all(&dir, Position::ZERO);
        assert_eq!(got.len(), before_last + complete + 1, "cut {cut}");
        assert_eq!(got.last().unwrap().position, at);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn truncation_report_says_where_and_how_much() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, positions) = build_log(tmp.path());
    let (path, bytes, base) = last_segment(tmp.path());
    let last_start = positions.last().unwrap().offset;
    fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let (wal, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!(report.truncated_at, Some(Position::new(base, last_start)));
    assert_eq!(report.bytes_dropped, bytes.len() as u64 - 3 - last_start);
    // The file is preallocated again past the cut: the log ends there, in zeros.
    assert_eq!(wal.appended(), Position::new(base, last_start));
    assert!(fs::read(&path).unwrap()[last_start as usize..].iter().all(|&b| b == 0));
    drop(wal);
    // A clean reopen reports nothing.
    let (_, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!((report.truncated_at, report.bytes_dropped), (None, 0));
}

/// Tiny deterministic generator so failures reproduce.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn bit_flips_in_the_tail_drop_the_damaged_record_and_after() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let (records, positions) = build_log(&src);
    let (_, bytes, base) = last_segment(&src);
    let in_last: Vec<usize> = (0..records.len()).filter(|&i| positions[i].segment == base).collect();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for trial in 0..200 {
        let byte = 24 + (rng.next() % (bytes.len() as u64 - 24)) as usize;
        let bit = rng.next() % 8;
        let mut damaged = bytes.clone();
        damaged[byte] ^= 1 << bit;
        // The record containing the flipped byte and all after it go.
        let hit = in_last.iter().copied().rfind(|&i| positions[i].offset as usize <= byte).unwrap();
        let dir = tmp.path().join(format!("flip{trial}"));
        damaged_copy(&src, &dir, &damaged);
        assert_recovers_prefix(&dir, &records, &positions, hit, &format!("flip byte {byte} bit {bit}"));
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn bit_flip_in_last_segment_header_is_a_hard_error() {
    let tmp = tempfile::tempdir().unwrap();
    build_log(tmp.path());
    let (path, mut bytes, _) = last_segment(tmp.path());
    bytes[13] ^= 0x04;
    fs::write(&path, &bytes).unwrap();
    let err = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).err().unwrap();
    assert!(matches!(&err, WalError::BadHeader { path: p, .. } if p == &path), "{err}");
}

#[test]
fn bit_flips_in_sealed_segments_are_hard_errors_naming_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let (records, positions) = build_log(&src);
    let files = segment_files(&src);
    let mut rng = XorShift(12345);
    for trial in 0..40 {
        // A record in a sealed (not last) segment.
        let last_base = positions.last().unwrap().segment;
        let sealed: Vec<usize> = (0..records.len()).filter(|&i| positions[i].segment != last_base).collect();
        let victim = sealed[(rng.next() % sealed.len() as u64) as usize];
        let frame_len = 9 + records[victim].1.len() as u64;
        let byte = positions[victim].offset + rng.next() % frame_len;
        let file = files
            .iter()
            .find(|f| {
                f.file_name().unwrap().to_str().unwrap().starts_with(&format!("{:020}", positions[victim].segment))
            })
            .unwrap();
        let dir = tmp.path().join(format!("sealed{trial}"));
        common::copy_dir(&src, &dir);
        let target = dir.join(file.file_name().unwrap());
        let mut bytes = fs::read(&target).unwrap();
        bytes[byte as usize] ^= 1 << (rng.next() % 8);
        fs::write(&target, &bytes).unwrap();

        let err = Wal::open(&dir, small_options(SEGMENT_BYTES)).err().expect("open must fail");
        assert!(
            matches!(&err, WalError::CorruptRecord { path, offset, .. } if path == &target && *offset == positions[victim].offset),
            "trial {trial}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&target.display().to_string()) && message.contains(&positions[victim].offset.to_string())
        );

        // Without the open-time scan the reader stops at the same place.
        let lazy = Options { verify_sealed_segments: false, ..small_options(SEGMENT_BYTES) };
        Wal::open(&dir, lazy).unwrap();
        let items: Vec<_> = Reader::open(&dir, Position::ZERO, 1 << 20).unwrap().collect();
        assert_eq!(items.len(), victim + 1, "all good records, then one error");
        assert!(items[..victim].iter().all(|r| r.is_ok()));
        assert!(matches!(&items[victim], Err(WalError::CorruptRecord { path, .. }) if path == &target));
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn torn_header_that_is_not_a_prefix_is_a_hard_error() {
    let tmp = tempfile::tempdir().unwrap();
    build_log(tmp.path());
    let (path, _, _) = last_segment(tmp.path());
    fs::write(&path, b"garbage").unwrap();
    let err = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).err().unwrap();
    assert!(matches!(err, WalError::BadHeader { .. }), "{err}");
}
