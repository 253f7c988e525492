//! Durability of acknowledged commits.

use super::{names, Checker, LogFacts, Violation};
use crate::world::World;

pub const CHECKER: Checker = Checker {
    name: "durability",
    property: "every commit acknowledged to a client is committed, once everything has healed and recovered, on \
               every replica of every partition it wrote",
};

pub fn check(w: &World, facts: &LogFacts) -> Vec<Violation> {
    let mut out = vec![];
    for t in w.history.committed().filter(|t| !t.written.is_empty()) {
        let Some(tx) = &t.tx else { continue };
        let holders = facts.replicas_of(w, tx);
        let mut missing: Vec<usize> =
            holders.iter().copied().filter(|n| !facts.committed[*n].contains_key(tx)).collect();
        let rejoined = rejoined_copies_behind(w, facts, tx);
        let judged = !holders.is_empty() || rejoined.is_some();
        missing.extend(rejoined.unwrap_or_default());
        if !missing.is_empty() || !judged {
            out.push(CHECKER.violation(format!(
                "{tx} was acknowledged to client {} at {}us but is not committed on {} (writes {:?})",
                t.client,
                t.completed_us,
                names(w, missing),
                t.written.iter().map(|w| String::from_utf8_lossy(&w.key).into_owned()).collect::<Vec<_>>()
            )));
        }
    }
    out
}

/// The copies at the end that rejoined a partition `tx` wrote (catch-up) and whose store holds one
/// of its keys at a version older than its write: their logs name the pages they copied, not the
/// transactions, so they are judged by version. `None` when no such copy holds a key it wrote.
fn rejoined_copies_behind(w: &World, facts: &LogFacts, tx: &waymark_core::TxId) -> Option<Vec<usize>> {
    let p = &w.placement;
    let mut judged = false;
    let mut behind = vec![];
    for wr in facts.writes.get(tx).into_iter().flatten() {
        let part = p.partition_of(&wr.key);
        for v in p.copies(part) {
            let n = w.store_index(v);
            let Some(vnode) = w.nodes[n].vnode.as_ref().filter(|_| facts.rejoined[n].contains(&part.0)) else {
                continue;
            };
            judged = true;
            if vnode.store().version(&wr.key) < wr.version && !behind.contains(&n) {
                behind.push(n);
            }
        }
    }
    judged.then_some(behind)
}
