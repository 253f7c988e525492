//! The records the core appends to a vnode's write-ahead log, and their byte encoding.

use crate::alter::{AlterSeq, Term};
use crate::cut::versions::{SnapshotVersions, TxVersion};
use crate::ids::{Branch, CutId, Key, PartitionId, Role, TxId, VnodeId};
use crate::store::ResolvedWrite;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One WAL record. The driver stores `encode()`'s bytes under `kind()`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Record {
    /// A vnode (re)started; the count of these in a log is the vnode's incarnation.
    Boot { incarnation: u32 },
    /// A participant promised to commit `tx` if asked: its writes here, who decides, whom to ask.
    TxPrepared(Prepared),
    /// `tx` committed here. `writes` is non-empty only when this vnode is a 1PC first committer,
    /// which commits without preparing. `tx_cut` is the first committer's stamp (seed 000 §5.2).
    TxCommitted { branch: Branch, tx_cut: Option<CutId>, writes: Vec<ResolvedWrite> },
    /// A branch of `tx` rolled back here; `upstream: None` is the tombstone a 1PC first committer
    /// writes when it presumes abort, so that a late prepare can never commit what it already
    /// reported as aborted.
    TxRolledBack { tx: TxId, branch: Option<Branch> },
    /// The near vnode decided to commit `tx` (2PC): it is the first committer.
    TxDecided { tx: TxId, tx_cut: Option<CutId> },
    /// Seed 000 §4: this vnode's local cut `cut` started here.
    CutStart { cut: CutId },
    /// Seed 000 §8.1: every transaction that was in flight at `CutStart` finished.
    CutFinish(CutFinish),
    /// The cut coordinator began cut `cut` (its ids must increase across restarts).
    CutBegin { cut: CutId },
    /// The cut coordinator's verdict on `cut`.
    CutEnd { cut: CutId, ok: bool },
    /// Alteration `seq` of the cluster metadata, as sent (the driver reads it back after sync).
    /// Writing it does not apply it: only `AlterApplied` does, on replay as in memory.
    Alteration { seq: AlterSeq, bytes: Vec<u8> },
    /// Alteration `(term, seq)` was read back intact and applied (seed 004 point 4): the record
    /// a replay applies. Written before the vnode confirms it to anyone.
    AlterApplied { term: Term, seq: AlterSeq, record: crate::alter::AlterRecord },
    /// The metadata, cloned whole from the parent (this vnode had missed alterations).
    AlterClone { metadata: crate::alter::Metadata },
    /// The highest root term this vnode promised itself to (it never promises a lower or equal
    /// one again, across restarts).
    AlterTerm { term: Term },
    /// `versions` strategy, seed 002 §4.1–4.2: this vnode's local state at phase 1 of `cut`, and
    /// the `snp_version` it fixed as a near.
    VersionsLocalState { cut: CutId, snp: TxVersion },
    /// Seed 002 §6.3: every near's `snp_version`, logged once every branch below it finished here.
    /// A restore of `cut` replays the log up to this record.
    VersionsMap { cut: CutId, map: SnapshotVersions },
    /// Seed 002 §7.2: the transactions registered after their near fixed `snp_version` with a
    /// smaller version; the restore leaves them out.
    VersionsSkip { cut: CutId, skip: BTreeSet<TxId> },
    /// `versions`: this vnode prepared, for the first time, a transaction after `cut` — it holds
    /// guard state for `cut` in memory. After a restart it may not take part in `cut`.
    VersionsSideSeen { cut: CutId },
    /// A learner drops what it held of `partition` (one of `partitions`), joining it anew at
    /// chain epoch `since` (`catch_up`): its store's entries of it, and the writes to it of the
    /// branches it holds prepared.
    PartitionReset { partition: PartitionId, partitions: u32, since: u64 },
    /// A page of `partition` copied from its primary (`catch_up`): committed entries, applied by
    /// version like any commit.
    Copied { partition: PartitionId, writes: Vec<ResolvedWrite> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Prepared {
    pub tx: TxId,
    pub writes: Vec<ResolvedWrite>,
    /// The vnode whose commit decides `tx`: the near in 2PC, the last backup in 1PC.
    pub first_committer: VnodeId,
    /// Who this vnode answers (the near for a primary, the primary or previous hop for a backup).
    pub upstream: VnodeId,
    /// The vnodes this one forwards to (backups, or the rest of a 1PC chain).
    pub downstream: Vec<VnodeId>,
    pub one_phase: bool,
    pub role: Role,
    /// 1PC: the transactions this one was evaluated after (`txn::locks`).
    pub after: Vec<TxId>,
    /// A primary's keys locked for the transaction's reads and not written here: a restart locks
    /// them again with the written ones, so a crash cannot let a write in under a read this
    /// vnode validated and acknowledged (`txn::recovery`).
    pub read_locks: Vec<Key>,
}

impl Prepared {
    pub fn branch(&self) -> Branch {
        Branch { tx: self.tx.clone(), upstream: self.upstream.clone(), role: self.role }
    }
}

/// Seed 000 §8.1 / Ignite's `IncrementalSnapshotFinishRecord`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CutFinish {
    pub cut: CutId,
    /// Transactions in flight at `CutStart` that committed on the before side.
    pub before: BTreeSet<TxId>,
    /// Transactions in flight at `CutStart` that committed on the after side.
    pub after: BTreeSet<TxId>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("record kind {found} does not match its payload (expected kind {expected})")]
    KindMismatch { found: u8, expected: u8 },
    #[error("record payload of kind {kind} cannot be decoded: {source}")]
    Decode { kind: u8, source: postcard::Error },
    #[error("record of kind {kind} decodes as a record but not as the restore's view of it (a bug in record_view)")]
    ViewMismatch { kind: u8 },
}

impl Record {
    /// The WAL kind byte: lets tools skim a log without decoding every payload.
    pub fn kind(&self) -> u8 {
        match self {
            Record::Boot { .. } => 1,
            Record::TxPrepared(_) => 2,
            Record::TxCommitted { .. } => 3,
            Record::TxRolledBack { .. } => 4,
            Record::TxDecided { .. } => 5,
            Record::CutStart { .. } => 6,
            Record::CutFinish(_) => 7,
            Record::CutBegin { .. } => 8,
            Record::CutEnd { .. } => 9,
            Record::Alteration { .. } => 10,
            Record::AlterClone { .. } => 11,
            Record::AlterTerm { .. } => 12,
            Record::AlterApplied { .. } => 13,
            Record::VersionsLocalState { .. } => 14,
            Record::VersionsMap { .. } => 15,
            Record::VersionsSkip { .. } => 16,
            Record::VersionsSideSeen { .. } => 17,
            Record::PartitionReset { .. } => 18,
            Record::Copied { .. } => 19,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("records always serialize")
    }

    pub fn decode(kind: u8, bytes: &[u8]) -> Result<Record, RecordError> {
        let r: Record = postcard::from_bytes(bytes).map_err(|source| RecordError::Decode { kind, source })?;
        if r.kind() != kind {
            return Err(RecordError::KindMismatch { found: kind, expected: r.kind() });
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let tx = TxId { near: VnodeId::new("store0", "h1"), incarnation: 1, seq: 7 };
        let branch = Branch { tx, upstream: VnodeId::new("store1", "h2"), role: Role::Backup };
        let r = Record::TxCommitted { branch, tx_cut: Some(CutId(3)), writes: vec![] };
        assert_eq!(Record::decode(r.kind(), &r.encode()).unwrap(), r);
        assert!(Record::decode(r.kind(), &[0xff, 0xff, 0xff]).is_err());
        assert!(matches!(Record::decode(9, &r.encode()), Err(RecordError::KindMismatch { .. })));
    }
}
