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
                let writes = match writes.is_empty() {
                    false => writes.clone(),
                    true => prepared
                        .remove(branch)
                        .ok_or_else(|| RestoreError::CommitWithoutPrepare { tx: tx.clone(), index })?,
                };
                if target.includes(tx) {
                    store.apply_all(&writes);
                    included.insert(tx.clone());
                }
            }
            Record::VersionsMap { cut, map } if *cut == target.cut => {
                if *map != target.map {
                    return Err(RestoreError::FinishMismatch { cut: target.cut });
                }
                return Ok(Restored { store, included });
            }
            _ => {}
        }
    }
    Err(RestoreError::NoFinish { cut: target.cut })
}
