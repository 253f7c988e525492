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

    /// Where `CutFinish{cut}` is appended: what this vnode holds is what the cut covers here.
    pub(crate) fn note_holdings(&mut self, cut: CutId) {
        let holdings = self.holdings_now(cut);
        let kept = &mut self.cut.holdings.kept;
        assert!(kept.iter().all(|h| h.cut != cut), "{cut} finished twice on {}", self.cfg.id);
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
