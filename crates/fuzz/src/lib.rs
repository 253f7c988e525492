//! The stable-toolchain fuzzer that `cargo test` runs over each of Waymark's decoders of untrusted
//! bytes.
//!
//! What kind of fuzzer this is: a **mutation-based random tester over a committed corpus**, not a
//! coverage-guided one. A campaign first replays every file of a target's corpus
//! (`crates/<crate>/fuzz/corpus/<target>/`: valid encodings the code produced, and edge cases),
//! then feeds the target a fixed number of mutants of those files (bit flips, interesting bytes,
//! truncations, insertions, deletions, repeated stretches, length fields rewritten, splices of two
//! files), drawn from a ChaCha8 generator with a fixed seed: the same cases every run, so a
//! failure reproduces. It is bounded in count and in time ([`Campaign::time_limit`]); each case
//! is bounded in time by a watchdog, and the test binaries bound allocations with
//! [`BoundedAlloc`].
//!
//! The coverage-guided version of the same targets runs on nightly with cargo-fuzz, from the
//! crate's `fuzz/` directory, e.g. `cd crates/server/fuzz && cargo +nightly fuzz run peer_frames
//! corpus/peer_frames`; its targets call the same bodies as the tests. `WAYMARK_FUZZ_CASES=N`
//! makes a `cargo test` campaign run N mutants instead of its default count (and lifts the time
//! limit); `WAYMARK_FUZZ_SEED=N` draws another series.

mod alloc;
mod campaign;
mod mutate;

pub use alloc::BoundedAlloc;
pub use campaign::{corpus_dir, Campaign, Summary};
pub use mutate::Mutator;
