//! Promotion (issue 30): when the metadata records a host dead, the root gives every partition
//! that has a replica on it a new chain without that replica, one epoch later — an alteration like
//! any other (seed 004 bullet 8: "topology is modified by failover"). Decided by the core's root
//! alone, never by a driver or the simulator.
//!
//! Which replica serves next: the first live one in the old order (the old primary when it is
//! alive). Why any live one is safe: a 1PC hop answers up its chain only once it committed, and a
//! 2PC backup holds the branch prepared before its primary answers, so a live replica not in doubt
//! holds every acknowledged commit of the partition; a live replica in doubt keeps the branch's
//! keys locked until the furthest live replica downstream of it answers
//! (`txn::participant::participant_in_doubt`).
//!
//! Only when the cluster setting `failover` is `on`: the simulator's `--failover`, a node's
//! `cluster.failover` (on unless a cluster's config turns it off).
//!
//! The last replica of a partition is never dropped: with none alive the partition waits for one
//! to come back (unavailable), rather than lose what only it holds. A host that comes back gets no
//! partition back here: its copies are stale until caught up (the catch-up issue).

use super::cluster;
use super::node::AlterNode;
use crate::ids::{PartitionId, VnodeId};
use crate::placement::ChainRecord;
use std::collections::BTreeMap;

/// The promotions this root has proposed and not yet seen end: partition → (proposal, epoch).
/// Invariant: at most one per partition.
#[derive(Debug, Default)]
pub(super) struct Promotions {
    in_flight: BTreeMap<u32, (u64, u64)>,
}

impl AlterNode {
    /// On every heartbeat tick of a root that orders: propose the next chain of every partition
    /// with a replica on a host recorded dead (one proposal in flight per partition; one whose
    /// epoch is no longer the next is withdrawn).
    pub(super) fn promote(&mut self) {
        if !cluster::failover_on(&self.metadata) || !self.is_root() || self.lead_term().is_none() {
            return;
        }
        for (p, old) in cluster::placement_chains(&self.metadata).into_iter().enumerate() {
            let p = p as u32;
            let next = next_chain(&self.metadata, &old);
            if let Some((n, epoch)) = self.promotions.in_flight.get(&p).copied() {
                if next.as_ref().is_some_and(|c| c.epoch == epoch) {
                    continue; // still the next epoch: its outcome is awaited
                }
                // Applied, or no longer needed (the host came back before it was ordered).
                self.withdraw_own(n);
                self.promotions.in_flight.remove(&p);
            }
            let Some(next) = next else { continue };
            let record = cluster::chain_record(PartitionId(p), &next);
            let n = self.propose_own(record);
            self.promotions.in_flight.insert(p, (n, next.epoch));
        }
    }

    /// An own proposal ended: a promotion of its partition may be proposed again.
    pub(super) fn promotion_done(&mut self, n: u64) {
        self.promotions.in_flight.retain(|_, (m, _)| *m != n);
    }
}

/// The chain that follows `old` once the hosts the metadata records dead are dropped, or `None`
/// when it needs no change (or no live replica is left to serve).
///
/// Invariant: the result is a non-empty subsequence of `old.chain`, one epoch later.
pub fn next_chain(m: &super::Metadata, old: &ChainRecord) -> Option<ChainRecord> {
    let chain: Vec<VnodeId> = old.chain.iter().filter(|v| !cluster::host_dead(m, &v.host)).cloned().collect();
    if chain.len() == old.chain.len() || chain.is_empty() {
        return None;
    }
    assert!(!chain.is_empty() && chain.iter().all(|v| old.chain.contains(v)));
    Some(ChainRecord { epoch: old.epoch + 1, chain })
}
