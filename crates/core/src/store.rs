//! The committed data of one vnode's partition replicas, and the writes transactions make to it.

use crate::ids::{Key, Value, Version};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A write as the client asked for it; `IncrBy` and `Append` are evaluated at the primary under lock.
/// `Set` takes the key out of expiry (Redis's `SET`); `IncrBy` and `Append` keep its deadline.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WriteOp {
    Set(#[serde(with = "crate::bytes::vec")] Value),
    Del,
    IncrBy(i64),
    Append(#[serde(with = "crate::bytes::vec")] Value),
    /// The value, expiring at the deadline `Expiry` gives by the primary's clock (`SET … EX`,
    /// `SETEX`, `EXPIRE` of a key read first). A deadline already passed deletes the key.
    SetExpiring(#[serde(with = "crate::bytes::vec")] Value, Expiry),
    /// The primary's expiry of the key (`expiry.rs`): resolves to a delete only if the key's
    /// deadline has passed by the primary's clock; the tombstone keeps the time it expired at.
    Expire,
}

/// When a value expires: `In` milliseconds from the primary's clock when it evaluates the write,
/// or `At` a Unix time in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Expiry {
    In(u64),
    At(u64),
}

impl Expiry {
    /// The deadline, in Unix milliseconds, for a primary whose clock reads `now_ms`.
    pub fn deadline_ms(self, now_ms: u64) -> u64 {
        match self {
            Expiry::In(ms) => now_ms.saturating_add(ms),
            Expiry::At(ms) => ms,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Write {
    #[serde(with = "crate::bytes::vec")]
    pub key: Key,
    pub op: WriteOp,
}

/// A read the client made before its transaction: the transaction commits only if the key is
/// still at `version` (Redis `WATCH`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReadCheck {
    #[serde(with = "crate::bytes::vec")]
    pub key: Key,
    pub version: Version,
}

/// A write evaluated by the primary: the value the key takes (`None` = deleted), the version it
/// gets, and its deadline. Replicas apply it only if `version` is newer than theirs, so the order
/// in which replicas learn of commits does not matter.
///
/// `deadline_ms`: with a value, the Unix time in milliseconds it expires at (`None`: never);
/// without one (a tombstone), the time the primary expired the key at (`WriteOp::Expire`), which
/// raises the expiry clock of every vnode that applies it (`expiry`). Encoded with the value
/// (`crate::bytes::cell`): a write without a deadline has the bytes it had before deadlines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedWrite {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
    pub deadline_ms: Option<u64>,
}

/// A key's committed state; `deadline_ms` as in [`ResolvedWrite`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Entry {
    pub value: Option<Value>,
    pub version: Version,
    pub deadline_ms: Option<u64>,
}

impl Entry {
    /// Whether the entry holds a value that has not expired by `now_ms`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.value.is_some() && self.deadline_ms.is_none_or(|d| d > now_ms)
    }

    /// Whether the entry holds a value whose deadline has passed by `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.value.is_some() && self.deadline_ms.is_some_and(|d| d <= now_ms)
    }
}

/// Hashed as before deadlines when there is none, so that the simulator's trace hashes of runs
/// without expiry are those pinned before it (`tests/determinism.rs`).
impl std::hash::Hash for ResolvedWrite {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&self.key, &self.value, self.version).hash(h);
        if let Some(d) = self.deadline_ms {
            d.hash(h);
        }
    }
}

impl std::hash::Hash for Entry {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&self.value, self.version).hash(h);
        if let Some(d) = self.deadline_ms {
            d.hash(h);
        }
    }
}

/// `ResolvedWrite` and `Entry` on the wire: their fields in order, the value and the deadline as
/// one cell (`crate::bytes::cell`), so that bytes written before deadlines read unchanged.
mod wire {
    use super::{Entry, ResolvedWrite};
    use crate::bytes::cell::{Cell, Owned};
    use serde::ser::SerializeStruct;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    impl Serialize for ResolvedWrite {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut st = s.serialize_struct("ResolvedWrite", 3)?;
            st.serialize_field("key", &crate::bytes::AsBytes(&self.key))?;
            st.serialize_field("value", &Cell(self.value.as_deref(), self.deadline_ms))?;
            st.serialize_field("version", &self.version)?;
            st.end()
        }
    }

    impl Serialize for Entry {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut st = s.serialize_struct("Entry", 2)?;
            st.serialize_field("value", &Cell(self.value.as_deref(), self.deadline_ms))?;
            st.serialize_field("version", &self.version)?;
            st.end()
        }
    }

    #[derive(Deserialize)]
    struct WriteWire {
        #[serde(with = "crate::bytes::vec")]
        key: Vec<u8>,
        value: Owned,
        version: u64,
    }

    #[derive(Deserialize)]
    struct EntryWire {
        value: Owned,
        version: u64,
    }

    impl<'de> Deserialize<'de> for ResolvedWrite {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let WriteWire { key, value: Owned(value, deadline_ms), version } = WriteWire::deserialize(d)?;
            Ok(ResolvedWrite { key, value, version, deadline_ms })
        }
    }

    impl<'de> Deserialize<'de> for Entry {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let EntryWire { value: Owned(value, deadline_ms), version } = EntryWire::deserialize(d)?;
            Ok(Entry { value, version, deadline_ms })
        }
    }
}

/// Why a write could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum EvalError {
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    /// `WriteOp::Expire` of a key whose deadline has not passed (or that has none): a write since
    /// gave it a new one, or this primary's clock is behind the one that asked.
    #[error("the key has not expired")]
    NotExpired,
    /// `IncrBy` or `Append` of a collection's head (`collection`).
    #[error("the key holds a collection")]
    WrongType,
}

/// Committed key/value state. A `BTreeMap` keeps iteration deterministic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Store {
    entries: BTreeMap<Key, Entry>,
}

impl Store {
    pub fn get(&self, key: &[u8]) -> Entry {
        self.entries.get(key).cloned().unwrap_or_default()
    }

    /// `key`'s entry, if it has one (a deleted key keeps its entry and version).
    pub fn entry(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    pub fn version(&self, key: &[u8]) -> Version {
        self.entries.get(key).map_or(0, |e| e.version)
    }

    /// Evaluates `op` against the current committed value of `key`, by a primary whose expiry
    /// clock reads `now_ms`: a value whose deadline has passed counts as absent (`INCR` of an
    /// expired key counts from 0, without the old deadline). `Set` clears the deadline, `IncrBy`
    /// and `Append` keep a live one, `SetExpiring` sets one — or deletes the key if it has passed.
    pub fn resolve(&self, key: &Key, op: &WriteOp, now_ms: u64) -> Result<ResolvedWrite, EvalError> {
        let current = self.get(key);
        let live = current.is_live(now_ms);
        let (live_value, live_deadline) = match live {
            true => (current.value.clone(), current.deadline_ms),
            false => (None, None),
        };
        let on_collection = matches!(op, WriteOp::IncrBy(_) | WriteOp::Append(_));
        if on_collection && live_value.as_deref().is_some_and(crate::collection::is_head) {
            return Err(EvalError::WrongType);
        }
        let (value, deadline_ms) = match op {
            WriteOp::Set(v) => (Some(v.clone()), None),
            WriteOp::Del => (None, None),
            WriteOp::IncrBy(delta) => (Some(incr(live_value.as_deref(), *delta)?), live_deadline),
            WriteOp::Append(v) => {
                let mut out = live_value.unwrap_or_default();
                out.extend_from_slice(v);
                if crate::collection::is_head(&out) {
                    return Err(EvalError::WrongType); // the client's own evaluation says why
                }
                (Some(out), live_deadline)
            }
            WriteOp::SetExpiring(v, expiry) => match expiry.deadline_ms(now_ms) {
                at if at <= now_ms => (None, None),
                at => (Some(v.clone()), Some(at)),
            },
            WriteOp::Expire if current.is_expired(now_ms) => (None, Some(now_ms)),
            WriteOp::Expire => return Err(EvalError::NotExpired),
        };
        Ok(ResolvedWrite { key: key.clone(), value, version: current.version + 1, deadline_ms })
    }

    /// Applies a resolved write if it is newer than what is stored; returns whether it applied.
    pub fn apply(&mut self, w: &ResolvedWrite) -> bool {
        let e = self.entries.entry(w.key.clone()).or_default();
        if w.version <= e.version {
            return false;
        }
        e.value = w.value.clone();
        e.version = w.version;
        e.deadline_ms = w.deadline_ms;
        true
    }

    /// [`Store::apply`] of a write whose key and value are borrowed: they are copied only if the
    /// key is new or the write applies. Like `apply`, a new key gets an entry even if the write
    /// does not apply (a version-0 write), so that both give the same store.
    pub fn apply_ref(&mut self, key: &[u8], value: Option<&[u8]>, version: Version, deadline_ms: Option<u64>) -> bool {
        if let Some(e) = self.entries.get_mut(key) {
            return update(e, value, version, deadline_ms);
        }
        update(self.entries.entry(key.to_vec()).or_default(), value, version, deadline_ms)
    }

    /// [`Store::apply`] that moves the key and value in instead of copying them.
    pub fn apply_owned(&mut self, w: ResolvedWrite) -> bool {
        let ResolvedWrite { key, value, version, deadline_ms } = w;
        let e = self.entries.entry(key).or_default();
        if version <= e.version {
            return false;
        }
        e.value = value;
        e.version = version;
        e.deadline_ms = deadline_ms;
        true
    }

    /// The deletes of every live element of collection `key` that `written` does not name, each
    /// at its next version: what a primary adds to a transaction that drops the collection
    /// (`collection::drops`), and what a replay of it must add too.
    pub fn drop_elements(&self, key: &[u8], written: &std::collections::BTreeSet<&Key>) -> Vec<ResolvedWrite> {
        let prefix = crate::collection::owner_prefix(key);
        self.entries
            .range::<[u8], _>((std::ops::Bound::Included(&prefix[..]), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, e)| e.value.is_some() && !written.contains(k))
            .map(|(k, e)| ResolvedWrite { key: k.clone(), value: None, version: e.version + 1, deadline_ms: None })
            .collect()
    }

    /// Splits the store by `partition_of` its keys, moving every entry (nothing is copied).
    pub fn into_partitions(self, mut partition_of: impl FnMut(&Key) -> u32) -> BTreeMap<u32, Store> {
        let mut parts: BTreeMap<u32, Vec<(Key, Entry)>> = BTreeMap::new();
        for (key, entry) in self.entries {
            parts.entry(partition_of(&key)).or_default().push((key, entry));
        }
        // Each part is in key order: collecting it builds the map without searching it.
        parts.into_iter().map(|(p, entries)| (p, Store { entries: entries.into_iter().collect() })).collect()
    }

    pub fn apply_all(&mut self, writes: &[ResolvedWrite]) {
        for w in writes {
            self.apply(w);
        }
    }

    /// A store holding only the current entries of `keys` (a scratch copy for evaluation).
    pub fn subset<'a>(&self, keys: impl IntoIterator<Item = &'a Key>) -> Store {
        let entries = keys.into_iter().filter_map(|k| self.entries.get(k).map(|e| (k.clone(), e.clone()))).collect();
        Store { entries }
    }

    /// The entries from `from` on, in key order.
    /// Forgets `key` and its version (a learner dropping a stale copy, `catch_up`).
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.entries.remove(key)
    }

    /// Forgets every entry of `partition`, one of `partitions` (a learner's `PartitionReset`:
    /// what it held of the partition before joining it anew counts for nothing).
    pub fn drop_partition(&mut self, partition: crate::ids::PartitionId, partitions: u32) {
        if partitions == 0 {
            return;
        }
        self.entries.retain(|k, _| crate::placement::partition_of(k, partitions) != partition);
    }

    pub fn range(&self, from: std::ops::Bound<&[u8]>) -> impl Iterator<Item = (&Key, &Entry)> {
        self.entries.range::<[u8], _>((from, std::ops::Bound::Unbounded))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entry)> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Splits the store into the entries whose key `first` accepts and the others (nothing is copied).
    pub fn split_by(self, mut first: impl FnMut(&Key) -> bool) -> (Store, Store) {
        type Entries = Vec<(Key, Entry)>;
        let (a, b): (Entries, Entries) = self.entries.into_iter().partition(|(k, _)| first(k));
        // Each side is in key order: collecting it builds the map without searching it.
        (Store { entries: a.into_iter().collect() }, Store { entries: b.into_iter().collect() })
    }

    /// The same keys and versions with each value replaced by its [`value_digest`].
    pub fn digested(&self) -> Store {
        let digest = |e: &Entry| Entry {
            value: e.value.as_deref().map(|v| value_digest(v).to_vec()),
            version: e.version,
            deadline_ms: e.deadline_ms,
        };
        Store { entries: self.entries.iter().map(|(k, e)| (k.clone(), digest(e))).collect() }
    }

    /// Moves every entry of `other`, whose keys this store does not hold, into it.
    pub fn absorb_disjoint(&mut self, other: Store) {
        for (key, entry) in other.entries {
            let clash = self.entries.insert(key, entry);
            assert!(clash.is_none(), "absorb_disjoint: the stores share a key");
        }
    }

    /// Keeps only the keys for which `keep` holds (used to compare one partition's replicas).
    pub fn filtered(&self, mut keep: impl FnMut(&Key) -> bool) -> Store {
        let entries = self.entries.iter().filter(|(k, _)| keep(k)).map(|(k, e)| (k.clone(), e.clone())).collect();
        Store { entries }
    }
}

/// What stands for a value where only its identity matters (comparing replicas): its length and
/// CRC-32C, 8 bytes. Two values with the same digest are equal but for a 2^-32 chance.
pub fn value_digest(value: &[u8]) -> [u8; 8] {
    let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
    let mut d = [0; 8];
    d[..4].copy_from_slice(&len.to_le_bytes());
    d[4..].copy_from_slice(&crc32c::crc32c(value).to_le_bytes());
    d
}

/// Sets `e` to `value` at `version` (with its deadline) if that is newer; whether it was.
fn update(e: &mut Entry, value: Option<&[u8]>, version: Version, deadline_ms: Option<u64>) -> bool {
    if version <= e.version {
        return false;
    }
    e.value = value.map(<[u8]>::to_vec);
    e.version = version;
    e.deadline_ms = deadline_ms;
    true
}

fn incr(current: Option<&[u8]>, delta: i64) -> Result<Value, EvalError> {
    let n: i64 = match current {
        None => 0,
        Some(bytes) => std::str::from_utf8(bytes).ok().and_then(|s| s.parse().ok()).ok_or(EvalError::NotAnInteger)?,
    };
    let sum = n.checked_add(delta).ok_or(EvalError::NotAnInteger)?;
    Ok(sum.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incrby_counts_from_zero_and_rejects_text() {
        let mut s = Store::default();
        let w = s.resolve(&b"a".to_vec(), &WriteOp::IncrBy(5), 0).unwrap();
        assert_eq!(w, ResolvedWrite { key: b"a".to_vec(), value: Some(b"5".to_vec()), version: 1, deadline_ms: None });
        assert!(s.apply(&w));
        s.apply(&ResolvedWrite { key: b"b".to_vec(), value: Some(b"x".to_vec()), version: 1, deadline_ms: None });
        assert_eq!(s.resolve(&b"b".to_vec(), &WriteOp::IncrBy(1), 0), Err(EvalError::NotAnInteger));
    }

    #[test]
    fn older_versions_do_not_overwrite_newer_ones() {
        let mut s = Store::default();
        let k = b"k".to_vec();
        assert!(s.apply(&ResolvedWrite { key: k.clone(), value: Some(b"2".to_vec()), version: 2, deadline_ms: None }));
        assert!(!s.apply(&ResolvedWrite { key: k.clone(), value: Some(b"1".to_vec()), version: 1, deadline_ms: None }));
        assert_eq!(s.get(&k).value, Some(b"2".to_vec()));
    }

    /// The primary's expiry clock decides: an expired value counts as absent, `Expire` deletes
    /// only a key past its deadline and keeps the time it expired at, `SetExpiring` sets one.
    #[test]
    fn values_past_their_deadline_count_as_absent_and_only_they_expire() {
        let mut s = Store::default();
        let k = b"k".to_vec();
        let w = s.resolve(&k, &WriteOp::SetExpiring(b"5".to_vec(), Expiry::In(100)), 1_000).unwrap();
        assert_eq!((w.value.as_deref(), w.deadline_ms), (Some(&b"5"[..]), Some(1_100)));
        s.apply(&w);
        assert_eq!(s.resolve(&k, &WriteOp::Expire, 1_099), Err(EvalError::NotExpired));
        let kept = s.resolve(&k, &WriteOp::IncrBy(1), 1_099).unwrap();
        assert_eq!((kept.value.as_deref(), kept.deadline_ms), (Some(&b"6"[..]), Some(1_100)), "INCR keeps it");
        let fresh = s.resolve(&k, &WriteOp::IncrBy(1), 1_100).unwrap();
        assert_eq!((fresh.value.as_deref(), fresh.deadline_ms), (Some(&b"1"[..]), None), "from 0 once expired");
        let expired = s.resolve(&k, &WriteOp::Expire, 1_250).unwrap();
        assert_eq!((expired.value, expired.deadline_ms, expired.version), (None, Some(1_250), 2));
        let past = s.resolve(&k, &WriteOp::SetExpiring(b"x".to_vec(), Expiry::At(900)), 1_000).unwrap();
        assert_eq!((past.value, past.deadline_ms), (None, None), "a deadline already past deletes");
        assert_eq!(s.resolve(&k, &WriteOp::Set(b"y".to_vec()), 1_000).unwrap().deadline_ms, None);
    }
}
