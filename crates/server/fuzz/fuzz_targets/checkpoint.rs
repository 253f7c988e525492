//! Coverage-guided fuzzing of `waymark_server::fuzzing::checkpoint` (nightly: `cargo +nightly fuzz run checkpoint
//! corpus/checkpoint`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_server::fuzzing::checkpoint(data);
});
