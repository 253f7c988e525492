//! Atomicity of commits across replicas, once the run has settled.

use super::{names, Checker, LogFacts, Violation};
use crate::world::World;

pub const CHECKER: Checker = Checker {
    name: "atomicity",
    property: "once quiescent, a transaction is committed on every replica of every partition it wrote, or on \
               none; and nothing is left in doubt",
};

pub fn check(w: &World, facts: &LogFacts) -> Vec<Violation> {
    let mut out = vec![];
    for tx in facts.writes.keys() {
        let holders = facts.replicas_of(w, tx);
        let (with, without): (Vec<usize>, Vec<usize>) = holders.iter().partition(|n| facts.committed[**n].contains(tx));
        if !with.is_empty() && !without.is_empty() {
            out.push(CHECKER.violation(format!(
                "{tx} is committed on {} but not on {}",
                names(w, with),
                names(w, without)
            )));
        }
    }
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
