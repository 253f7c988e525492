//! Alterations applied as ordered: a copy damaged on its way or on disk is never applied (seed 004
//! point 4).

use super::{Checker, Violation};
use std::collections::BTreeMap;
use waymark_core::alter::{AlterRecord, MetaVersion};
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-applied",
    property: "every vnode applies, for each place in the order `(term, seq)`, exactly the record the root of \
               that term ordered there",
};

/// A vnode applied `record` as the alteration at `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedRecord {
    pub vnode: VnodeId,
    pub at: MetaVersion,
    pub record: AlterRecord,
}

pub fn check(ordered: &BTreeMap<MetaVersion, AlterRecord>, applied: &[AppliedRecord]) -> Vec<Violation> {
    applied
        .iter()
        .filter(|a| ordered.get(&a.at).is_some_and(|o| *o != a.record))
        .take(3)
        .map(|AppliedRecord { vnode: v, at, record }| {
            let o = &ordered[at];
            CHECKER.violation(format!(
                "{v} applied alteration {at} as {}={:?}, the root ordered {}={:?}",
                record.key,
                String::from_utf8_lossy(&record.value),
                o.key,
                String::from_utf8_lossy(&o.value)
            ))
        })
        .collect()
}
