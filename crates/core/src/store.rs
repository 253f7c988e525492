//! The committed data of one vnode's partition replicas, and the writes transactions make to it.

use crate::ids::{Key, Value, Version};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A write as the client asked for it; `IncrBy` and `Append` are evaluated at the primary under lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WriteOp {
    Set(#[serde(with = "crate::bytes::vec")] Value),
    Del,
    IncrBy(i64),
    Append(#[serde(with = "crate::bytes::vec")] Value),
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

/// A write evaluated by the primary: the value the key takes (`None` = deleted) and the version it
/// gets. Replicas apply it only if `version` is newer than theirs, so the order in which replicas
/// learn of commits does not matter.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedWrite {
    #[serde(with = "crate::bytes::vec")]
    pub key: Key,
    #[serde(with = "crate::bytes::option")]
    pub value: Option<Value>,
    pub version: Version,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Entry {
    #[serde(with = "crate::bytes::option")]
    pub value: Option<Value>,
    pub version: Version,
}

/// Why a write could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum EvalError {
    #[error("value is not an integer or out of range")]
    NotAnInteger,
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

    /// Evaluates `op` against the current committed value of `key`.
    pub fn resolve(&self, key: &Key, op: &WriteOp) -> Result<ResolvedWrite, EvalError> {
        let current = self.get(key);
        let value = match op {
            WriteOp::Set(v) => Some(v.clone()),
            WriteOp::Del => None,
            WriteOp::IncrBy(delta) => Some(incr(current.value.as_deref(), *delta)?),
            WriteOp::Append(v) => {
                let mut out = current.value.unwrap_or_default();
                out.extend_from_slice(v);
                Some(out)
            }
        };
        Ok(ResolvedWrite { key: key.clone(), value, version: current.version + 1 })
    }

    /// Applies a resolved write if it is newer than what is stored; returns whether it applied.
    pub fn apply(&mut self, w: &ResolvedWrite) -> bool {
        let e = self.entries.entry(w.key.clone()).or_default();
        if w.version <= e.version {
            return false;
        }
        e.value = w.value.clone();
        e.version = w.version;
        true
    }

    /// [`Store::apply`] of a write whose key and value are borrowed: they are copied only if the
    /// key is new or the write applies. Like `apply`, a new key gets an entry even if the write
    /// does not apply (a version-0 write), so that both give the same store.
    pub fn apply_ref(&mut self, key: &[u8], value: Option<&[u8]>, version: Version) -> bool {
        if let Some(e) = self.entries.get_mut(key) {
            return update(e, value, version);
        }
        update(self.entries.entry(key.to_vec()).or_default(), value, version)
    }

    /// [`Store::apply`] that moves the key and value in instead of copying them.
    pub fn apply_owned(&mut self, w: ResolvedWrite) -> bool {
        let ResolvedWrite { key, value, version } = w;
        let e = self.entries.entry(key).or_default();
        if version <= e.version {
            return false;
        }
        e.value = value;
        e.version = version;
        true
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
        let digest =
            |e: &Entry| Entry { value: e.value.as_deref().map(|v| value_digest(v).to_vec()), version: e.version };
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

/// Sets `e` to `value` at `version` if that is newer; whether it was.
fn update(e: &mut Entry, value: Option<&[u8]>, version: Version) -> bool {
    if version <= e.version {
        return false;
    }
    e.value = value.map(<[u8]>::to_vec);
    e.version = version;
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
        let w = s.resolve(&b"a".to_vec(), &WriteOp::IncrBy(5)).unwrap();
        assert_eq!(w, ResolvedWrite { key: b"a".to_vec(), value: Some(b"5".to_vec()), version: 1 });
        assert!(s.apply(&w));
        s.apply(&ResolvedWrite { key: b"b".to_vec(), value: Some(b"x".to_vec()), version: 1 });
        assert_eq!(s.resolve(&b"b".to_vec(), &WriteOp::IncrBy(1)), Err(EvalError::NotAnInteger));
    }

    #[test]
    fn older_versions_do_not_overwrite_newer_ones() {
        let mut s = Store::default();
        let k = b"k".to_vec();
        assert!(s.apply(&ResolvedWrite { key: k.clone(), value: Some(b"2".to_vec()), version: 2 }));
        assert!(!s.apply(&ResolvedWrite { key: k.clone(), value: Some(b"1".to_vec()), version: 1 }));
        assert_eq!(s.get(&k).value, Some(b"2".to_vec()));
    }
}
