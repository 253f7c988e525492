//! Which vnodes hold which partition. A store vnode of the cluster tree reads it from the cluster
//! metadata (`placement/<p>` chains and `placement/members`); otherwise it is given as input.

use crate::ids::{Key, PartitionId, VnodeId};
use serde::{Deserialize, Serialize};

/// Partition → replica chain `[primary, backup1, …]`.
///
/// Invariant: every chain is non-empty and names distinct members.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    chains: Vec<Vec<VnodeId>>,
    /// Every store vnode, sorted, including those that hold no partition (they still coordinate
    /// transactions, so the cut process must reach them).
    members: Vec<VnodeId>,
}

impl Placement {
    /// Round-robin placement of `partitions` partitions over `vnodes`, `replicas` copies each.
    pub fn round_robin(vnodes: &[VnodeId], partitions: u32, replicas: usize) -> Self {
        assert!(!vnodes.is_empty() && partitions > 0);
        assert!(replicas >= 1 && replicas <= vnodes.len(), "replicas must be in 1..=vnodes");
        let chains = (0..partitions as usize)
            .map(|p| (0..replicas).map(|r| vnodes[(p + r) % vnodes.len()].clone()).collect())
            .collect();
        let mut members = vnodes.to_vec();
        members.sort();
        members.dedup();
        Placement { chains, members }
    }

    /// A placement read from outside (the metadata): every chain non-empty, of distinct members.
    pub fn from_chains(chains: Vec<Vec<VnodeId>>, mut members: Vec<VnodeId>) -> Option<Self> {
        members.sort();
        members.dedup();
        let valid = |c: &Vec<VnodeId>| {
            let mut d = c.clone();
            d.sort();
            d.dedup();
            !c.is_empty() && d.len() == c.len() && c.iter().all(|v| members.binary_search(v).is_ok())
        };
        (!chains.is_empty() && chains.iter().all(valid)).then_some(Placement { chains, members })
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
