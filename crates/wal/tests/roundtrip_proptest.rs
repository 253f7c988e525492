//! Property: whatever is appended (any sizes, kinds, sync points, segment
//! sizes) reads back identically after reopening, in order, at the positions
//! `append` returned, and `durable` only moves forward.

mod common;

use proptest::prelude::*;
use waymark_wal::{Options, Position, Reader, Wal};

#[derive(Debug, Clone)]
struct Op {
    kind: u8,
    len: usize,
    sync_after: bool,
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![
        4 => 0usize..256,
        2 => 256usize..8192,
        1 => 8192usize..70 * 1024,
    ];
    (any::<u8>(), len, proptest::bool::weighted(0.2)).prop_map(|(kind, len, sync_after)| Op { kind, len, sync_after })
}

fn options(segment_size_bytes: u64, write_buffer_bytes: usize) -> Options {
    Options {
        segment_size_bytes,
        max_record_bytes: 80 * 1024,
        write_buffer_bytes,
        verify_sealed_segments: true,
        preallocate: true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn append_reopen_read_back(
        ops in proptest::collection::vec(op(), 0..40),
        segment_size_bytes in prop_oneof![Just(64u64), 256u64..4096, Just(64 * 1024)],
        write_buffer_bytes in prop_oneof![Just(1usize), 64usize..2048, Just(1 << 20)],
        reopen_midway in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(segment_size_bytes, write_buffer_bytes);
        let (mut wal, _) = Wal::open(tmp.path(), opts.clone()).unwrap();
        let mut written: Vec<(Position, u8, Vec<u8>)> = Vec::new();
        let mut last_durable = wal.durable();
        for (i, op) in ops.iter().enumerate() {
            if reopen_midway && i == ops.len() / 2 {
                wal.close().unwrap();
                let (reopened, report) = Wal::open(tmp.path(), opts.clone()).unwrap();
                prop_assert_eq!(report.truncated_at, None);
                wal = reopened;
            }
            let data = common::payload(i, op.len);
            let at = wal.append(op.kind, &data).unwrap();
            if let Some((prev, _, _)) = written.last() {
                prop_assert!(*prev < at);
            }
            written.push((at, op.kind, data));
            if op.sync_after {
                let durable = wal.sync().unwrap();
                prop_assert!(durable > at && durable >= last_durable);
                last_durable = durable;
            }
        }
        wal.close().unwrap();
        let (wal, report) = Wal::open(tmp.path(), opts.clone()).unwrap();
        prop_assert_eq!(report.truncated_at, None);
        for segment in wal.sealed_segments() {
            // A segment only exceeds the limit if it holds a single record.
            let records_in = written.iter().filter(|(p, _, _)| p.segment == segment.base).count();
            prop_assert!(segment.len <= segment_size_bytes || records_in == 1);
        }
        let got: Vec<(Position, u8, Vec<u8>)> = Reader::open(tmp.path(), Position::ZERO, opts.max_record_bytes)
            .unwrap()
            .map(|r| r.map(|r| (r.position, r.kind, r.payload)))
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(got, written);
    }
}
