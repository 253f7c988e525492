//! Counts and digests of a vnode's data, kept up to date as writes apply, so that what a status
//! page, `DBSIZE`, `INFO` or the memory limit asks costs one step per partition instead of a pass
//! over every key on the vnode's own thread (which stalls its transactions).
//!
//! Invariant: a vnode's [`Tallies`] equal [`Tallies::of`] its store (checked by the simulator's
//! `tallies` checker and by `Vnode::tallies_agree`).

use crate::database::DATABASES;
use crate::ids::Key;
use crate::placement::Placement;
use crate::store::{value_digest, Entry, Store};
use md5::{Digest as _, Md5};

/// What one entry of the store costs in memory beyond its key and value bytes: the map's node
/// share and the two heap allocations' headers. An estimate (the allocator is not asked), used
/// for `maxmemory`: it errs high for small entries, as Redis's `used_memory` does.
pub const ENTRY_OVERHEAD_BYTES: u64 = 96;

/// One partition replica's tally.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tally {
    /// Keys with an entry, deleted ones (whose version is kept) included.
    pub entries: u64,
    /// Keys that hold a value.
    pub live: u64,
    /// Of `live`, those of each database (`crate::database`: `DBSIZE` answers one).
    pub live_by_db: [u64; DATABASES as usize],
    /// Of `live_by_db`, the keys with a deadline, and the sum of their deadlines (Unix ms):
    /// `INFO keyspace`'s `expires` and `avg_ttl`.
    pub expiring_by_db: [u64; DATABASES as usize],
    pub deadlines_ms_by_db: [u128; DATABASES as usize],
    /// Key and value bytes, plus [`ENTRY_OVERHEAD_BYTES`] per entry.
    pub bytes: u64,
    /// The wrapping sum of every entry's [`entry_hash`]: replicas holding the same entries have
    /// the same digest, in whatever order the entries came; different entries differ but for a
    /// chance of about 2^-32 per differing value (values are digested by length and CRC-32C).
    pub digest: u128,
}

impl Tally {
    fn add(&mut self, c: Counted) {
        self.entries += 1;
        self.live += u64::from(c.live);
        self.live_by_db[c.db as usize] += u64::from(c.live);
        if let Some(at) = c.deadline_ms {
            self.expiring_by_db[c.db as usize] += 1;
            self.deadlines_ms_by_db[c.db as usize] += u128::from(at);
        }
        self.bytes += c.bytes;
        self.digest = self.digest.wrapping_add(c.hash);
    }

    fn remove(&mut self, c: Counted) {
        let in_db = &mut self.live_by_db[c.db as usize];
        assert!(self.entries >= 1 && *in_db >= u64::from(c.live) && self.bytes >= c.bytes, "tally underflow");
        *in_db -= u64::from(c.live);
        if let Some(at) = c.deadline_ms {
            self.expiring_by_db[c.db as usize] -= 1;
            self.deadlines_ms_by_db[c.db as usize] -= u128::from(at);
        }
        self.entries -= 1;
        self.live -= u64::from(c.live);
        self.bytes -= c.bytes;
        self.digest = self.digest.wrapping_sub(c.hash);
    }

    /// `digest` (hex, 16 digits) and the entry count, as the status page shows a replica.
    pub fn digest_text(&self) -> String {
        format!("{:016x}/{}", (self.digest >> 64) as u64, self.entries)
    }
}

/// What one entry adds to its partition's tally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    live: bool,
    db: u8,
    /// The deadline of a live key that has one.
    deadline_ms: Option<u64>,
    bytes: u64,
    hash: u128,
}

impl Counted {
    pub fn of(key: &[u8], entry: &Entry) -> Counted {
        let value_bytes = entry.value.as_ref().map_or(0, |v| v.len() as u64);
        Counted {
            // A collection's element is not a key: the collection counts once, by its head.
            live: entry.value.is_some() && !crate::collection::is_element(key),
            db: crate::database::db_of(key).index(),
            deadline_ms: entry.deadline_ms.filter(|_| entry.value.is_some()),
            bytes: key.len() as u64 + value_bytes + ENTRY_OVERHEAD_BYTES,
            hash: entry_hash(key, entry),
        }
    }
}

/// MD5 over the key (length-prefixed), the version, and the value's digest or a deletion marker.
fn entry_hash(key: &[u8], entry: &Entry) -> u128 {
    let mut h = Md5::new();
    h.update((key.len() as u64).to_le_bytes());
    h.update(key);
    h.update(entry.version.to_le_bytes());
    match &entry.value {
        Some(v) => {
            h.update([1]);
            h.update(value_digest(v));
        }
        None => h.update([0]),
    }
    u128::from_le_bytes(h.finalize().into())
}

/// The tallies of a vnode's store, one per partition of the placement (the partition count never
/// changes while a cluster runs: failover changes chains, not how keys map to partitions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tallies {
    partitions: Vec<Tally>,
}

impl Tallies {
    /// Counted from scratch: one pass over the store (at recovery, and by the checkers).
    pub fn of(store: &Store, placement: &Placement) -> Tallies {
        let mut t = Tallies { partitions: vec![Tally::default(); placement.partitions() as usize] };
        for (key, entry) in store.iter() {
            t.partitions[placement.partition_of(key).0 as usize].add(Counted::of(key, entry));
        }
        t
    }

    /// `key`'s entry in partition `p` went from `before` to `after` (`None`: no entry).
    pub fn replace(&mut self, p: u32, before: Option<Counted>, after: Option<Counted>) {
        let t = &mut self.partitions[p as usize];
        if let Some(c) = before {
            t.remove(c);
        }
        if let Some(c) = after {
            t.add(c);
        }
    }

    pub fn partition(&self, p: u32) -> Tally {
        self.partitions.get(p as usize).copied().unwrap_or_default()
    }

    /// The sum over every partition (the digest summed too).
    pub fn total(&self) -> Tally {
        let mut sum = Tally::default();
        for t in &self.partitions {
            sum.entries += t.entries;
            sum.live += t.live;
            for db in 0..DATABASES as usize {
                sum.live_by_db[db] += t.live_by_db[db];
                sum.expiring_by_db[db] += t.expiring_by_db[db];
                sum.deadlines_ms_by_db[db] += t.deadlines_ms_by_db[db];
            }
            sum.bytes += t.bytes;
            sum.digest = sum.digest.wrapping_add(t.digest);
        }
        sum
    }
}

/// What a write to `key` changes in its tally: the entry before and after.
pub(crate) fn counted(store: &Store, key: &Key) -> Option<Counted> {
    store.entry(key).map(|e| Counted::of(key, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ResolvedWrite;

    fn write(key: &str, value: Option<&str>, version: u64) -> ResolvedWrite {
        ResolvedWrite { key: key.into(), value: value.map(|v| v.into()), version, deadline_ms: None }
    }

    #[test]
    fn a_digest_does_not_depend_on_the_order_entries_came_in() {
        let mut a = Store::default();
        let mut b = Store::default();
        let writes = [write("x", Some("1"), 1), write("y", Some("2"), 1), write("x", None, 2)];
        a.apply_all(&writes);
        b.apply_all(&[writes[2].clone(), writes[1].clone(), writes[0].clone()]);
        assert_eq!(a, b);
        let one = Placement::round_robin(&[crate::ids::VnodeId::new("store0", "h")], 1, 1);
        assert_eq!(Tallies::of(&a, &one), Tallies::of(&b, &one));
        let t = Tallies::of(&a, &one).total();
        assert_eq!((t.entries, t.live), (2, 1));
    }

    #[test]
    fn replacing_an_entry_tallies_as_counting_anew() {
        let one = Placement::round_robin(&[crate::ids::VnodeId::new("store0", "h")], 1, 1);
        let mut store = Store::default();
        let mut tallies = Tallies::of(&store, &one);
        for w in
            [write("k", Some("v"), 1), write("k", Some("longer"), 2), write("k", None, 3), write("j", Some("w"), 1)]
        {
            let before = counted(&store, &w.key);
            store.apply(&w);
            tallies.replace(0, before, counted(&store, &w.key));
            assert_eq!(tallies, Tallies::of(&store, &one), "after {w:?}");
        }
        assert_eq!(tallies.total().bytes, 2 + 1 + 2 * ENTRY_OVERHEAD_BYTES);
    }

    #[test]
    fn live_keys_are_counted_per_database() {
        let one = Placement::round_robin(&[crate::ids::VnodeId::new("store0", "h")], 1, 1);
        let db3 = crate::database::Db::new(3).expect("a database");
        let mut store = Store::default();
        let in3 = |k: &str| db3.stored(k.into()).expect("a key");
        store.apply_all(&[write("a", Some("1"), 1), write("b", None, 1)]);
        store.apply(&ResolvedWrite { key: in3("a"), value: Some(b"1".to_vec()), version: 1, deadline_ms: Some(5_000) });
        let t = Tallies::of(&store, &one).total();
        assert_eq!((t.live, t.live_by_db[0], t.live_by_db[3]), (2, 1, 1));
        assert_eq!((t.expiring_by_db[0], t.expiring_by_db[3], t.deadlines_ms_by_db[3]), (0, 1, 5_000));
    }
}
