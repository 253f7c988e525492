//! The frame scanner against the reader: on any log (sizes, segment sizes, read sizes smaller and
//! larger than a frame, any start position) it lends exactly the records the reader yields, and on
//! a damaged log it stops with the same error, naming the same file and offset.

mod common;

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use waymark_wal::{FrameScanner, Position, Reader, WalError};

/// Every frame the scanner lends, owned, or its error.
fn scan_all(dir: &Path, from: Position, read_bytes: usize) -> Result<Vec<(Position, u8, Vec<u8>)>, String> {
    let mut scanner = FrameScanner::with_read_bytes(dir, from, 1 << 20, read_bytes).map_err(|e| e.to_string())?;
    let mut out = vec![];
    loop {
        match scanner.next_frame() {
            Ok(Some(f)) => out.push((f.position, f.kind, f.payload.to_vec())),
            Ok(None) => return Ok(out),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Every record the reader yields, or its error.
fn read_all(dir: &Path, from: Position) -> Result<Vec<(Position, u8, Vec<u8>)>, String> {
    let reader = Reader::open(dir, from, 1 << 20).map_err(|e| e.to_string())?;
    reader.map(|r| r.map(|r| (r.position, r.kind, r.payload)).map_err(|e| e.to_string())).collect()
}

fn write(dir: &Path, lens: &[usize], segment_size_bytes: u64) -> Vec<Position> {
    let records: Vec<(u8, Vec<u8>)> = lens.iter().enumerate().map(|(i, &n)| (i as u8, common::payload(i, n))).collect();
    common::write_synced(dir, common::small_options(segment_size_bytes), &records)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn the_scanner_lends_what_the_reader_reads(
        lens in proptest::collection::vec(prop_oneof![4 => 0usize..200, 1 => 200usize..20_000], 0..30),
        segment_size_bytes in prop_oneof![Just(64u64), 256u64..8192, Just(1 << 20)],
        read_bytes in prop_oneof![Just(1usize), 9usize..64, 64usize..4096, Just(1 << 20)],
        start in any::<prop::sample::Index>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let positions = write(tmp.path(), &lens, segment_size_bytes);
        let from = if positions.is_empty() { Position::new(0, 0) } else { positions[start.index(positions.len())] };
        let expected = read_all(tmp.path(), from);
        prop_assert!(expected.is_ok());
        prop_assert_eq!(scan_all(tmp.path(), from, read_bytes), expected);
    }

    #[test]
    fn a_damaged_byte_stops_both_at_the_same_file_and_offset(
        lens in proptest::collection::vec(1usize..3000, 1..12),
        segment_size_bytes in prop_oneof![256u64..8192, Just(1 << 20)],
        read_bytes in prop_oneof![9usize..64, Just(1 << 20)],
        victim in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), &lens, segment_size_bytes);
        let files = common::segment_files(tmp.path());
        let file = &files[victim.index(files.len())];
        let mut bytes = fs::read(file).unwrap();
        prop_assume!(bytes.len() > 24);
        let i = 24 + at.index(bytes.len() - 24);
        bytes[i] ^= flip;
        fs::write(file, &bytes).unwrap();
        let from = Position::new(0, 0);
        prop_assert_eq!(scan_all(tmp.path(), from, read_bytes), read_all(tmp.path(), from));
    }
}

#[test]
fn a_corrupt_frame_is_named_by_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let positions = write(tmp.path(), &[100, 100, 100], 1 << 20);
    let file = common::segment_files(tmp.path()).remove(0);
    let mut bytes = fs::read(&file).unwrap();
    bytes[positions[1].offset as usize + 20] ^= 0x40;
    fs::write(&file, &bytes).unwrap();
    let mut scanner = FrameScanner::open(tmp.path(), Position::new(0, 0), 1 << 20).unwrap();
    assert!(scanner.next_frame().unwrap().is_some());
    match scanner.next_frame() {
        Err(WalError::CorruptRecord { path, offset, .. }) => {
            assert_eq!((path, offset), (file, positions[1].offset));
        }
        other => panic!("expected a corrupt record, got {other:?}"),
    }
    assert!(scanner.next_frame().unwrap().is_none(), "an error ends the scan");
}

#[test]
fn a_huge_length_field_is_refused_before_the_buffer_grows() {
    let tmp = tempfile::tempdir().unwrap();
    let positions = write(tmp.path(), &[10], 1 << 20);
    let file = common::segment_files(tmp.path()).remove(0);
    let mut bytes = fs::read(&file).unwrap();
    let at = positions[0].offset as usize;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&file, &bytes).unwrap();
    let mut scanner = FrameScanner::open(tmp.path(), Position::new(0, 0), u64::from(u32::MAX)).unwrap();
    assert!(matches!(scanner.next_frame(), Err(WalError::CorruptRecord { .. })));
}
