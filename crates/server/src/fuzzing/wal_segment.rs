//! `wal_segment`: a vnode's first log segment, read as a start reads it and as a snapshot's
//! replay reads it.

use super::scratch::with_empty_dir;
use crate::storage::recover;
use waymark_core::{Record, RecordView};
use waymark_wal::segment::{frame_crc, segment_file_name, FRAME_HEADER_BYTES, HEADER_BYTES};
use waymark_wal::{FrameScanner, Options, Position};

/// Writes the input (after its first byte) as segment 0 of a vnode's log and opens the vnode's
/// storage (`storage::recover::open`: the log's recovery, which cuts a torn tail, then every record
/// decoded), after scanning the segment as a snapshot's replay does (`FrameScanner`, then
/// `RecordView::decode`). Contract: an error or a value, never a panic or an allocation sized by a
/// length field; recovery cuts no more than the file holds; a repaired log opens again with
/// nothing more to cut and the same records; and when the scan read every frame without damage,
/// recovery returns exactly the records the scan decoded.
///
/// An odd first byte makes every frame's checksum right before the file is written (following the
/// frames' length fields), so that damaged payloads reach the record decoders instead of stopping
/// at the checksum.
pub fn wal_segment(data: &[u8]) -> bool {
    let Some((&mode, segment)) = data.split_first() else {
        return false;
    };
    let mut segment = segment.to_vec();
    if mode & 1 == 1 {
        fix_checksums(&mut segment);
    }
    let options = Options { preallocate: false, ..Options::default() };
    with_empty_dir(|dir| {
        let wal_dir = dir.join("wal");
        std::fs::create_dir_all(&wal_dir).expect("a log directory");
        std::fs::write(wal_dir.join(segment_file_name(0)), &segment).expect("the segment written");

        let scanned = scan(&wal_dir, options.max_record_bytes);

        let Ok(opened) = recover::open(dir, options.clone()) else {
            return false;
        };
        assert!(
            opened.truncated_bytes <= segment.len() as u64,
            "cut {} of {} bytes",
            opened.truncated_bytes,
            segment.len()
        );
        let records = opened.records;
        drop(opened.wal);
        let again = recover::open(dir, options).expect("a repaired log opens again");
        assert_eq!(again.truncated_bytes, 0, "the second open cut again");
        assert_eq!(again.records, records, "the second open read other records");
        if let Some(scanned) = scanned {
            assert_eq!(scanned, records, "the replay's scan and the start's recovery read different records");
        }
        true
    })
}

/// The records a snapshot's replay reads from the segment, each decoded both ways; `None` if the
/// scan stopped at damage or a record did not decode.
fn scan(wal_dir: &std::path::Path, max_record_bytes: u64) -> Option<Vec<Record>> {
    let mut scanner = FrameScanner::open(wal_dir, Position::new(0, HEADER_BYTES), max_record_bytes).ok()?;
    let mut records = vec![];
    loop {
        let frame = match scanner.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Some(records),
            Err(_) => return None,
        };
        match (RecordView::decode(frame.kind, frame.payload), Record::decode(frame.kind, frame.payload)) {
            (Ok(view), Ok(record)) => {
                assert_eq!(RecordView::of(&record), view);
                records.push(record);
            }
            (Err(_), Err(_)) => return None,
            (view, record) => panic!("the view and the record decoder disagree: {view:?} / {record:?}"),
        }
    }
}

/// Rewrites each frame's checksum to match its bytes, walking the frames by their length fields
/// from the end of the segment header, as far as they fit.
fn fix_checksums(segment: &mut [u8]) {
    let mut at = HEADER_BYTES as usize;
    while at + FRAME_HEADER_BYTES <= segment.len() {
        let len = u32::from_le_bytes(segment[at..at + 4].try_into().expect("4 bytes"));
        let kind = segment[at + 8];
        let start = at + FRAME_HEADER_BYTES;
        let Some(end) = start.checked_add(len as usize).filter(|&end| end <= segment.len()) else {
            return;
        };
        let crc = frame_crc(len, kind, &segment[start..end]);
        segment[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}
