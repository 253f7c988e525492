//! The bounds of a declared cut in real time.
//!
//! Why it must hold: before the process begins no vnode has started the cut, so an acknowledged
//! transaction committed at its first committer before any `CutStart`, and is stamped before the
//! cut everywhere; once it is declared, every vnode has written its `CutFinish`, so anything
//! invoked later prepares — and commits — after it. Without this check a restore that includes
//! nothing passes every other cut check.

use super::{Checker, Violation};
use crate::history::{ClientTxn, Outcome};
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::{CutId, TxId};

pub const CHECKER: Checker = Checker {
    name: "cut-bounds",
    property: "a cut declared successful includes every transaction whose commit was acknowledged before the \
               cut process began, and no transaction invoked after it was declared",
};

/// Checks one declared cut, given the transactions its restore includes on some vnode.
pub fn check_cut(w: &World, cut: CutId, included: &BTreeSet<&TxId>) -> Vec<Violation> {
    let Some(window) = w.history.cut_windows.get(&cut) else {
        return vec![v(format!("{cut} is declared successful but the driver never saw it begin"))];
    };
    let mut out = vec![];
    let writers = w.history.txns.iter().filter(|t| !t.writes.is_empty());
    let mut acked_before =
        writers.clone().filter(|t| t.outcome == Outcome::Committed && t.completed_us < window.begun_us);
    if let Some(t) = acked_before.find(|t| !t.tx.as_ref().is_some_and(|tx| included.contains(tx))) {
        out.push(v(format!(
            "{cut} began at {}us but leaves out {}, acknowledged at {}us",
            window.begun_us,
            describe(t),
            t.completed_us
        )));
    }
    let Some(declared_us) = window.declared_us else {
        return vec![v(format!("{cut} is declared successful but the driver never saw it declared"))];
    };
    let mut invoked_after = writers.filter(|t| t.invoked_us > declared_us);
    if let Some(t) = invoked_after.find(|t| t.tx.as_ref().is_some_and(|tx| included.contains(tx))) {
        out.push(v(format!(
            "{cut} was declared at {declared_us}us but includes {}, invoked at {}us",
            describe(t),
            t.invoked_us
        )));
    }
    out
}

fn describe(t: &ClientTxn) -> String {
    let tx = t.tx.as_ref().map_or("a transaction".to_string(), |tx| tx.to_string());
    let keys: Vec<String> = t.writes.iter().map(|w| String::from_utf8_lossy(&w.key).into_owned()).collect();
    format!("{tx} ({} of client {}, writes {keys:?})", t.kind, t.client)
}

fn v(evidence: String) -> Violation {
    CHECKER.violation(evidence)
}
