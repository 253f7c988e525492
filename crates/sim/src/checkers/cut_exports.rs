//! A snapshot reads each partition from a vnode that held it at the cut. The server's export asks
//! every store vnode what it held at the cut (`Vnode::holdings_at`) some time after the cut was
//! declared, and the restore takes each partition from one of them; the sim asks the same
//! `EXPORT_AFTER_US` after the operator heard (`World::observe_exports`). What the export would
//! read is judged by the vnode's log: no partition it was still learning at its `CutFinish` — a
//! learner switched in between the cut and the export holds, in its log up to the cut, only the
//! pages copied by then (bugs/2026-12-07-nemesis-g2).

use super::cut_restore::{counted_in, holders_at};
use super::{names, Checker, Cluster, Violation};
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::cut::holdings::{newest_holders, CutHoldings};
use waymark_core::{PartitionId, Record};

pub const CHECKER: Checker = Checker {
    name: "cut-exports",
    property: "no partition a snapshot's export of a successful cut reads from a vnode (by the newest chain the \
               vnodes held it by, as the server picks) is one that vnode was still learning at its CutFinish: \
               not named a copy by its metadata then, and dropped before (reset) or never held",
};

pub fn check(w: &World) -> Vec<Violation> {
    let mut out = vec![];
    for export in &w.history.exports {
        let holders = holders_at(w, export.cut);
        // A vnode that held partitions at the cut and is down at the export: the server asks every
        // host the cut reached, and one that does not answer fails the snapshot — nothing is read.
        let running = |node: usize| export.held.iter().any(|(n, _)| *n == node);
        if (0..holders.len()).any(|node| !holders[node].is_empty() && !running(node)) {
            continue;
        }
        // A vnode the cut left out (its host recorded dead at START) is not asked (`hosts_down`).
        let asked: Vec<(usize, &CutHoldings)> = export
            .held
            .iter()
            .filter_map(|(node, held)| Some((*node, held.as_ref()?)))
            .filter(|(node, _)| counted_in(w, *node, export.cut) != Some(false))
            .collect();
        // What the snapshot reads from each, as the server decides it.
        let kept = newest_holders(&asked.iter().map(|(_, h)| &h.epochs).collect::<Vec<_>>());
        for ((node, _), kept) in asked.iter().zip(kept) {
            let learning = learning_at_finish(w, *node, export.cut);
            let named: Vec<u32> = kept.keys().copied().filter(|p| learning.contains(p)).collect();
            if !named.is_empty() {
                let evidence = format!(
                    "{} at {} µs named partitions {named:?} to the export of {}, which it was still learning at \
                     its CutFinish",
                    names(w, [*node]),
                    export.at_us,
                    export.cut,
                );
                out.push(CHECKER.violation(evidence));
            }
        }
    }
    out
}

/// The partitions whose copy vnode `node` cannot have held whole at its `CutFinish` of `cut`, by
/// its log: those its metadata then did not name it a copy of, and which it had dropped before
/// (a `PartitionReset`: it was learning them again) or never held (not a copy at genesis either).
///
/// Why not every partition outside its chain by that metadata: a vnode routes by the chain it
/// adopted, which may lag the metadata (a failover's new chain is adopted once a majority holds
/// it). A vnode that never dropped its copy and still routes by the older chain at its `CutFinish`
/// holds every commit of that chain (each needs it), and a copy that adopted the newer chain
/// reports its higher epoch, which `newest_holders` prefers (append matrix seeds 134 and 295,
/// expiry 861).
fn learning_at_finish(w: &World, node: usize, cut: waymark_core::CutId) -> BTreeSet<u32> {
    let log = w.log(node);
    let Some(at) = log.iter().position(|r| matches!(r, Record::CutFinish(f) if f.cut == cut)) else {
        return BTreeSet::new();
    };
    let reset: BTreeSet<u32> = log[..at]
        .iter()
        .filter_map(|r| match r {
            Record::PartitionReset { partition, .. } => Some(partition.0),
            _ => None,
        })
        .collect();
    let (Some(now), Some(genesis)) = (super::placement_at(w, node, at + 1), Cluster::genesis(w)) else {
        return reset;
    };
    let Some(genesis) = waymark_core::alter::cluster::placement(genesis) else { return reset };
    let me = w.id(node);
    let copy_of = |placement: &waymark_core::Placement, p: u32| placement.copies(PartitionId(p)).contains(me);
    (0..now.partitions()).filter(|p| !copy_of(&now, *p) && (reset.contains(p) || !copy_of(&genesis, *p))).collect()
}
