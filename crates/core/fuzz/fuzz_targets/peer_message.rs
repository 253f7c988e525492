//! Coverage-guided fuzzing of `waymark_core::fuzzing::peer_message` (nightly: `cargo +nightly fuzz run peer_message
//! corpus/peer_message`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_core::fuzzing::peer_message(data);
});
