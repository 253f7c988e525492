//! Cluster metadata as the alteration module sees it: a sequence number and a map of records,
//! with one md5 over the whole (seed 004 point 5: a returning vnode compares it with its parent's
//! and clones what differs).

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One alteration: set `key` to `value` (an empty value removes it). Keys name what they hold:
/// `config/…`, `host/…`, `vnode/…`, `placement/…`, `catalog/cut/…`, `cut/…/phase`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AlterRecord {
    pub key: String,
    pub value: Vec<u8>,
}

impl AlterRecord {
    pub fn set(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        AlterRecord { key: key.into(), value: value.into() }
    }

    /// The bytes written to the log and read back, and what the md5 is taken of: the record with
    /// its place in the order, `(term, seq)`.
    pub fn encode(&self, term: u64, seq: u64) -> Vec<u8> {
        postcard::to_stdvec(&(term, seq, self)).expect("records always serialize")
    }

    /// What was read back: `None` if the bytes are not a record at all.
    pub fn decode(bytes: &[u8]) -> Option<(u64, u64, AlterRecord)> {
        postcard::from_bytes(bytes).ok()
    }
}

pub type Md5Sum = [u8; 16];

pub fn md5_of(bytes: &[u8]) -> Md5Sum {
    Md5::digest(bytes).into()
}

/// Where metadata stands in the order of alterations: the term of the root that ordered the last
/// one applied, then its sequence number. Compared as a pair, like Raft's (last term, last index):
/// two copies with equal versions are equal (one root orders a term, and every vnode applies an
/// alteration only on top of the version it was ordered after).
pub type Version = (u64, u64);

/// What a vnode keeps of the metadata: manager vnodes a whole replica, store vnodes only what they
/// need (settings, placement, cut processes, the root's name) — at 10,000 vnodes the vnode list
/// alone is tens of thousands of records, and a host runs many store vnodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum View {
    #[default]
    Full,
    Leaf,
}

impl View {
    pub fn keeps(self, key: &str) -> bool {
        match self {
            View::Full => true,
            View::Leaf => key == "root" || ["config/", "placement/", "cut/"].iter().any(|p| key.starts_with(p)),
        }
    }
}

/// Invariant: `seq` is the number of alterations applied; records only change through `apply`.
/// Invariant: `term` never decreases along `apply`.
/// Invariant: every key held is one `view` keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Metadata {
    view: View,
    term: u64,
    seq: u64,
    /// Shared between copies until one of them applies an alteration (copy on write): a process
    /// that holds many copies — a host's vnodes and their logs, the simulator — holds one map.
    records: Arc<BTreeMap<String, Vec<u8>>>,
}

impl Metadata {
    /// The metadata a cluster is created with (sequence 0): e.g. its vnode list, `vnode/<id>` →
    /// the id of the vnode's parent, which boot loading reads.
    pub fn genesis(records: impl IntoIterator<Item = (String, Vec<u8>)>) -> Self {
        Metadata { view: View::Full, term: 0, seq: 0, records: Arc::new(records.into_iter().collect()) }
    }

    pub fn view(&self) -> View {
        self.view
    }

    /// The same metadata as a vnode keeping `view` holds it (a leaf view cannot be widened).
    pub fn project(&self, view: View) -> Metadata {
        debug_assert!(view == View::Leaf || self.view == View::Full, "a leaf view cannot be widened");
        let records = self.records.iter().filter(|(k, _)| view.keeps(k)).map(|(k, v)| (k.clone(), v.clone()));
        Metadata { view, term: self.term, seq: self.seq, records: Arc::new(records.collect()) }
    }

    /// The vnodes to start on `host` whose primary parent (first in the queue recorded under
    /// `vnode/<id>`) is `parent` (seed 004: boot loading by parent).
    pub fn vnodes_on(&self, host: &str, parent: &str) -> Vec<String> {
        let suffix = format!("@{host}");
        let primary = |v: &[u8]| v.split(|b| *b == b',').next() == Some(parent.as_bytes());
        self.records
            .iter()
            .filter(|(k, v)| k.starts_with("vnode/") && k.ends_with(&suffix) && primary(v))
            .map(|(k, _)| k["vnode/".len()..].to_string())
            .collect()
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The term of the root that ordered the last alteration applied (0: none since genesis).
    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn version(&self) -> Version {
        (self.term, self.seq)
    }

    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.records.get(key).map(|v| v.as_slice())
    }

    pub fn records(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.records.iter()
    }

    /// Applies alteration `seq`, ordered in `term`, which must be the next one.
    pub fn apply(&mut self, term: u64, seq: u64, record: &AlterRecord) {
        debug_assert_eq!(seq, self.seq + 1, "alterations apply in order");
        debug_assert!(term >= self.term, "terms never go back");
        self.term = term;
        self.seq = seq;
        if record.value.is_empty() || !self.view.keeps(&record.key) {
            Arc::make_mut(&mut self.records).remove(&record.key);
        } else if moves_a_cut_back(self.records.get(&record.key), record) {
            // A cut's phase only moves forward. The root orders a retried or duplicated proposal
            // again (it dedupes against its queue only), so an earlier phase can be ordered after
            // a later one; applied, it would erase an `END:ok` from the catalog (seed 2495).
        } else {
            Arc::make_mut(&mut self.records).insert(record.key.clone(), record.value.clone());
        }
    }

    /// md5 of the whole metadata: equal sums, equal metadata.
    pub fn md5(&self) -> Md5Sum {
        md5_of(&postcard::to_stdvec(self).expect("metadata always serializes"))
    }
}

/// Whether `record` would set a cut's phase back: to an earlier phase, or away from its END.
/// Every copy applies the same sequence, so every copy skips the same records.
fn moves_a_cut_back(old: Option<&Vec<u8>>, record: &AlterRecord) -> bool {
    use crate::cut::operator::Phase;
    let rank = |p: Phase| match p {
        Phase::Start => 0,
        Phase::Started => 1,
        Phase::Finish => 2,
        Phase::End { .. } => 3,
    };
    if !record.key.starts_with("cut/") {
        return false;
    }
    let (Some(old), Some(new)) = (old.and_then(|v| Phase::parse(v)), Phase::parse(&record.value)) else {
        return false;
    };
    rank(new) < rank(old) || (rank(old) == 3 && new != old)
}
