//! Property: once faults heal, every working vnode of the tree holds the same metadata (same md5).

use waymark_core::alter::Metadata;
use waymark_core::VnodeId;

pub fn check(metadata: &[(VnodeId, Metadata)]) -> Vec<String> {
    let Some((first, m0)) = metadata.first() else { return vec![] };
    metadata
        .iter()
        .filter(|(_, m)| m.md5() != m0.md5())
        .take(3)
        .map(|(v, m)| {
            format!(
                "{v} has metadata seq {} md5 {:x?}, {first} has seq {} md5 {:x?}",
                m.seq(),
                m.md5(),
                m0.seq(),
                m0.md5()
            )
        })
        .collect()
}
