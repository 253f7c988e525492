//! Property: every vnode applies, for each sequence number, exactly the record the root ordered
//! for it — a copy damaged on its way or on disk is never applied (seed 004 point 4).

use std::collections::BTreeMap;
use waymark_core::alter::AlterRecord;
use waymark_core::VnodeId;

pub fn check(ordered: &BTreeMap<u64, AlterRecord>, applied: &[(VnodeId, u64, AlterRecord)]) -> Vec<String> {
    applied
        .iter()
        .filter(|(_, seq, record)| ordered.get(seq).is_some_and(|o| o != record))
        .take(3)
        .map(|(v, seq, record)| {
            let o = &ordered[seq];
            format!(
                "{v} applied alteration {seq} as {}={:?}, the root ordered {}={:?}",
                record.key, record.value, o.key, o.value
            )
        })
        .collect()
}
