//! A snapshot reads each partition from a vnode that held it at the cut. The server's export asks
//! every store vnode what it held at the cut (`Vnode::holdings_at`) some time after the cut was
//! declared, and the restore takes each partition from one of them; the sim asks the same
//! `EXPORT_AFTER_US` after the operator heard (`World::observe_exports`). What a vnode answers is
//! judged against the placement its own metadata recorded at its `CutFinish` (`holders_at`, what
//! `cut_restore` restores): a learner switched in between the cut and the export holds, in its log
//! up to the cut, only the pages copied by then (bugs/2026-12-07-nemesis-g2).

use super::cut_restore::{counted_in, holders_at};
use super::{names, Checker, Violation};
use crate::world::World;
use waymark_core::cut::holdings::{newest_holders, CutHoldings};

pub const CHECKER: Checker = Checker {
    name: "cut-exports",
    property: "every partition a snapshot's export of a successful cut reads from a vnode (by the newest chain \
               the vnodes held it by, as the server picks), that vnode held as a copy at that cut, by the \
               placement its metadata recorded at its CutFinish",
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
            let node = *node;
            let named: Vec<u32> = kept.keys().copied().filter(|p| !holders[node].contains(p)).collect();
            if !named.is_empty() {
                let evidence = format!(
                    "{} at {} µs named partitions {named:?} to the export of {}, which it did not hold at its \
                     CutFinish (it held {:?})",
                    names(w, [node]),
                    export.at_us,
                    export.cut,
                    holders[node]
                );
                out.push(CHECKER.violation(evidence));
            }
        }
    }
    out
}
