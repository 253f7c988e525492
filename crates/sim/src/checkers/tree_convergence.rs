//! Convergence of the tree's metadata once faults heal. A store vnode's leaf view is the managers'
//! copy narrowed to what it needs.

use super::{Checker, Violation};
use waymark_core::alter::{Metadata, View};
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-convergence",
    property: "once faults heal, every vnode of the tree is working and holds the same metadata (same md5), as \
               its view keeps it",
};

pub fn check(metadata: &[(VnodeId, Metadata)]) -> Vec<Violation> {
    let Some((first, m0)) = metadata.iter().find(|(_, m)| m.view() == View::Full) else { return vec![] };
    metadata
        .iter()
        .filter(|(_, m)| m.md5() != m0.project(m.view()).md5())
        .take(3)
        .map(|(v, m)| {
            CHECKER.violation(format!(
                "{v} has metadata {} md5 {:x?} ({:?} view), {first} has {} md5 {:x?}",
                m.version(),
                m.md5(),
                m.view(),
                m0.version(),
                m0.md5()
            ))
        })
        .collect()
}
