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
        let missing: Vec<usize> = holders.iter().copied().filter(|n| !facts.committed[*n].contains_key(tx)).collect();
        if !missing.is_empty() || holders.is_empty() {
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
