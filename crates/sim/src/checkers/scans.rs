//! Scans of the whole keyspace (`--scans`, `txn::scan`) against the keys that existed throughout.

use super::{Checker, Violation};
use crate::history::Outcome;
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::{Key, WriteOp};

pub const CHECKER: Checker = Checker {
    name: "scans",
    property: "every scan of the whole keyspace that ran to its end returned every key a transaction acknowledged before the scan began gave a value, when no transaction may ever have deleted it",
};

/// The workloads delete nothing, so every key an acknowledged commit gave a value stays; a key
/// some transaction might have deleted (committed or not known) is left out.
pub fn check(w: &World) -> Vec<Violation> {
    let mut out = vec![];
    if w.history.scans.is_empty() {
        return out;
    }
    let deleted: BTreeSet<&Key> = w
        .history
        .txns
        .iter()
        .flat_map(|t| &t.writes)
        .filter(|wr| matches!(wr.op, WriteOp::Del))
        .map(|wr| &wr.key)
        .collect();
    for scan in &w.history.scans {
        let owed: BTreeSet<&Key> = w
            .history
            .txns
            .iter()
            .filter(|t| t.outcome == Outcome::Committed && t.completed_us < scan.began_us)
            .flat_map(|t| &t.written)
            .filter(|wr| wr.value.is_some() && !deleted.contains(&wr.key))
            .map(|wr| &wr.key)
            .collect();
        let missed: Vec<String> =
            owed.iter().filter(|k| !scan.keys.contains(**k)).map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        if !missed.is_empty() {
            out.push(CHECKER.violation(format!(
                "client {}'s scan from {} us to {} us ({} pages, {} keys) missed {:?}",
                scan.client,
                scan.began_us,
                scan.ended_us,
                scan.pages,
                scan.keys.len(),
                missed
            )));
        }
    }
    out
}
