//! The simulator's one hasher: 64-bit FNV-1a. Stable across platforms and Rust versions (unlike
//! `DefaultHasher`), so the trace hashes it gives can be pinned (`tests/determinism.rs`); seedless,
//! so the explorer's state hashes, and the iteration order of the maps keyed with it, are the same
//! in every run; and quick enough for the explorer's state graph and the serializability checker's
//! maps (their keys are mostly `u64`s).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// FNV-1a over every byte written; `finish` is the state itself (the trace hash).
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A `HashMap` keyed with `Fnv`.
pub type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// `t`'s hash.
pub fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
    let mut h = Fnv::default();
    t.hash(&mut h);
    h.finish()
}
