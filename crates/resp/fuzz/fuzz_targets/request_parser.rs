//! Coverage-guided fuzzing of the RESP request parser (nightly: `cargo +nightly fuzz run
//! request_parser corpus/request_parser`). The body is `waymark_resp::fuzzing::request_parser`,
//! which the stable `cargo test` campaign (`tests/fuzz.rs`) runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    waymark_resp::fuzzing::request_parser(data);
});
