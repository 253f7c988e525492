//! One chain per partition per epoch, among the placements store vnodes route by (issue 30).
//!
//! Every time a store vnode starts routing by another placement, the simulator notes each
//! partition's chain at its epoch; two vnodes that ever routed by different chains at one epoch
//! could each have taken a primary's part for the same partition at once.

use super::{Checker, Violation};
use std::collections::BTreeMap;
use waymark_core::placement::ChainRecord;
use waymark_core::{PartitionId, Placement, VnodeId};

pub const CHECKER: Checker = Checker {
    name: "placement-epochs",
    property: "every store vnode that routes by a partition's chain at some epoch routes by the same chain at \
               that epoch: one primary per partition per epoch",
};

/// The chains seen so far, by partition and epoch, with the first vnode seen routing by each.
#[derive(Debug, Default)]
pub struct EpochsSeen {
    chains: BTreeMap<(u32, u64), (ChainRecord, VnodeId)>,
    /// When a store vnode first routed by each partition's chain at each epoch.
    first_us: BTreeMap<(u32, u64), u64>,
    pub violations: Vec<Violation>,
    /// Placement changes store vnodes made (one per vnode and change).
    pub changes: u64,
}

impl EpochsSeen {
    /// `by` routed by `before` (perhaps the genesis placement, never noted: vnodes start with it)
    /// and now routes by `placement`.
    pub fn note_change(&mut self, by: &VnodeId, before: &Placement, placement: &Placement, now_us: u64) {
        for p in 0..before.partitions() {
            let chain = before.record(PartitionId(p));
            let epoch = chain.epoch;
            if epoch == 0 {
                self.chains.entry((p, 0)).or_insert((chain, by.clone()));
            }
        }
        self.note(by, placement, now_us);
    }

    /// `by` now routes by `placement`.
    fn note(&mut self, by: &VnodeId, placement: &Placement, now_us: u64) {
        self.changes += 1;
        for p in 0..placement.partitions() {
            let chain = placement.record(PartitionId(p));
            let epoch = chain.epoch;
            self.first_us.entry((p, epoch)).or_insert(now_us);
            match self.chains.get(&(p, epoch)) {
                None => drop(self.chains.insert((p, epoch), (chain, by.clone()))),
                Some((seen, first)) if *seen != chain && self.violations.len() < 3 => {
                    self.violations.push(CHECKER.violation(format!(
                        "partition {p} at epoch {epoch}: {first} routed by {seen:?}, {by} by {chain:?}"
                    )));
                }
                Some(_) => {}
            }
        }
    }

    /// At the end: no vnode routed by an epoch of a partition beyond the one the newest metadata
    /// records — a promotion acted on and then lost (a change of root undid it) leaves a vnode that
    /// decided as if a replica were gone while the cluster kept it.
    pub fn check_final(&self, recorded: &Placement) -> Vec<Violation> {
        let mut out = vec![];
        for ((p, epoch), (chain, by)) in &self.chains {
            let last = recorded.epoch(PartitionId(*p));
            if *epoch > last && out.len() < 3 {
                out.push(CHECKER.violation(format!(
                    "{by} routed by partition {p}'s chain {chain:?} at epoch {epoch}, but the metadata ends at epoch {last}"
                )));
            }
        }
        out
    }

    /// For a host that went down at `down_us`: per partition whose chain at that moment held one
    /// of its vnodes, how long until a store vnode first routed by a later chain without it.
    pub fn windows_after(&self, host: &str, down_us: u64) -> Vec<u64> {
        let mut out = vec![];
        let parts: std::collections::BTreeSet<u32> = self.chains.keys().map(|(p, _)| *p).collect();
        for p in parts {
            // Epoch 0 is the genesis chain: in use from the start (noted only with a first change).
            let at = |e: &u64| if *e == 0 { 0 } else { self.first_us.get(&(p, *e)).copied().unwrap_or(u64::MAX) };
            let held_then = self.chains.range((p, 0)..=(p, u64::MAX)).rfind(|((_, e), _)| at(e) <= down_us);
            let Some(((_, e0), (chain, _))) = held_then else { continue };
            if !chain.chain.iter().any(|v| v.host == host) {
                continue;
            }
            let later = self.chains.range((p, e0 + 1)..=(p, u64::MAX));
            let dropped =
                later.filter(|(_, (c, _))| !c.chain.iter().any(|v| v.host == host)).map(|((_, e), _)| at(e)).min();
            if let Some(t) = dropped.filter(|t| *t >= down_us && *t != u64::MAX) {
                out.push(t - down_us);
            }
        }
        out
    }

    /// Partitions whose chain changed at least once (their highest epoch above 0).
    pub fn promoted_partitions(&self) -> usize {
        let mut parts: Vec<u32> = self.chains.keys().filter(|(_, e)| *e > 0).map(|(p, _)| *p).collect();
        parts.dedup();
        parts.len()
    }
}
