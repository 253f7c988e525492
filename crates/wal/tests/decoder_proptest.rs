//! Properties of the pure segment decoder (`segment::decode_records`, which
//! the tests and tools use; production reads the log through `Wal::open`,
//! `Reader` and `FrameScanner`, fuzzed by the server's `wal_segment` target):
//! the decoder never panics, returns only checksum-valid records, and a
//! damaged stream decodes to a prefix of the original.

use proptest::prelude::*;
use waymark_wal::segment::{decode_records, encode_frame, frame_crc, FRAME_HEADER_BYTES};

fn check_invariants(bytes: &[u8], max_record_bytes: u64) {
    let decoded = decode_records(bytes, max_record_bytes);
    assert!(decoded.valid_bytes <= bytes.len());
    assert_eq!(decoded.error.is_none(), decoded.valid_bytes == bytes.len());
    let mut offset = 0;
    for record in &decoded.records {
        assert_eq!(record.offset, offset);
        assert_eq!(record.crc, frame_crc(record.payload.len() as u32, record.kind, record.payload));
        offset += FRAME_HEADER_BYTES + record.payload.len();
    }
    assert_eq!(offset, decoded.valid_bytes);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), big in any::<bool>()) {
        check_invariants(&bytes, if big { u64::from(u32::MAX) } else { 64 });
    }

    #[test]
    fn damaged_stream_decodes_to_a_prefix(
        records in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..100)), 1..10),
        flip_at in any::<proptest::sample::Index>(),
        flip_bit in 0u8..8,
    ) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for (kind, payload) in &records {
            starts.push(bytes.len());
            encode_frame(*kind, payload, &mut bytes);
        }
        let at = flip_at.index(bytes.len());
        bytes[at] ^= 1 << flip_bit;
        check_invariants(&bytes, 1 << 10);
        let decoded = decode_records(&bytes, 1 << 10);
        let hit = starts.iter().rposition(|&s| s <= at).unwrap();
        prop_assert_eq!(decoded.records.len(), hit);
        for (got, (kind, payload)) in decoded.records.iter().zip(&records) {
            prop_assert_eq!((got.kind, got.payload), (*kind, &payload[..]));
        }
    }
}
