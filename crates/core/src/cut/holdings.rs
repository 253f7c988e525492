//! What a store vnode held when its part of a cut was whole: the partitions it was a copy of, by
//! the placement it routed by as it appended `CutFinish{C}`, with their epochs and chains. A
//! snapshot reads each partition from a vnode that held it *at the cut*, never by the placement
//! at export time: between the two a learner may switch in as a copy, and its log up to the cut
//! holds only the pages copied by then (bugs/2026-12-07-nemesis-g2: a restored snapshot missed
//! an acknowledged append the learner had not copied yet, while holding a later write it
//! received as a member of the chain).
//!
//! Invariant: `Vnode::holdings_at(C)` is the placement as of this vnode's `CutFinish{C}`: set
//! once, where the record is appended, and never changed after. A cut across a change of
//! placement fails (`catch_up::propose_copies` waits for running cuts; a switch raises the epoch
//! the cut process checks), so on a successful cut every vnode saw the same chains.
//! `--break export-holdings-now` answers the placement in use instead (`cut_exports` catches it).

use crate::ids::{CutId, PartitionId, VnodeId};
use crate::vnode::Vnode;
use std::collections::{BTreeMap, VecDeque};

/// Cuts whose holdings a vnode remembers: a snapshot exports right after its cut, and a vnode
/// finishes one cut at a time.
pub const HOLDINGS_KEPT: usize = 8;

/// A store vnode's copies at one of its cuts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CutHoldings {
    pub cut: CutId,
    /// Partition → the epoch of its chain, for each partition this vnode was a copy of.
    pub epochs: BTreeMap<u32, u64>,
    /// Partition → its copies, primary first (the same partitions as `epochs`).
    pub chains: BTreeMap<u32, Vec<VnodeId>>,
}

/// The holdings of the last `HOLDINGS_KEPT` cuts this vnode finished since it started (memory
/// only: a vnode restarted between its cut and the export cannot say, and the export fails).
#[derive(Debug, Default, Hash)]
pub(crate) struct HoldingsLog {
    kept: VecDeque<CutHoldings>,
}

impl Vnode {
    /// The partitions this vnode is a copy of now, with their epochs and chains.
    fn holdings_now(&self, cut: CutId) -> CutHoldings {
        let placement = &self.cfg.placement;
        let me = &self.cfg.id;
        let held: Vec<PartitionId> = placement.copies_of(me).collect();
        CutHoldings {
            cut,
            epochs: held.iter().map(|p| (p.0, placement.epoch(*p))).collect(),
            chains: held.iter().map(|p| (p.0, placement.copies(*p).to_vec())).collect(),
        }
    }

    /// Where a strategy fixes what `cut` covers here — the consistent cut's `CutFinish`, the
    /// blocking cut's marker, the versions strategy's `VersionsMap` — what this vnode holds is what
    /// the cut covers. A blocking cut of the tree may write its marker again (blocking tree
    /// matrix seed 2): the last one stands, as the log's export reads up to it.
    pub(crate) fn note_holdings(&mut self, cut: CutId) {
        let holdings = self.holdings_now(cut);
        let kept = &mut self.cut.holdings.kept;
        kept.retain(|h| h.cut != cut);
        if kept.len() == HOLDINGS_KEPT {
            kept.pop_front();
        }
        kept.push_back(holdings);
    }

    /// What this vnode held as a copy when its part of `cut` was whole, if it finished `cut` since
    /// it started and the cut is among the last `HOLDINGS_KEPT`: the partitions a snapshot of
    /// `cut` may read from its log.
    pub fn holdings_at(&self, cut: CutId) -> Option<CutHoldings> {
        let at = self.cut.holdings.kept.iter().find(|h| h.cut == cut)?;
        if self.cfg.breaks.export_holdings_now {
            return Some(self.holdings_now(cut));
        }
        Some(at.clone())
    }
}

/// Which of the vnodes a snapshot reads each partition from, given what each held at the cut:
/// those that held it by the newest chain any of them held it by. A failover only drops replicas
/// and raises the epoch, so a vnode still routing by an older chain at its `CutFinish` — a host
/// cut off and recorded dead meanwhile, its copy stale — is left out, and what the others hold is
/// whole (a replica holds every commit of its partition). Returns, per vnode in the order given,
/// the partitions kept.
pub fn newest_holders(epochs_of: &[&BTreeMap<u32, u64>]) -> Vec<BTreeMap<u32, u64>> {
    let mut newest: BTreeMap<u32, u64> = BTreeMap::new();
    for (p, e) in epochs_of.iter().flat_map(|held| held.iter()) {
        let n = newest.entry(*p).or_default();
        *n = (*n).max(*e);
    }
    epochs_of
        .iter()
        .map(|held| held.iter().filter(|(p, e)| newest.get(p) == Some(e)).map(|(p, e)| (*p, *e)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vnode_holding_a_partition_by_an_older_chain_is_not_read() {
        let stale: BTreeMap<u32, u64> = [(0, 1), (1, 1)].into();
        let live: BTreeMap<u32, u64> = [(0, 2), (1, 1)].into();
        let kept = newest_holders(&[&stale, &live]);
        assert_eq!(kept[0], [(1, 1)].into(), "partition 0 moved on to epoch 2 without it");
        assert_eq!(kept[1], live);
    }
}
