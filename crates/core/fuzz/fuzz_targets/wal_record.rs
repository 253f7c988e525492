//! Coverage-guided fuzzing of `waymark_core::fuzzing::wal_record` (nightly: `cargo +nightly fuzz run wal_record
//! corpus/wal_record`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_core::fuzzing::wal_record(data);
});
