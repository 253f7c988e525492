//! Atomicity of commits across replicas, once the run has settled.

use super::{copies, names, Checker, Cluster, LogFacts, Violation};
use crate::world::World;

pub const CHECKER: Checker = Checker {
    name: "atomicity",
    property: "once quiescent, a transaction is committed on every replica of every partition it wrote, or on \
               none; and nothing is left in doubt",
};

pub fn check(w: &World, facts: &LogFacts) -> Vec<Violation> {
    let mut out = all_or_nothing(w, facts);
    for (i, node) in w.nodes.iter().enumerate() {
        let Some(v) = &node.vnode else {
            out.push(CHECKER.violation(format!("{} is still down at the end", names(w, [i]))));
            continue;
        };
        if v.prepared_count() > 0 {
            out.push(CHECKER.violation(format!(
                "{} still has {} transactions in doubt after settling",
                v.id(),
                v.prepared_count()
            )));
        }
    }
    out
}

/// Every transaction's writes are committed on every copy (each replica of each key it wrote) or
/// on none; the explorer checks its terminal states with this too.
pub fn all_or_nothing(c: &impl Cluster, facts: &LogFacts) -> Vec<Violation> {
    let mut out = vec![];
    for tx in facts.writes.keys() {
        let (with, without): (Vec<_>, Vec<_>) =
            facts.copies_of(c, tx).into_iter().partition(|(n, k)| facts.committed_on(*n, tx, k));
        if !with.is_empty() && !without.is_empty() {
            out.push(CHECKER.violation(format!(
                "{tx} is committed on {} but not on {}",
                copies(c, &with),
                copies(c, &without)
            )));
        }
    }
    out
}
