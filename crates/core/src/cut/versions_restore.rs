//! The restore filter of the `versions` strategy (seed 002): a vnode's state at cut C is every
//! transaction committed before its `VersionsMap{C}` record whose version is below its near's
//! entry in the map and that is not in the skip set of `VersionsSkip{C}`. Like `cut::restore`, a
//! pure function of a base checkpoint and the log that follows it.
//!
//! Seed 002 problem 4 ("no safe previous record to restore if incremental snapshots were
//! created; need to filter all history"): a transaction committed before cut C-1's map record
//! can be excluded from C-1 (its version was above the map) and included in C, so a restore to C
//! cannot start from C-1's restored state. It can start from any checkpoint taken before cut C
//! began: cut processes never overlap (the coordinator ends one before it begins the next), so
//! everything committed before C began was registered before any near fixed C's `snp_version`
//! and is included. Our catalog keeps, per cut, a base checkpoint from before it (the one in
//! force at the vnode's first record of the cut), which is such a record.

use crate::cut::restore::{Checkpoint, RestoreError, Restored};
use crate::cut::versions::SnapshotVersions;
use crate::ids::{CutId, TxId};
use crate::record::Record;
use std::collections::BTreeSet;

/// What phases 2 and 3 of cut `cut` logged on one vnode: what a restore to it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionsCutRecords {
    pub cut: CutId,
    pub map: SnapshotVersions,
    pub skip: BTreeSet<TxId>,
}

impl VersionsCutRecords {
    /// Whether the cut includes `tx` by its version (its commit record must also precede the map).
    pub fn includes(&self, tx: &TxId) -> bool {
        self.map.below(tx) && !self.skip.contains(tx)
    }
}

/// Finds the map and skip records of `cut` in a log, if both phases finished there.
pub fn find_versions_records<'a>(log: impl IntoIterator<Item = &'a Record>, cut: CutId) -> Option<VersionsCutRecords> {
    let mut map = None;
    for r in log {
        match r {
            Record::VersionsMap { cut: c, map: m } if *c == cut => map = Some(m.clone()),
            Record::VersionsSkip { cut: c, skip } if *c == cut => {
                let map = map?;
                return Some(VersionsCutRecords { cut, map, skip: skip.clone() });
            }
            _ => {}
        }
    }
    None
}

/// Replays `log` over `base`, keeping the transactions `target` includes that committed before
/// its `VersionsMap` record.
pub fn restore_to_versions_cut<'a>(
    base: Checkpoint,
    log: impl IntoIterator<Item = &'a Record>,
    target: &VersionsCutRecords,
) -> Result<Restored, RestoreError> {
    let Checkpoint { mut store, mut prepared } = base;
    let mut included = BTreeSet::new();
    for (index, record) in log.into_iter().enumerate() {
        match record {
            Record::TxPrepared(p) => drop(prepared.insert(p.branch(), p.writes.clone())),
            Record::TxRolledBack { branch: Some(branch), .. } => drop(prepared.remove(branch)),
            Record::TxCommitted { branch, writes, .. } => {
                let tx = &branch.tx;
                let writes = super::restore::committed_writes(&mut prepared, branch, writes, index)?;
                if target.includes(tx) {
                    store.apply_all(&writes);
                    included.insert(tx.clone());
                }
            }
            // A learner's reset and the pages it copied, as every replay of its log does them
            // (`cut::restore`): what it copied was committed before any cut since began (a
            // switch waits for running cuts), so the cut includes it all.
            Record::PartitionReset { partition, partitions, .. } => {
                store.drop_partition(*partition, *partitions);
                let of_p = |k: &[u8]| crate::placement::partition_of(k, *partitions) == *partition;
                prepared.values_mut().for_each(|writes| writes.retain(|w| *partitions == 0 || !of_p(&w.key)));
            }
            Record::Copied { writes, .. } => store.apply_all(writes),
            Record::VersionsMap { cut, map } if *cut == target.cut => {
                if *map != target.map {
                    return Err(RestoreError::FinishMismatch { cut: target.cut });
                }
                return Ok(Restored { store, digests: Default::default(), included });
            }
            _ => {}
        }
    }
    Err(RestoreError::NoFinish { cut: target.cut })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::versions::TxVersion;
    use crate::ids::{Branch, Role, VnodeId};
    use crate::store::ResolvedWrite;

    fn tx(near: &str, seq: u32) -> TxId {
        TxId { near: VnodeId::new("store0", near), incarnation: 0, seq }
    }

    fn commit(t: &TxId, key: &str) -> Record {
        let branch = Branch { tx: t.clone(), upstream: t.near.clone(), role: Role::Primary };
        let write =
            ResolvedWrite { key: key.as_bytes().to_vec(), value: Some(b"v".to_vec()), version: 1, deadline_ms: None };
        Record::TxCommitted { branch, tx_cut: None, writes: vec![write] }
    }

    #[test]
    fn the_versions_filter_keeps_versions_below_the_map_minus_the_skip_set_up_to_the_map_record() {
        let cut = CutId(1);
        let mut map = SnapshotVersions::default();
        map.0.insert(VnodeId::new("store0", "a"), TxVersion { incarnation: 0, seq: 5 });
        map.0.insert(VnodeId::new("store0", "b"), TxVersion { incarnation: 0, seq: 2 });
        let (below, above, skipped, late, unknown) = (tx("a", 4), tx("b", 2), tx("a", 3), tx("b", 1), tx("c", 0));
        let log = vec![
            commit(&below, "k1"),
            commit(&above, "k2"),
            commit(&skipped, "k3"),
            commit(&unknown, "k4"),
            Record::VersionsMap { cut, map: map.clone() },
            commit(&late, "k5"),
            Record::VersionsSkip { cut, skip: [skipped.clone()].into() },
        ];
        let records = find_versions_records(&log, cut).unwrap();
        let restored = restore_to_versions_cut(Checkpoint::default(), &log, &records).unwrap();
        assert_eq!(restored.included, [below].into(), "above the map, skipped, unknown near, after the map: out");
        assert_eq!(find_versions_records(&log[..5], cut), None, "no skip record, no restore");
    }
}
