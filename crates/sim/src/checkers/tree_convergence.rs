//! Property: once faults heal, every working vnode of the tree holds the same metadata (same md5),
//! as its view keeps it: a store vnode's leaf view is the managers' copy narrowed to what it needs.

use waymark_core::alter::{Metadata, View};
use waymark_core::VnodeId;

pub fn check(metadata: &[(VnodeId, Metadata)]) -> Vec<String> {
    let Some((first, m0)) = metadata.iter().find(|(_, m)| m.view() == View::Full) else { return vec![] };
    metadata
        .iter()
        .filter(|(_, m)| m.md5() != m0.project(m.view()).md5())
        .take(3)
        .map(|(v, m)| {
            format!(
                "{v} has metadata {:?} md5 {:x?} ({:?} view), {first} has {:?} md5 {:x?}",
                m.version(),
                m.md5(),
                m.view(),
                m0.version(),
                m0.md5()
            )
        })
        .collect()
}
