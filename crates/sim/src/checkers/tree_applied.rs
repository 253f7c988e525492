//! Alterations applied as ordered: a copy damaged on its way or on disk is never applied (seed 004
//! point 4).

use super::{Checker, Violation};
use std::collections::BTreeMap;
use waymark_core::alter::AlterRecord;
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-applied",
    property: "every vnode applies, for each place in the order `(term, seq)`, exactly the record the root of \
               that term ordered there",
};

type At = (u64, u64);

pub fn check(ordered: &BTreeMap<At, AlterRecord>, applied: &[(VnodeId, At, AlterRecord)]) -> Vec<Violation> {
    applied
        .iter()
        .filter(|(_, seq, record)| ordered.get(seq).is_some_and(|o| o != record))
        .take(3)
        .map(|(v, seq, record)| {
            let o = &ordered[seq];
            CHECKER.violation(format!(
                "{v} applied alteration {seq:?} as {}={:?}, the root ordered {}={:?}",
                record.key,
                String::from_utf8_lossy(&record.value),
                o.key,
                String::from_utf8_lossy(&o.value)
            ))
        })
        .collect()
}
