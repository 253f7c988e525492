//! Coverage-guided fuzzing of `waymark_server::fuzzing::peer_frames` (nightly: `cargo +nightly fuzz run peer_frames
//! corpus/peer_frames`). The stable `cargo test` campaign (`tests/fuzz.rs`) runs the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_server::fuzzing::peer_frames(data);
});
