//! Which vnodes hold which partition. A store vnode of the cluster tree reads it from the cluster
//! metadata (`placement/<p>` chains with their epochs, and `placement/members`); otherwise it is
//! given as input.
//!
//! Each partition's chain has an *epoch*: 0 at genesis, raised by exactly one by every change,
//! which the tree's root orders like any alteration (`alter::promote`, seed 004 bullet 8). Every
//! copy of the metadata refuses a change that does not raise the epoch by one
//! (`ChainRecord::follows`), so one epoch names one chain everywhere.

use crate::ids::{Key, PartitionId, VnodeId};
use serde::{Deserialize, Serialize};

/// The partition `key` falls in among `partitions` (at least one): a collection's element falls
/// in its collection's (`collection::routing_key`).
pub fn partition_of(key: &[u8], partitions: u32) -> PartitionId {
    PartitionId(crc32c::crc32c(crate::collection::routing_key(key)) % partitions)
}

/// A partition's replica chain `[primary, backup1, …]` and the epoch it has held since.
///
/// `learners` are vnodes catching up on the partition (`catch_up`): every write of a transaction
/// routed by this chain reaches them after the copies (they are at the end of the chain a
/// transaction is sent down), but they are not copies — no read, no promotion, no cut and no
/// `min_copies` counts them — until an alteration moves them to `chain`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChainRecord {
    pub epoch: u64,
    pub chain: Vec<VnodeId>,
    pub learners: Vec<Learner>,
}

/// A vnode catching up on a partition, and the epoch of the chain that first named it a learner
/// (the join it is catching up from: a learner dropped and named again joins anew, and must copy
/// anew what it missed in between).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Learner {
    pub vnode: VnodeId,
    pub since: u64,
}

impl ChainRecord {
    /// The value of `placement/<p>`: `primary,backup,…` at epoch 0 (the genesis format, kept so
    /// that older data directories read the same), `<epoch>;primary,backup,…` after, and
    /// `+learner#since,…` after the copies when some vnode catches up.
    pub fn encode(&self) -> Vec<u8> {
        let chain: Vec<String> = self.chain.iter().map(|v| v.to_string()).collect();
        let learners: Vec<String> = self.learners.iter().map(|l| format!("{}#{}", l.vnode, l.since)).collect();
        let learners = if learners.is_empty() { String::new() } else { format!("+{}", learners.join(",")) };
        match self.epoch {
            0 => chain.join(",").into_bytes(),
            e => format!("{e};{}{learners}", chain.join(",")).into_bytes(),
        }
    }

    /// `None` for a value that is not a non-empty chain of vnode names (learners only after an
    /// epoch, each joined at an epoch no later than the chain's).
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?;
        let (epoch, chain) = match text.split_once(';') {
            Some((e, c)) => (e.parse().ok()?, c),
            None => (0, text),
        };
        let (chain, learners) = match chain.split_once('+') {
            Some((c, l)) if epoch > 0 => (c, l.split(',').map(Learner::parse).collect::<Option<Vec<_>>>()?),
            Some(_) => return None,
            None => (chain, vec![]),
        };
        let chain: Vec<VnodeId> = chain.split(',').map(VnodeId::parse).collect::<Option<_>>()?;
        let joined_before = learners.iter().all(|l| l.since <= epoch);
        (!chain.is_empty() && joined_before).then_some(ChainRecord { epoch, chain, learners })
    }

    /// Every member a transaction's writes reach: the copies, then the learners.
    pub fn members(&self) -> Vec<VnodeId> {
        self.chain.iter().cloned().chain(self.learners.iter().map(|l| l.vnode.clone())).collect()
    }

    /// Whether `next` may replace this chain: exactly one epoch later (a compare-and-set every
    /// copy of the metadata applies alike, so a proposal computed from a stale copy is refused);
    /// every copy of `next` was a copy or a learner here (a vnode becomes a copy only by catching
    /// up as a learner first); every learner of `next` is one of these or joins at `next`'s epoch.
    pub fn follows(&self, next: &ChainRecord) -> bool {
        let learnt = |v: &VnodeId| self.chain.contains(v) || self.learners.iter().any(|l| &l.vnode == v);
        let joins = |l: &Learner| self.learners.contains(l) || l.since == next.epoch;
        next.epoch == self.epoch + 1 && next.chain.iter().all(learnt) && next.learners.iter().all(joins)
    }
}

impl Learner {
    fn parse(text: &str) -> Option<Learner> {
        let (vnode, since) = text.split_once('#')?;
        Some(Learner { vnode: VnodeId::parse(vnode)?, since: since.parse().ok()? })
    }
}

/// Partition → replica chain `[primary, backup1, …, learner, …]`, each with its epoch.
///
/// Invariant: every chain is non-empty, names distinct members, and holds at least one copy
/// before its learners (`copies(p)` is never empty).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// Copies then learners: the members a transaction's writes reach.
    chains: Vec<Vec<VnodeId>>,
    /// Invariant: one per chain.
    epochs: Vec<u64>,
    /// Invariant: one per chain; each chain's last `learners[p].len()` members are these.
    learners: Vec<Vec<Learner>>,
    /// Every store vnode, sorted, including those that hold no partition (they still coordinate
    /// transactions, so the cut process must reach them).
    members: Vec<VnodeId>,
}

impl Placement {
    /// Round-robin placement of `partitions` partitions over `vnodes`, `replicas` copies each.
    pub fn round_robin(vnodes: &[VnodeId], partitions: u32, replicas: usize) -> Self {
        assert!(!vnodes.is_empty() && partitions > 0);
        assert!(replicas >= 1 && replicas <= vnodes.len(), "replicas must be in 1..=vnodes");
        let chains: Vec<Vec<VnodeId>> = (0..partitions as usize)
            .map(|p| (0..replicas).map(|r| vnodes[(p + r) % vnodes.len()].clone()).collect())
            .collect();
        let mut members = vnodes.to_vec();
        members.sort();
        members.dedup();
        let epochs = vec![0; chains.len()];
        let learners = vec![vec![]; chains.len()];
        Placement { chains, epochs, learners, members }
    }

    /// A placement read from outside (the metadata, a manifest): every chain non-empty, of
    /// distinct members.
    pub fn from_chains(chains: Vec<ChainRecord>, mut members: Vec<VnodeId>) -> Option<Self> {
        members.sort();
        members.dedup();
        let valid = |c: &ChainRecord| {
            let all = c.members();
            let mut d = all.clone();
            d.sort();
            d.dedup();
            !c.chain.is_empty() && d.len() == all.len() && all.iter().all(|v| members.binary_search(v).is_ok())
        };
        if chains.is_empty() || !chains.iter().all(valid) {
            return None;
        }
        let epochs = chains.iter().map(|c| c.epoch).collect();
        let learners = chains.iter().map(|c| c.learners.clone()).collect();
        let chains = chains.into_iter().map(|c| c.members()).collect();
        Some(Placement { chains, epochs, learners, members })
    }

    pub fn partitions(&self) -> u32 {
        self.chains.len() as u32
    }

    pub fn partition_of(&self, key: &[u8]) -> PartitionId {
        partition_of(key, self.partitions())
    }

    /// Every member of `p`'s chain a transaction's writes reach: the copies, then the learners.
    pub fn chain(&self, p: PartitionId) -> &[VnodeId] {
        &self.chains[p.0 as usize]
    }

    /// The members of `p`'s chain that hold it whole: the primary and the backups, not the
    /// learners still catching up. What reads, promotions, cuts, snapshots and `min_copies`
    /// count.
    pub fn copies(&self, p: PartitionId) -> &[VnodeId] {
        let chain = self.chain(p);
        let copies = &chain[..chain.len() - self.learners[p.0 as usize].len()];
        assert!(!copies.is_empty(), "a chain holds a copy before its learners");
        copies
    }

    /// The vnodes catching up on `p`.
    pub fn learners(&self, p: PartitionId) -> &[Learner] {
        &self.learners[p.0 as usize]
    }

    /// The epoch partition `p`'s chain has held since its last change.
    pub fn epoch(&self, p: PartitionId) -> u64 {
        self.epochs[p.0 as usize]
    }

    /// The chain of `p` with its epoch, as the metadata records it.
    pub fn record(&self, p: PartitionId) -> ChainRecord {
        ChainRecord { epoch: self.epoch(p), chain: self.copies(p).to_vec(), learners: self.learners(p).to_vec() }
    }

    /// The sum of the epochs of the distinct partitions `keys` fall in: what a transaction
    /// message carries so that its receiver can tell it was routed by the placement it holds.
    ///
    /// Why a sum is enough: every copy of the metadata is a prefix of the root's one order, so of
    /// two copies one has every partition's epoch at least the other's; equal sums over the same
    /// partitions then mean equal epochs, partition by partition.
    pub fn epoch_sum<'a>(&self, keys: impl IntoIterator<Item = &'a Key>) -> u64 {
        if self.epochs.iter().all(|e| *e == 0) {
            // Never changed (every cluster without failover): no partition to look up per key.
            return 0;
        }
        let mut parts: Vec<PartitionId> = keys.into_iter().map(|k| self.partition_of(k)).collect();
        parts.sort();
        parts.dedup();
        parts.iter().map(|p| self.epoch(*p)).sum()
    }

    pub fn primary(&self, p: PartitionId) -> &VnodeId {
        &self.chain(p)[0]
    }

    pub fn primary_of(&self, key: &Key) -> &VnodeId {
        self.primary(self.partition_of(key))
    }

    /// The partitions whose chain includes `v`, as a copy or a learner.
    pub fn partitions_of<'a>(&'a self, v: &'a VnodeId) -> impl Iterator<Item = PartitionId> + 'a {
        (0..self.partitions()).map(PartitionId).filter(move |p| self.chain(*p).contains(v))
    }

    /// The partitions `v` holds a copy of (not those it is catching up on).
    pub fn copies_of<'a>(&'a self, v: &'a VnodeId) -> impl Iterator<Item = PartitionId> + 'a {
        (0..self.partitions()).map(PartitionId).filter(move |p| self.copies(*p).contains(v))
    }

    pub fn vnodes(&self) -> Vec<VnodeId> {
        self.members.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str) -> VnodeId {
        VnodeId::parse(name).expect("a vnode name")
    }

    #[test]
    fn a_chain_record_reads_back_what_it_wrote_and_the_genesis_format_is_epoch_zero() {
        let genesis = ChainRecord { epoch: 0, chain: vec![v("store0@a"), v("store1@b")], learners: vec![] };
        assert_eq!(genesis.encode(), b"store0@a,store1@b".to_vec());
        assert_eq!(ChainRecord::parse(&genesis.encode()), Some(genesis.clone()));
        let later = ChainRecord { epoch: 7, chain: vec![v("store1@b")], learners: vec![] };
        assert_eq!(ChainRecord::parse(&later.encode()), Some(later.clone()));
        assert!(!genesis.follows(&later) && genesis.follows(&ChainRecord { epoch: 1, ..later }));
        assert_eq!(ChainRecord::parse(b"x;store0@a"), None);
        assert_eq!(ChainRecord::parse(b""), None);
        let learning = ChainRecord {
            epoch: 9,
            chain: vec![v("store1@b")],
            learners: vec![Learner { vnode: v("store0@a"), since: 8 }],
        };
        assert_eq!(learning.encode(), b"9;store1@b+store0@a#8".to_vec());
        assert_eq!(ChainRecord::parse(&learning.encode()), Some(learning.clone()));
        assert_eq!(learning.members(), vec![v("store1@b"), v("store0@a")]);
        assert_eq!(ChainRecord::parse(b"store1@b+store0@a#0"), None, "no learner at genesis");
        assert_eq!(ChainRecord::parse(b"3;store1@b+store0@a#4"), None, "joined after the chain's epoch");
        assert_eq!(ChainRecord::parse(b"3;+store0@a#2"), None, "no copy");
    }

    #[test]
    fn learners_follow_the_copies_in_the_chain_and_are_not_copies() {
        let learning = ChainRecord {
            epoch: 2,
            chain: vec![v("store1@b")],
            learners: vec![Learner { vnode: v("store0@a"), since: 2 }],
        };
        let p = Placement::from_chains(vec![learning.clone()], vec![v("store0@a"), v("store1@b")]).unwrap();
        assert_eq!(p.chain(PartitionId(0)), &[v("store1@b"), v("store0@a")]);
        assert_eq!(p.copies(PartitionId(0)), &[v("store1@b")]);
        assert_eq!(p.record(PartitionId(0)), learning);
        assert_eq!(p.copies_of(&v("store0@a")).count(), 0);
        assert_eq!(p.partitions_of(&v("store0@a")).count(), 1);
    }
}
