//! Feeds arbitrary bytes to the segment decoders. They must never panic,
//! every record they return must carry a valid checksum and lie inside the
//! input, and the valid prefix must re-decode to the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waymark_wal::segment::{
    decode_header, decode_records, frame_crc, FRAME_HEADER_BYTES, HEADER_BYTES,
};

fuzz_target!(|data: &[u8]| {
    // The first byte picks a small or large record limit so both the
    // max_record_bytes and the remaining-length checks get exercised.
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let max_record_bytes = if selector & 1 == 0 {
        1 << 10
    } else {
        u64::from(u32::MAX)
    };

    if let Some(header) = bytes.first_chunk::<{ HEADER_BYTES as usize }>() {
        let _ = decode_header(header);
    }

    let decoded = decode_records(bytes, max_record_bytes);
    assert!(decoded.valid_bytes <= bytes.len());
    assert_eq!(decoded.error.is_none(), decoded.valid_bytes == bytes.len());
    let mut expected_offset = 0;
    for record in &decoded.records {
        assert_eq!(record.offset, expected_offset);
        let len = record.payload.len() as u32;
        assert_eq!(record.crc, frame_crc(len, record.kind, record.payload));
        assert!(u64::from(len) <= max_record_bytes);
        expected_offset += FRAME_HEADER_BYTES + record.payload.len();
    }
    assert_eq!(expected_offset, decoded.valid_bytes);

    let again = decode_records(&bytes[..decoded.valid_bytes], max_record_bytes);
    assert_eq!(again.records, decoded.records);
    assert!(again.error.is_none());
});
