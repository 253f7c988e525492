//! Writer, reader, roll-over, truncation and export behaviour.

mod common;

use std::fs;

use common::{payload, read_all, segment_files, small_options, write_synced};
use waymark_wal::{HeaderError, Options, Position, Reader, Wal, WalError};

#[test]
fn empty_log_opens_with_one_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let (wal, report) = Wal::open(&dir, Options::default()).unwrap();
    assert_eq!(report.segments, 1);
    assert_eq!(report.truncated_at, None);
    assert_eq!(report.end, Position::new(0, 24));
    assert_eq!(wal.durable(), Position::new(0, 24));
    assert_eq!(segment_files(&dir)[0].file_name().unwrap(), "00000000000000000000.wal");
}

#[test]
fn append_sync_durable_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), Options::default()).unwrap();
    let a = wal.append(1, b"alpha").unwrap();
    let b = wal.append(2, b"").unwrap();
    assert_eq!(a, Position::new(0, 24));
    assert_eq!(b, Position::new(0, 24 + 9 + 5));
    assert!(wal.durable() <= a, "nothing synced yet");
    let durable = wal.sync().unwrap();
    assert_eq!(durable, wal.appended());
    assert!(durable > b);
    drop(wal);
    let records = read_all(tmp.path(), Position::ZERO);
    assert_eq!(records.len(), 2);
    assert_eq!((records[0].position, records[0].kind, &records[0].payload[..]), (a, 1, &b"alpha"[..]));
    assert_eq!((records[1].position, records[1].kind, records[1].payload.len()), (b, 2, 0));
}

#[test]
fn rolls_over_and_reads_across_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<(u8, Vec<u8>)> = (0..50).map(|i| ((i % 7) as u8, payload(i, 100))).collect();
    let positions = write_synced(tmp.path(), small_options(1024), &records);
    let files = segment_files(tmp.path());
    assert!(files.len() >= 5, "expected roll-over, got {files:?}");
    for file in &files {
        assert!(fs::metadata(file).unwrap().len() <= 1024);
    }
    let got = read_all(tmp.path(), Position::ZERO);
    let got: Vec<(Position, u8, Vec<u8>)> = got.into_iter().map(|r| (r.position, r.kind, r.payload)).collect();
    let want: Vec<(Position, u8, Vec<u8>)> =
        positions.iter().zip(&records).map(|(p, (k, d))| (*p, *k, d.clone())).collect();
    assert_eq!(got, want);
    // Positions are globally monotone and a new segment's base is the
    // previous base + previous length.
    assert!(positions.windows(2).all(|w| w[0] < w[1]));
    let (wal, _) = Wal::open(tmp.path(), small_options(1024)).unwrap();
    for pair in wal.sealed_segments().windows(2) {
        assert_eq!(pair[0].base + pair[0].len, pair[1].base);
    }
}

#[test]
fn oversized_record_goes_alone_and_too_large_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(512)).unwrap();
    wal.append(1, &payload(0, 10)).unwrap();
    let big = wal.append(2, &payload(1, 2000)).unwrap();
    let after = wal.append(3, &payload(2, 10)).unwrap();
    assert_eq!(big.offset, 24, "big record starts a fresh segment");
    assert_eq!(after.offset, 24, "and is alone in it");
    assert!(big.segment < after.segment);
    let err = wal.append(4, &vec![0u8; (1 << 20) + 1]).unwrap_err();
    assert!(matches!(err, WalError::RecordTooLarge { len, max } if len == (1 << 20) + 1 && max == 1 << 20));
    // A rejected append does not poison the log.
    wal.append(5, b"ok").unwrap();
    wal.close().unwrap();
    let kinds: Vec<u8> = read_all(tmp.path(), Position::ZERO).iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![1, 2, 3, 5]);
}

#[test]
fn reader_from_position_and_live_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(600)).unwrap();
    let positions: Vec<Position> = (0..20).map(|i| wal.append(i as u8, &payload(i, 50)).unwrap()).collect();
    // Live reader sees unsynced appends (they are flushed to the OS).
    let all: Vec<_> = wal.reader_from(wal.first_position()).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 20);
    let from_mid: Vec<_> = wal.reader_from(positions[13]).unwrap().map(|r| r.unwrap().kind).collect();
    assert_eq!(from_mid, (13..20).map(|i| i as u8).collect::<Vec<_>>());
    let at_end: Vec<_> = wal.reader_from(wal.appended()).unwrap().collect();
    assert!(at_end.is_empty());
    let err = wal.reader_from(Position::new(3, 0)).err().unwrap();
    assert!(matches!(err, WalError::PositionOutOfRange { .. }), "{err}");
}

#[test]
fn truncate_before_removes_whole_old_segments_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(512)).unwrap();
    let positions: Vec<Position> = (0..40).map(|i| wal.append(1, &payload(i, 60)).unwrap()).collect();
    wal.sync().unwrap();
    let sealed = wal.sealed_segments();
    assert!(sealed.len() >= 4);
    // A position inside the third segment keeps the third segment.
    let keep_from = positions.iter().find(|p| p.segment == sealed[2].base).copied().unwrap();
    let removed = wal.truncate_before(keep_from).unwrap();
    assert_eq!(removed, sealed[..2].to_vec());
    assert_eq!(wal.first_position(), Position::new(sealed[2].base, 24));
    for gone in &removed {
        assert!(!gone.path.exists());
    }
    // Old positions are now an explicit error.
    let err = wal.reader_from(positions[0]).err().unwrap();
    assert!(matches!(err, WalError::PositionTruncated { .. }), "{err}");
    // Even a position past everything never removes the active segment.
    let end = wal.appended();
    wal.truncate_before(Position::new(u64::MAX, 0)).unwrap();
    assert!(wal.sealed_segments().is_empty());
    assert_eq!(wal.appended(), end);
    wal.append(9, b"still works").unwrap();
    wal.close().unwrap();
    let (wal, report) = Wal::open(tmp.path(), small_options(512)).unwrap();
    assert_eq!(report.segments, 1);
    let last: Vec<_> = Reader::open(tmp.path(), wal.first_position(), 1 << 20).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(last.last().unwrap().payload, b"still works");
}

#[test]
fn link_or_copy_exports_sealed_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    let snap = tmp.path().join("snap");
    fs::create_dir_all(&snap).unwrap();
    let (mut wal, _) = Wal::open(&log, small_options(512)).unwrap();
    for i in 0..30 {
        wal.append(1, &payload(i, 60)).unwrap();
    }
    wal.roll_segment().unwrap();
    let sealed = wal.sealed_segments();
    let linked = wal.link_or_copy_segments(.., &snap).unwrap();
    assert_eq!(linked.len(), sealed.len());
    for (src, dst) in sealed.iter().zip(&linked) {
        assert_eq!(fs::read(&src.path).unwrap(), fs::read(&dst.path).unwrap());
        assert_eq!(src.base, dst.base);
    }
    // The snapshot is itself a readable log holding every record.
    let records: Vec<_> = Reader::open(&snap, Position::ZERO, 1 << 20).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(records.len(), 30);
    // Linking again into the same place is refused, not silently replaced.
    let err = wal.link_or_copy_segments(sealed[0].base..=sealed[0].base, &snap).unwrap_err();
    assert!(matches!(err, WalError::DestinationExists { .. }), "{err}");
    // A sub-range links only those segments.
    let partial_dir = tmp.path().join("partial");
    fs::create_dir_all(&partial_dir).unwrap();
    let partial = wal.link_or_copy_segments(sealed[1].base.., &partial_dir).unwrap();
    assert_eq!(partial.len(), sealed.len() - 1);
}

#[test]
fn header_mismatches_are_hard_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<(u8, Vec<u8>)> = (0..30).map(|i| (1, payload(i, 60))).collect();
    write_synced(tmp.path(), small_options(512), &records);
    let files = segment_files(tmp.path());

    // Bad magic in a sealed segment.
    let mut bytes = fs::read(&files[1]).unwrap();
    bytes[0] ^= 0xff;
    fs::write(&files[1], &bytes).unwrap();
    let err = Wal::open(tmp.path(), small_options(512)).err().unwrap();
    assert!(
        matches!(&err, WalError::BadHeader { path, reason: HeaderError::BadMagic { .. } } if path == &files[1]),
        "{err}"
    );
    assert!(err.to_string().contains(&files[1].display().to_string()));
    bytes[0] ^= 0xff;

    // Unknown version.
    bytes[8] = 9;
    fs::write(&files[1], &bytes).unwrap();
    let err = Wal::open(tmp.path(), small_options(512)).err().unwrap();
    assert!(
        matches!(err, WalError::BadHeader { reason: HeaderError::UnsupportedVersion { found: 9, .. }, .. }),
        "{err}"
    );
    bytes[8] = 1;
    fs::write(&files[1], &bytes).unwrap();

    // A stray segment overlapping the others breaks contiguity.
    let stray = tmp.path().join("00000000000000000001.wal");
    fs::copy(files.last().unwrap(), &stray).unwrap();
    let err = Reader::open(tmp.path(), Position::ZERO, 1 << 20).err().unwrap();
    assert!(matches!(&err, WalError::SegmentGap { path, .. } if path == &stray), "{err}");
}

#[test]
fn base_mismatch_with_file_name_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    write_synced(tmp.path(), small_options(4096), &[(1, payload(0, 10))]);
    let only = segment_files(tmp.path()).remove(0);
    let renamed = tmp.path().join("00000000000000000024.wal");
    fs::rename(&only, &renamed).unwrap();
    let err = Wal::open(tmp.path(), small_options(4096)).err().unwrap();
    assert!(
        matches!(&err, WalError::BadHeader { path, reason: HeaderError::BaseMismatch { header_base: 0, name_base: 24 } } if path == &renamed),
        "{err}"
    );
}

#[test]
fn missing_middle_segment_is_a_gap_error() {
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<(u8, Vec<u8>)> = (0..30).map(|i| (1, payload(i, 60))).collect();
    write_synced(tmp.path(), small_options(512), &records);
    let files = segment_files(tmp.path());
    fs::remove_file(&files[1]).unwrap();
    let err = Wal::open(tmp.path(), small_options(512)).err().unwrap();
    assert!(matches!(&err, WalError::SegmentGap { path, .. } if path == &files[2]), "{err}");
}

#[test]
fn leftover_temp_files_are_removed_and_bad_names_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    write_synced(tmp.path(), small_options(4096), &[(1, payload(0, 10))]);
    fs::write(tmp.path().join("00000000000000009999.wal.tmp"), b"half").unwrap();
    let (wal, report) = Wal::open(tmp.path(), small_options(4096)).unwrap();
    assert_eq!(report.temp_files_removed, 1);
    drop(wal);
    fs::write(tmp.path().join("12.wal"), b"").unwrap();
    let err = Wal::open(tmp.path(), small_options(4096)).err().unwrap();
    assert!(matches!(err, WalError::BadSegmentName { .. }), "{err}");
}

#[test]
fn invalid_options_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = Options { max_record_bytes: u64::from(u32::MAX) + 1, ..Options::default() };
    assert!(matches!(Wal::open(tmp.path(), bad), Err(WalError::InvalidOptions(_))));
    let bad = Options { segment_size_bytes: 10, ..Options::default() };
    assert!(matches!(Wal::open(tmp.path(), bad), Err(WalError::InvalidOptions(_))));
}

#[test]
fn group_commit_one_sync_covers_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), Options::default()).unwrap();
    let positions: Vec<Position> = (0..1000).map(|i| wal.append(1, &payload(i, 100)).unwrap()).collect();
    assert!(wal.durable() <= positions[0]);
    let durable = wal.sync().unwrap();
    assert!(positions.iter().all(|p| *p < durable));
    assert_eq!(wal.sync().unwrap(), durable, "an empty sync changes nothing");
}

#[test]
fn a_record_is_read_back_at_its_position_in_the_active_or_a_sealed_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(1024)).unwrap();
    let first = wal.append(3, b"sealed soon").unwrap();
    wal.roll_segment().unwrap();
    let second = wal.append(4, b"still buffered").unwrap();
    let read = wal.read_at(second).unwrap();
    assert_eq!((read.position, read.kind, &read.payload[..]), (second, 4, &b"still buffered"[..]));
    let read = wal.read_at(first).unwrap();
    assert_eq!((read.kind, &read.payload[..]), (3, &b"sealed soon"[..]));
    let nowhere = Position::new(first.segment + 1, 24);
    assert!(matches!(wal.read_at(nowhere), Err(WalError::PositionOutOfRange { .. })));
    let past_the_end = Position::new(second.segment, wal.appended().offset);
    assert!(matches!(wal.read_at(past_the_end), Err(WalError::CorruptRecord { .. })));
}

#[test]
fn a_record_damaged_on_disk_reads_back_as_corrupt_not_as_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), Options::default()).unwrap();
    let at = wal.append(1, b"the alteration").unwrap();
    wal.sync().unwrap();
    let file = segment_files(tmp.path()).remove(0);
    let mut bytes = fs::read(&file).unwrap();
    bytes[at.offset as usize + 12] ^= 0xff; // a payload byte
    fs::write(&file, &bytes).unwrap();
    let read = wal.read_at(at);
    assert!(
        matches!(read, Err(WalError::CorruptRecord { reason: waymark_wal::FrameError::Checksum { .. }, .. })),
        "{read:?}"
    );
}

#[test]
fn sealing_through_a_position_rolls_only_the_segment_that_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(4096)).unwrap();
    wal.append(1, b"in the first segment").unwrap();
    let end_of_first = wal.appended();
    let upto = wal.seal_through(end_of_first).unwrap();
    assert_eq!(upto, Position::new(end_of_first.global(), 24), "the active segment was rolled");
    assert_eq!(wal.sealed_segments().len(), 1);
    wal.append(1, b"in the second").unwrap();
    assert_eq!(wal.seal_through(end_of_first).unwrap(), upto, "already sealed: the same end, no roll");
    assert_eq!(wal.sealed_segments().len(), 1);
    let gone = Position::new(end_of_first.segment, 4096);
    assert!(matches!(wal.seal_through(gone), Err(WalError::PositionOutOfRange { .. })));
}
