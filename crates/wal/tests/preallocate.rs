//! Preallocated segments (`Options::preallocate`): the active segment is created at its full size,
//! so a log that was not closed ends in zeros. Recovery must read that zero tail as the end of the
//! log (not as damage) and still cut a torn record written into it, and sealed segments must be
//! trimmed to their records so positions stay contiguous.

mod common;

use std::fs;
use std::path::Path;

use common::{payload, read_all, segment_files, small_options};
use waymark_wal::segment::encode_frame;
use waymark_wal::{Position, Wal};

const SEGMENT_BYTES: u64 = 4096;

/// Appends `count` synced records and drops the log without closing it, as a crash would leave it
/// (the preallocated tail stays). Returns the records' positions and where the next one goes.
fn crashed_log(dir: &Path, count: usize) -> (Vec<Position>, Position) {
    let (mut wal, _) = Wal::open(dir, small_options(SEGMENT_BYTES)).unwrap();
    let positions = (0..count).map(|i| wal.append(1, &payload(i, 50 + i)).unwrap()).collect();
    wal.sync().unwrap();
    let end = wal.appended();
    drop(wal);
    (positions, end)
}

fn last_file(dir: &Path) -> std::path::PathBuf {
    segment_files(dir).pop().unwrap()
}

#[test]
fn a_zero_tail_is_the_end_of_the_log_not_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let (positions, end) = crashed_log(tmp.path(), 10);
    assert_eq!(fs::metadata(last_file(tmp.path())).unwrap().len(), SEGMENT_BYTES, "preallocated");
    // A reader of the directory stops at the zeros.
    let got = read_all(tmp.path(), Position::ZERO);
    assert_eq!(got.iter().map(|r| r.position).collect::<Vec<_>>(), positions);

    let (mut wal, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!((report.truncated_at, report.bytes_dropped, report.end), (None, 0, end));
    assert_eq!(wal.append(9, b"after").unwrap(), end, "appends continue at the logical end");
    wal.close().unwrap();
    let got = read_all(tmp.path(), Position::ZERO);
    assert_eq!(got.len(), 11);
    assert_eq!((got[10].kind, got[10].payload.as_slice()), (9, &b"after"[..]));
    // A closed log is trimmed to its records.
    assert_eq!(fs::metadata(last_file(tmp.path())).unwrap().len(), end.offset + 9 + 5);
}

#[test]
fn a_torn_record_in_the_zero_tail_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (positions, end) = crashed_log(tmp.path(), 5);
    let mut frame = Vec::new();
    encode_frame(3, &[0xAB; 100], &mut frame);
    let torn = &frame[..60]; // ends in payload bytes, so its last byte is not zero
    let path = last_file(tmp.path());
    let mut bytes = fs::read(&path).unwrap();
    bytes[end.offset as usize..end.offset as usize + torn.len()].copy_from_slice(torn);
    fs::write(&path, &bytes).unwrap();

    let (mut wal, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!((report.truncated_at, report.bytes_dropped, report.end), (Some(end), 60, end));
    assert_eq!(wal.append(4, b"next").unwrap(), end);
    wal.close().unwrap();
    let got = read_all(tmp.path(), Position::ZERO);
    assert_eq!(got.iter().take(5).map(|r| r.position).collect::<Vec<_>>(), positions);
    assert_eq!((got.len(), got[5].kind), (6, 4));
}

/// A whole, valid frame beyond a run of zeros is not the log's continuation (it could be a stale
/// write whose predecessor never reached the disk): the tail is cut at the first zero, and the
/// frame is never returned.
#[test]
fn a_valid_frame_after_zeros_is_cut_not_resurrected() {
    let tmp = tempfile::tempdir().unwrap();
    let (positions, end) = crashed_log(tmp.path(), 5);
    let mut frame = Vec::new();
    encode_frame(7, b"stale", &mut frame);
    let path = last_file(tmp.path());
    let mut bytes = fs::read(&path).unwrap();
    let at = end.offset as usize + 512;
    bytes[at..at + frame.len()].copy_from_slice(&frame);
    fs::write(&path, &bytes).unwrap();

    let (wal, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!((report.truncated_at, report.end), (Some(end), end));
    drop(wal);
    let got = read_all(tmp.path(), Position::ZERO);
    assert_eq!(got.iter().map(|r| r.position).collect::<Vec<_>>(), positions);
}

#[test]
fn sealed_segments_are_trimmed_to_their_records() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    for i in 0..100 {
        wal.append(1, &payload(i, 200)).unwrap();
    }
    wal.sync().unwrap();
    let sealed = wal.sealed_segments();
    assert!(sealed.len() >= 3);
    for segment in &sealed {
        assert_eq!(fs::metadata(&segment.path).unwrap().len(), segment.len, "{}", segment.path.display());
    }
    let files = segment_files(tmp.path());
    assert_eq!(fs::metadata(files.last().unwrap()).unwrap().len(), SEGMENT_BYTES, "the active one is preallocated");
    drop(wal);
    let (wal, report) = Wal::open(tmp.path(), small_options(SEGMENT_BYTES)).unwrap();
    assert_eq!((report.truncated_at, report.bytes_dropped), (None, 0));
    assert_eq!(read_all(tmp.path(), Position::ZERO).len(), 100);
    drop(wal);
}
