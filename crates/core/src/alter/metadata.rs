//! Cluster metadata as the alteration module sees it: a sequence number and a map of records,
//! with one md5 over the whole (seed 004 point 5: a returning vnode compares it with its parent's
//! and clones what differs).

use super::order::{AlterSeq, MetaVersion, Term};
use crate::ids::VnodeId;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// An alteration as its initiator proposed it: unique per initiator across restarts (its own
/// proposals carry the clock, the cut operator's the cut id and phase).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProposalId {
    pub initiator: VnodeId,
    pub n: u64,
}

impl ProposalId {
    /// The bit set in the number of a proposal a vnode makes on its own behalf (`propose_own`: a
    /// report, a root's name), never in one made for someone (the cut operator's phases).
    pub const OWN_BIT: u64 = 1 << 63;

    /// Whether the initiator made it on its own behalf (a report, a root's name).
    pub fn is_own(&self) -> bool {
        self.n & Self::OWN_BIT != 0
    }
}

/// How many of the last applied proposals a copy remembers, to skip one ordered again. A retry
/// comes within the initiator's bounded back-off and a duplicate within the network's delay, far
/// fewer alterations later than this.
pub const RECENT_PROPOSALS_MAX: usize = 256;

/// One alteration: set `key` to `value` (an empty value removes it). Keys name what they hold:
/// `config/…`, `host/…`, `vnode/…`, `placement/…`, `catalog/cut/…`, `cut/…/phase`, `acl/<user>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AlterRecord {
    pub key: String,
    pub value: Vec<u8>,
    /// The proposal it was ordered for, set by the root when it orders it (`None` before).
    pub origin: Option<ProposalId>,
}

impl AlterRecord {
    pub fn set(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        AlterRecord { key: key.into(), value: value.into(), origin: None }
    }

    /// The bytes written to the log and read back, and what the md5 is taken of: the record with
    /// its place in the order, an `OrderedRecord` (borrowed here, so the record is not cloned:
    /// postcard writes a struct's fields in order, so the pair is the same bytes).
    pub fn encode(&self, at: MetaVersion) -> Vec<u8> {
        postcard::to_stdvec(&(at, self)).expect("records always serialize")
    }

    /// What was read back: `None` if the bytes are not a record at all.
    pub fn decode(bytes: &[u8]) -> Option<OrderedRecord> {
        postcard::from_bytes(bytes).ok()
    }
}

pub type Md5Sum = [u8; 16];

pub fn md5_of(bytes: &[u8]) -> Md5Sum {
    Md5::digest(bytes).into()
}

/// An alteration with its place in the order, as written to the log and read back: the bytes of
/// `AlterRecord::encode`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OrderedRecord {
    pub at: MetaVersion,
    pub record: AlterRecord,
}

/// What a vnode keeps of the metadata: manager vnodes a whole replica, store vnodes only what they
/// need (settings, placement, cut processes, the root's name, ACL users) — at 10,000 vnodes the vnode list
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
            View::Leaf => {
                key == "root"
                    || ["config/", "placement/", "cut/", "host/", crate::acl::KEY_PREFIX]
                        .iter()
                        .any(|p| key.starts_with(p))
            }
        }
    }
}

/// Invariant: `seq` is the number of alterations applied; records only change through `apply`.
/// Invariant: `term` never decreases along `apply`.
/// Invariant: every key held is one `view` keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Metadata {
    view: View,
    term: Term,
    seq: AlterSeq,
    /// Shared between copies until one of them applies an alteration (copy on write): a process
    /// that holds many copies — a host's vnodes and their logs, the simulator — holds one map.
    records: Arc<BTreeMap<String, Vec<u8>>>,
    /// The proposals applied last, oldest first, at most `RECENT_PROPOSALS_MAX`: every view keeps
    /// them, so every copy skips the same records.
    recent: Arc<VecDeque<AppliedProposal>>,
}

/// A proposal this copy applied, and what applying it did. Serialized as the pair it holds, so
/// logs and md5 sums written before it was named are read the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct AppliedProposal {
    proposal: ProposalId,
    verdict: Applied,
}

impl Metadata {
    /// The metadata a cluster is created with (sequence 0): e.g. its vnode list, `vnode/<id>` →
    /// the id of the vnode's parent, which boot loading reads.
    pub fn genesis(records: impl IntoIterator<Item = (String, Vec<u8>)>) -> Self {
        let records = Arc::new(records.into_iter().collect());
        Metadata { view: View::Full, term: Term::ZERO, seq: AlterSeq::ZERO, records, recent: Arc::default() }
    }

    pub fn view(&self) -> View {
        self.view
    }

    /// The same metadata as a vnode keeping `view` holds it (a leaf view cannot be widened).
    pub fn project(&self, view: View) -> Metadata {
        assert!(view == View::Leaf || self.view == View::Full, "a leaf view cannot be widened");
        let records = self.records.iter().filter(|(k, _)| view.keeps(k)).map(|(k, v)| (k.clone(), v.clone()));
        let recent = self.recent.clone();
        Metadata { view, term: self.term, seq: self.seq, records: Arc::new(records.collect()), recent }
    }

    /// The vnodes to start on `host` whose primary parent (first in the queue recorded under
    /// `vnode/<id>`) is `parent` (seed 004: boot loading by parent). A key that names no vnode is
    /// skipped.
    pub fn vnodes_on(&self, host: &str, parent: &VnodeId) -> Vec<VnodeId> {
        let parent = parent.to_string();
        let primary = |v: &[u8]| v.split(|b| *b == b',').next() == Some(parent.as_bytes());
        self.records
            .iter()
            .filter(|(_, v)| primary(v))
            .filter_map(|(k, _)| VnodeId::parse(k.strip_prefix("vnode/")?))
            .filter(|id| id.host == host)
            .collect()
    }

    /// The last alteration applied (`ZERO`: none since genesis).
    pub fn seq(&self) -> AlterSeq {
        self.seq
    }

    /// The term of the root that ordered the last alteration applied (`ZERO`: none since genesis).
    pub fn term(&self) -> Term {
        self.term
    }

    pub fn version(&self) -> MetaVersion {
        MetaVersion { term: self.term, seq: self.seq }
    }

    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.records.get(key).map(|v| v.as_slice())
    }

    pub fn records(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.records.iter()
    }

    /// The records whose keys start with `prefix`, in key order (found by range, not by a walk
    /// over every record).
    pub fn records_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a Vec<u8>)> + 'a {
        self.records.range(prefix.to_string()..).take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Applies the alteration at `at`, which must be the next one, and says what it did. Every
    /// copy applies the same sequence, so every copy makes the same verdicts.
    pub fn apply(&mut self, at: MetaVersion, record: &AlterRecord) -> Applied {
        assert_eq!(at.seq, self.seq.next(), "alterations apply in order");
        assert!(at.term >= self.term, "terms never go back");
        self.term = at.term;
        self.seq = at.seq;
        if let Some(verdict) = self.verdict_before(record) {
            // Ordered again (a retry whose first answer was lost, a duplicated delivery): the
            // place in the order is used, the change is not made twice, the verdict stands.
            return if verdict == Applied::Refused { Applied::Refused } else { Applied::Again };
        }
        if record.key == crate::alter::cluster::CHAINS_KEY {
            let verdict = self.apply_chains(&record.value);
            self.remember(record, verdict);
            return verdict;
        }
        let old = self.records.get(&record.key);
        let verdict = if moves_a_cut_back(old, record)
            || adds_a_user_past_the_limit(&self.records, old, record)
            || skips_a_placement_epoch(old, record)
            || drops_a_live_replica(&self.records, old, record)
        {
            // A cut's phase only moves forward, whoever proposed it: an operator on a stale copy
            // reusing a cut id, or the late proposal of one that died with its manager, must not
            // reopen a cut or erase an `END:ok` from the catalog (seeds 2495, 536).
            Applied::Refused
        } else {
            if record.value.is_empty() || !self.view.keeps(&record.key) {
                Arc::make_mut(&mut self.records).remove(&record.key);
            } else {
                Arc::make_mut(&mut self.records).insert(record.key.clone(), record.value.clone());
            }
            Applied::Changed
        };
        self.remember(record, verdict);
        verdict
    }

    /// Several partitions' chains in one alteration (`cluster::chains_record`): each is checked as
    /// its own `placement/<p>` record would be, and all are applied or none — a malformed value
    /// or one chain refused refuses the whole (the root proposes again from its fresh copy).
    fn apply_chains(&mut self, value: &[u8]) -> Applied {
        let Some(chains) = crate::alter::cluster::chains_of(value) else { return Applied::Refused };
        let refused = chains.iter().any(|(key, chain)| {
            let sub = AlterRecord::set(key.clone(), chain.clone());
            let old = self.records.get(key);
            skips_a_placement_epoch(old, &sub) || drops_a_live_replica(&self.records, old, &sub)
        });
        if refused || chains.is_empty() {
            return Applied::Refused;
        }
        let records = Arc::make_mut(&mut self.records);
        for (key, chain) in chains {
            records.insert(key, chain);
        }
        Applied::Changed
    }

    /// The verdict on `record`'s proposal if this copy applied it already.
    fn verdict_before(&self, record: &AlterRecord) -> Option<Applied> {
        let origin = record.origin.as_ref()?;
        self.recent.iter().find(|a| &a.proposal == origin).map(|a| a.verdict)
    }

    fn remember(&mut self, record: &AlterRecord, verdict: Applied) {
        let Some(origin) = &record.origin else { return };
        let recent = Arc::make_mut(&mut self.recent);
        recent.push_back(AppliedProposal { proposal: origin.clone(), verdict });
        if recent.len() > RECENT_PROPOSALS_MAX {
            recent.pop_front();
        }
        assert!(self.recent.len() <= RECENT_PROPOSALS_MAX);
    }

    /// md5 of the whole metadata: equal sums, equal metadata.
    pub fn md5(&self) -> Md5Sum {
        md5_of_encoding(self)
    }

    /// `self.project(View::Leaf).md5()` without building the projection: a vnode that keeps whole
    /// copies sums both after every alteration it applies (four a cut), and the copy is most of
    /// the cost.
    pub fn leaf_md5(&self) -> Md5Sum {
        match self.view {
            View::Leaf => self.md5(),
            View::Full => md5_of_encoding(&LeafProjection(self)),
        }
    }
}

/// The md5 of a value's postcard encoding, fed to the hasher as it is produced (no buffer).
fn md5_of_encoding<T: Serialize + ?Sized>(value: &T) -> Md5Sum {
    postcard::serialize_with_flavor(value, Md5Flavor(Md5::new())).expect("metadata always serializes")
}

/// A postcard output that hashes instead of storing.
struct Md5Flavor(Md5);

impl postcard::ser_flavors::Flavor for Md5Flavor {
    type Output = Md5Sum;

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.0.update([byte]);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        self.0.update(bytes);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Md5Sum> {
        Ok(self.0.finalize().into())
    }
}

/// Whole metadata seen as its leaf view: serializes exactly as `project(View::Leaf)` does (the
/// derived layout of `Metadata`, field by field), borrowing instead of copying.
struct LeafProjection<'a>(&'a Metadata);

impl Serialize for LeafProjection<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let m = self.0;
        let mut out = serializer.serialize_struct("Metadata", 5)?;
        out.serialize_field("view", &View::Leaf)?;
        out.serialize_field("term", &m.term)?;
        out.serialize_field("seq", &m.seq)?;
        out.serialize_field("records", &LeafRecords(&m.records))?;
        out.serialize_field("recent", &*m.recent)?;
        out.end()
    }
}

/// The records a leaf keeps, as the map a projection would hold.
struct LeafRecords<'a>(&'a BTreeMap<String, Vec<u8>>);

impl Serialize for LeafRecords<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let kept = || self.0.iter().filter(|(k, _)| View::Leaf.keeps(k));
        let mut map = serializer.serialize_map(Some(kept().count()))?;
        for (k, v) in kept() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// What applying an alteration did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Applied {
    /// The record is in the metadata now.
    Changed,
    /// Its proposal was applied before: nothing changed a second time.
    Again,
    /// Refused: it would move a cut's phase back. The root answers it failed.
    Refused,
}

/// Whether `record` adds a user (`acl/<name>`) when the metadata holds `acl::USERS_MAX` already:
/// the host that proposes checks it first; this refuses the users two hosts added together.
/// Both views keep every `acl/` key, so every copy counts alike.
fn adds_a_user_past_the_limit(
    records: &BTreeMap<String, Vec<u8>>,
    old: Option<&Vec<u8>>,
    record: &AlterRecord,
) -> bool {
    let prefix = crate::acl::KEY_PREFIX;
    if old.is_some() || record.value.is_empty() || !record.key.starts_with(prefix) {
        return false;
    }
    let users = records.range(prefix.to_string()..).take_while(|(k, _)| k.starts_with(prefix)).count();
    users >= crate::acl::USERS_MAX
}

/// Whether `record` would not move a cut's phase strictly forward: to the same or an earlier
/// phase, or away from its END (each phase of a cut is entered once).
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
    rank(new) <= rank(old)
}

/// Whether `record` sets a partition's chain at any epoch but the next one (`ChainRecord::follows`):
/// a promotion computed from a stale copy, or ordered twice under two proposal ids, is refused in
/// every copy alike, so one epoch names one chain everywhere.
fn skips_a_placement_epoch(old: Option<&Vec<u8>>, record: &AlterRecord) -> bool {
    use crate::placement::ChainRecord;
    if crate::alter::cluster::partition_key(&record.key).is_none() {
        return false;
    }
    match (old.and_then(|v| ChainRecord::parse(v)), ChainRecord::parse(&record.value)) {
        (Some(old), Some(new)) => !old.follows(&new),
        (None, Some(_)) => false,
        // A value that is no chain (or an erasure) never replaces a partition's chain.
        (_, None) => true,
    }
}

/// Whether `record` drops from a partition's chain a replica whose host the metadata does not
/// record dead: a promotion proposed while the host was dead and ordered after it came back
/// (queued at a root that lost and regained its term: `--tree --failover` seed 253) would leave
/// the partition with one copy fewer for nothing. Refused in every copy alike.
fn drops_a_live_replica(records: &BTreeMap<String, Vec<u8>>, old: Option<&Vec<u8>>, record: &AlterRecord) -> bool {
    use crate::placement::ChainRecord;
    if crate::alter::cluster::partition_key(&record.key).is_none() {
        return false;
    }
    let (Some(old), Some(new)) = (old.and_then(|v| ChainRecord::parse(v)), ChainRecord::parse(&record.value)) else {
        return false;
    };
    let dead =
        |v: &VnodeId| records.get(&format!("host/{}", v.host)).map(Vec::as_slice) == Some(crate::alter::cluster::DEAD);
    old.chain.iter().any(|v| !new.chain.contains(v) && !dead(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(term: u64, seq: u64) -> MetaVersion {
        MetaVersion::new(Term(term), AlterSeq(seq))
    }

    fn ordered(key: &str, value: &str, n: u64) -> AlterRecord {
        let initiator = VnodeId { host: "node000".into(), kind: "manager1".into() };
        AlterRecord { origin: Some(ProposalId { initiator, n }), ..AlterRecord::set(key, value) }
    }

    #[test]
    fn a_proposal_ordered_twice_changes_the_metadata_once() {
        let mut m = Metadata::genesis([]);
        m.apply(at(1, 1), &ordered("state/x", "down", 7));
        m.apply(at(1, 2), &ordered("state/x", "working", 8));
        let again = m.apply(at(1, 3), &ordered("state/x", "down", 7)); // the retry of 7, its first answer lost
        assert_eq!(again, Applied::Again);
        assert_eq!(m.get("state/x"), Some(&b"working"[..]), "no lost update");
        assert_eq!(m.version(), at(1, 3), "the place in the order is used");
    }

    /// The log's bytes and the md5 taken of them are what they were when the place was a
    /// `(term, seq)` pair (`order.rs` checks the order, the hash and the print).
    #[test]
    fn a_record_with_its_place_encodes_like_the_pair_it_was() {
        let record = ordered("config/x", "1", 5);
        let at = at(2, 7);
        assert_eq!(record.encode(at), postcard::to_stdvec(&(2u64, 7u64, &record)).unwrap());
        assert_eq!(AlterRecord::decode(&record.encode(at)), Some(OrderedRecord { at, record }));
    }

    /// The sums are taken without building anything, but of exactly the bytes they stand for.
    #[test]
    fn the_md5_sums_are_those_of_the_encoded_metadata_and_of_its_leaf_projection() {
        let mut m = Metadata::genesis([]);
        for (n, key) in ["config/a", "vnode/store0@h1", "cut/3", "host/h1", "placement/0", "root"].iter().enumerate() {
            m.apply(at(1, n as u64 + 1), &ordered(key, "v", n as u64));
        }
        assert_eq!(m.md5(), md5_of(&postcard::to_stdvec(&m).unwrap()));
        let leaf = m.project(View::Leaf);
        assert_ne!(leaf.md5(), m.md5(), "the projection drops vnode/ and host/ records");
        assert_eq!(m.leaf_md5(), md5_of(&postcard::to_stdvec(&leaf).unwrap()));
        assert_eq!(leaf.leaf_md5(), leaf.md5(), "a leaf view is its own projection");
    }

    #[test]
    fn a_copy_remembers_a_bounded_number_of_proposals() {
        let mut m = Metadata::genesis([]);
        for n in 0..(RECENT_PROPOSALS_MAX as u64 + 10) {
            m.apply(at(1, n + 1), &ordered("k", "v", n));
        }
        assert_eq!(m.recent.len(), RECENT_PROPOSALS_MAX);
        assert_eq!(m.recent.front().map(|a| a.proposal.n), Some(10));
    }

    #[test]
    fn a_cut_phase_is_entered_once_and_a_refusal_stands_for_a_retry() {
        let mut m = Metadata::genesis([]);
        assert_eq!(m.apply(at(1, 1), &ordered("cut/1", "START", 1)), Applied::Changed);
        assert_eq!(m.apply(at(1, 2), &ordered("cut/1", "END:failed", 2)), Applied::Changed);
        // Another operator, on a stale copy, starts cut 1 again: refused, and so is its retry.
        assert_eq!(m.apply(at(1, 3), &ordered("cut/1", "START", 3)), Applied::Refused);
        assert_eq!(m.apply(at(1, 4), &ordered("cut/1", "START", 3)), Applied::Refused);
        assert_eq!(m.apply(at(1, 5), &ordered("cut/1", "END:ok", 4)), Applied::Refused);
        assert_eq!(m.get("cut/1"), Some(&b"END:failed"[..]));
    }

    /// Users are a leaf's business too (every host checks them), and past `acl::USERS_MAX` a new
    /// one is refused by every copy alike, while a change of one held is not.
    #[test]
    fn every_view_keeps_users_and_refuses_one_past_the_limit() {
        let users = (0..crate::acl::USERS_MAX).map(|i| (crate::acl::key(&format!("u{i}")), b"x".to_vec()));
        let mut full = Metadata::genesis(users);
        let mut leaf = full.project(View::Leaf);
        assert_eq!(leaf.records().count(), crate::acl::USERS_MAX, "the leaf view keeps acl/ records");
        for m in [&mut full, &mut leaf] {
            assert_eq!(m.apply(at(1, 1), &ordered("acl/one-more", "x", 1)), Applied::Refused);
            assert_eq!(m.apply(at(1, 2), &ordered("acl/u1", "y", 2)), Applied::Changed);
            assert_eq!(m.apply(at(1, 3), &ordered("acl/u2", "", 3)), Applied::Changed);
            assert_eq!(m.apply(at(1, 4), &ordered("acl/one-more", "x", 4)), Applied::Changed, "room again");
        }
        assert_eq!(full.leaf_md5(), leaf.md5());
    }

    #[test]
    fn every_view_skips_the_same_records() {
        let mut full = Metadata::genesis([]);
        full.apply(at(1, 1), &ordered("cut/1", "START", 1));
        let mut leaf = full.project(View::Leaf);
        for m in [&mut full, &mut leaf] {
            m.apply(at(1, 2), &ordered("cut/1", "START", 1));
        }
        assert_eq!(full.recent, leaf.recent);
    }

    #[test]
    fn a_chain_drops_only_replicas_of_hosts_recorded_dead() {
        let mut m = Metadata::genesis([
            ("placement/0".to_string(), b"store0@h1,store0@h2".to_vec()),
            ("host/h1".to_string(), b"alive".to_vec()),
        ]);
        let promote = ordered("placement/0", "1;store0@h2", 1);
        assert_eq!(m.apply(at(1, 1), &promote), Applied::Refused, "h1 is alive: its replica stays");
        m.apply(at(1, 2), &ordered("host/h1", "dead", 2));
        let again = ordered("placement/0", "1;store0@h2", 3);
        assert_eq!(m.apply(at(1, 3), &again), Applied::Changed, "h1 is dead: its replica goes");
        assert_eq!(m.get("placement/0"), Some(&b"1;store0@h2"[..]));
    }

    #[test]
    fn chains_in_one_alteration_apply_all_or_none() {
        let mut m = Metadata::genesis([
            ("placement/0".to_string(), b"store0@h1,store0@h2".to_vec()),
            ("placement/1".to_string(), b"store0@h2,store0@h1".to_vec()),
            ("host/h1".to_string(), b"dead".to_vec()),
        ]);
        let both = "0=1;store0@h2\n1=1;store0@h2";
        let one_skips = "0=1;store0@h2\n1=2;store0@h2";
        let key = crate::alter::cluster::CHAINS_KEY;
        assert_eq!(m.apply(at(1, 1), &ordered(key, one_skips, 1)), Applied::Refused, "one chain skips an epoch");
        assert_eq!(m.get("placement/0"), Some(&b"store0@h1,store0@h2"[..]), "none applied");
        assert_eq!(m.apply(at(1, 2), &ordered(key, both, 2)), Applied::Changed);
        assert_eq!(m.get("placement/0"), Some(&b"1;store0@h2"[..]));
        assert_eq!(m.get("placement/1"), Some(&b"1;store0@h2"[..]));
        assert_eq!(m.get(key), None, "no record is kept under the batch's key");
    }
}
