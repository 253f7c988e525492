//! The bodies of the server's fuzz targets, defined once: the cargo-fuzz targets (`fuzz/`,
//! nightly, coverage-guided) and the stable tests (`tests/fuzz.rs`, a seeded mutation run over
//! `fuzz/corpus/<target>/`) both call them. Each feeds untrusted bytes to a decoder the way
//! production does and asserts its contract; each answers whether the input decoded to a value.
//! Not an API: hidden from the docs, and they panic on purpose when a decoder breaks its contract.

mod checkpoint;
mod manifest;
mod peer_frames;
mod scratch;
mod wal_segment;

pub use checkpoint::checkpoint;
pub use manifest::manifest;
pub use peer_frames::peer_frames;
pub use wal_segment::wal_segment;
