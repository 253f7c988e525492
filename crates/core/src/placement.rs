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

/// A partition's replica chain `[primary, backup1, …]` and the epoch it has held since.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChainRecord {
    pub epoch: u64,
    pub chain: Vec<VnodeId>,
}

impl ChainRecord {
    /// The value of `placement/<p>`: `primary,backup,…` at epoch 0 (the genesis format, kept so
    /// that older data directories read the same), `<epoch>;primary,backup,…` after.
    pub fn encode(&self) -> Vec<u8> {
        let chain: Vec<String> = self.chain.iter().map(|v| v.to_string()).collect();
        match self.epoch {
            0 => chain.join(",").into_bytes(),
            e => format!("{e};{}", chain.join(",")).into_bytes(),
        }
    }

    /// `None` for a value that is not a non-empty chain of vnode names.
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?;
        let (epoch, chain) = match text.split_once(';') {
            Some((e, c)) => (e.parse().ok()?, c),
            None => (0, text),
        };
        let chain: Vec<VnodeId> = chain.split(',').map(VnodeId::parse).collect::<Option<_>>()?;
        (!chain.is_empty()).then_some(ChainRecord { epoch, chain })
    }

    /// Whether `next` may replace this chain: exactly one epoch later (a compare-and-set every
    /// copy of the metadata applies alike, so a proposal computed from a stale copy is refused).
    pub fn follows(&self, next: &ChainRecord) -> bool {
        next.epoch == self.epoch + 1
    }
}

/// Partition → replica chain `[primary, backup1, …]`, each with its epoch.
///
/// Invariant: every chain is non-empty and names distinct members.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    chains: Vec<Vec<VnodeId>>,
    /// Invariant: one per chain.
    epochs: Vec<u64>,
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
        Placement { chains, epochs, members }
    }

    /// A placement read from outside (the metadata, a manifest): every chain non-empty, of
    /// distinct members.
    pub fn from_chains(chains: Vec<ChainRecord>, mut members: Vec<VnodeId>) -> Option<Self> {
        members.sort();
        members.dedup();
        let valid = |c: &ChainRecord| {
            let mut d = c.chain.clone();
            d.sort();
            d.dedup();
            !c.chain.is_empty() && d.len() == c.chain.len() && c.chain.iter().all(|v| members.binary_search(v).is_ok())
        };
        if chains.is_empty() || !chains.iter().all(valid) {
            return None;
        }
        let epochs = chains.iter().map(|c| c.epoch).collect();
        let chains = chains.into_iter().map(|c| c.chain).collect();
        Some(Placement { chains, epochs, members })
    }

    pub fn partitions(&self) -> u32 {
        self.chains.len() as u32
    }

    pub fn partition_of(&self, key: &[u8]) -> PartitionId {
        PartitionId(crc32c::crc32c(key) % self.partitions())
    }

    pub fn chain(&self, p: PartitionId) -> &[VnodeId] {
        &self.chains[p.0 as usize]
    }

    /// The epoch partition `p`'s chain has held since its last change.
    pub fn epoch(&self, p: PartitionId) -> u64 {
        self.epochs[p.0 as usize]
    }

    /// The chain of `p` with its epoch, as the metadata records it.
    pub fn record(&self, p: PartitionId) -> ChainRecord {
        ChainRecord { epoch: self.epoch(p), chain: self.chain(p).to_vec() }
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

    /// The partitions whose chain includes `v`.
    pub fn partitions_of<'a>(&'a self, v: &'a VnodeId) -> impl Iterator<Item = PartitionId> + 'a {
        (0..self.partitions()).map(PartitionId).filter(move |p| self.chain(*p).contains(v))
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
        let genesis = ChainRecord { epoch: 0, chain: vec![v("store0@a"), v("store1@b")] };
        assert_eq!(genesis.encode(), b"store0@a,store1@b".to_vec());
        assert_eq!(ChainRecord::parse(&genesis.encode()), Some(genesis.clone()));
        let later = ChainRecord { epoch: 7, chain: vec![v("store1@b")] };
        assert_eq!(ChainRecord::parse(&later.encode()), Some(later.clone()));
        assert!(!genesis.follows(&later) && genesis.follows(&ChainRecord { epoch: 1, ..later }));
        assert_eq!(ChainRecord::parse(b"x;store0@a"), None);
        assert_eq!(ChainRecord::parse(b""), None);
    }
}
