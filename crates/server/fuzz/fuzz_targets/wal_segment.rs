//! Coverage-guided fuzzing of `waymark_server::fuzzing::wal_segment` (nightly: `cargo +nightly fuzz run wal_segment
//! corpus/wal_segment`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_server::fuzzing::wal_segment(data);
});
