//! Coverage-guided fuzzing of `waymark_server::fuzzing::manifest` (nightly: `cargo +nightly fuzz run manifest
//! corpus/manifest`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_server::fuzzing::manifest(data);
});
