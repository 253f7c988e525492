//! What the restore filter reads of a record, decoded from a log frame's payload without copying
//! the keys and values a prepare or a commit carries: a snapshot's replay meets every write in the
//! log once and copies only what it keeps of those it restores.
//!
//! The bytes are those of [`Record::encode`] (postcard). The borrowed types below mirror
//! `Record`'s first variants field for field and in order, because postcard names a variant by its
//! index and reads fields in declaration order; `a_view_decodes_what_the_record_decodes` holds the
//! two together. A payload the mirror does not read is decoded by [`Record::decode`], whose error
//! is the one reported.

use crate::ids::{Branch, CutId, PartitionId, Role, TxId, Version, VnodeId};
use crate::record::{CutFinish, Record, RecordError};
use crate::store::ResolvedWrite;
use serde::Deserialize;
use std::borrow::Cow;

/// A write whose key and value borrow from the bytes it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRef<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
    pub version: Version,
    pub deadline_ms: Option<u64>,
}

/// `ResolvedWrite`'s encoding (`store::wire`), borrowed.
#[derive(Deserialize)]
struct WriteRefWire<'a> {
    key: &'a [u8],
    #[serde(borrow)]
    value: crate::bytes::cell::Borrowed<'a>,
    version: Version,
}

impl<'de: 'a, 'a> Deserialize<'de> for WriteRef<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let WriteRefWire { key, value, version } = WriteRefWire::deserialize(d)?;
        let (value, deadline_ms) = value.parts();
        Ok(WriteRef { key, value, version, deadline_ms })
    }
}

impl<'a> From<&'a ResolvedWrite> for WriteRef<'a> {
    fn from(w: &'a ResolvedWrite) -> Self {
        WriteRef { key: &w.key, value: w.value.as_deref(), version: w.version, deadline_ms: w.deadline_ms }
    }
}

impl WriteRef<'_> {
    pub fn to_owned_write(self) -> ResolvedWrite {
        let (key, value) = (self.key.to_vec(), self.value.map(<[u8]>::to_vec));
        ResolvedWrite { key, value, version: self.version, deadline_ms: self.deadline_ms }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordView<'a> {
    /// A branch prepared here. The filter copies what it keeps of its writes until the branch ends.
    Prepared {
        branch: Branch,
        writes: Vec<WriteRef<'a>>,
    },
    /// A branch committed here, with the writes of a 1PC first committer (else none).
    Committed {
        branch: Cow<'a, Branch>,
        writes: Vec<WriteRef<'a>>,
    },
    /// A branch rolled back here (`None`: a 1PC first committer's tombstone).
    RolledBack {
        branch: Option<Cow<'a, Branch>>,
    },
    CutStart {
        cut: CutId,
    },
    CutFinish(Cow<'a, CutFinish>),
    /// A learner dropped its copy of `partition` (one of `partitions`): what it held of it before
    /// is no part of any restore (`catch_up`).
    Reset {
        partition: PartitionId,
        partitions: u32,
    },
    /// A page a learner copied from its partition's primary: committed entries, applied by version.
    Copied {
        writes: Vec<ResolvedWrite>,
    },
    Other,
}

impl<'a> RecordView<'a> {
    /// The view of a decoded record (the simulator's and the tests' logs).
    pub fn of(record: &'a Record) -> RecordView<'a> {
        match record {
            Record::TxPrepared(p) => {
                RecordView::Prepared { branch: p.branch(), writes: p.writes.iter().map(WriteRef::from).collect() }
            }
            Record::TxCommitted { branch, writes, .. } => RecordView::Committed {
                branch: Cow::Borrowed(branch),
                writes: writes.iter().map(WriteRef::from).collect(),
            },
            Record::TxRolledBack { branch, .. } => {
                RecordView::RolledBack { branch: branch.as_ref().map(Cow::Borrowed) }
            }
            Record::CutStart { cut } => RecordView::CutStart { cut: *cut },
            Record::CutFinish(f) => RecordView::CutFinish(Cow::Borrowed(f)),
            Record::PartitionReset { partition, partitions, .. } => {
                RecordView::Reset { partition: *partition, partitions: *partitions }
            }
            Record::Copied { writes, .. } => RecordView::Copied { writes: writes.clone() },
            _ => RecordView::Other,
        }
    }

    /// Decodes the payload of a frame of `kind`, checking it as [`Record::decode`] does; a commit's
    /// keys and values borrow from `bytes`.
    pub fn decode(kind: u8, bytes: &'a [u8]) -> Result<RecordView<'a>, RecordError> {
        const PREPARED: u8 = 2;
        const COMMITTED: u8 = 3;
        const ROLLED_BACK: u8 = 4;
        if !matches!(kind, PREPARED | COMMITTED | ROLLED_BACK) {
            return Record::decode(kind, bytes).map(RecordView::of_rare);
        }
        match postcard::from_bytes::<Mirror<'a>>(bytes) {
            Ok(Mirror::TxPrepared(p)) if kind == PREPARED => {
                let branch = Branch { tx: p.tx, upstream: p.upstream, role: p.role };
                Ok(RecordView::Prepared { branch, writes: p.writes })
            }
            Ok(Mirror::TxCommitted { branch, writes, .. }) if kind == COMMITTED => {
                Ok(RecordView::Committed { branch: Cow::Owned(branch), writes })
            }
            Ok(Mirror::TxRolledBack { branch, .. }) if kind == ROLLED_BACK => {
                Ok(RecordView::RolledBack { branch: branch.map(Cow::Owned) })
            }
            // The record decoder names what is wrong (a kind mismatch, bad bytes).
            _ => match Record::decode(kind, bytes) {
                Err(e) => Err(e),
                Ok(_) => Err(RecordError::ViewMismatch { kind }),
            },
        }
    }

    /// The view of a decoded record of a kind the mirror does not cover (none of them borrows).
    fn of_rare(record: Record) -> RecordView<'static> {
        match record {
            Record::CutStart { cut } => RecordView::CutStart { cut },
            Record::CutFinish(f) => RecordView::CutFinish(Cow::Owned(f)),
            Record::PartitionReset { partition, partitions, .. } => RecordView::Reset { partition, partitions },
            Record::Copied { writes, .. } => RecordView::Copied { writes },
            _ => RecordView::Other,
        }
    }
}

/// `Record`'s variants up to `TxRolledBack`, in its order, with a commit's writes borrowed.
#[allow(clippy::large_enum_variant)] // A value of one decode, never stored: boxing would cost an allocation.
#[derive(Deserialize)]
enum Mirror<'a> {
    /// Never decoded here (its kind is not one of the mirror's), but it holds index 0.
    Boot {
        _incarnation: u32,
    },
    #[serde(borrow)]
    TxPrepared(PreparedMirror<'a>),
    TxCommitted {
        branch: Branch,
        _tx_cut: Option<CutId>,
        #[serde(borrow)]
        writes: Vec<WriteRef<'a>>,
    },
    TxRolledBack {
        _tx: TxId,
        branch: Option<Branch>,
    },
}

/// `record::Prepared` field for field; the fields the filter does not read are decoded (and so
/// checked) all the same.
#[derive(Deserialize)]
struct PreparedMirror<'a> {
    tx: TxId,
    #[serde(borrow)]
    writes: Vec<WriteRef<'a>>,
    _first_committer: VnodeId,
    upstream: VnodeId,
    _downstream: Vec<VnodeId>,
    _one_phase: bool,
    role: Role,
    _after: Vec<TxId>,
    _read_locks: Vec<&'a [u8]>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Prepared;

    fn near() -> VnodeId {
        VnodeId::new("store0", "node001")
    }

    fn branch() -> Branch {
        Branch { tx: TxId { near: near(), incarnation: 2, seq: 9 }, upstream: near(), role: Role::Backup }
    }

    fn write(key: &str, value: Option<&str>) -> ResolvedWrite {
        ResolvedWrite { key: key.into(), value: value.map(Into::into), version: 7, deadline_ms: None }
    }

    fn records() -> Vec<Record> {
        let b = branch();
        let prepared = Prepared {
            tx: b.tx.clone(),
            writes: vec![write("k", Some("v")), write("gone", None)],
            first_committer: near(),
            upstream: near(),
            downstream: vec![VnodeId::new("store1", "node002")],
            one_phase: true,
            role: Role::Backup,
            after: vec![b.tx.clone()],
            read_locks: vec![b"r".to_vec()],
        };
        vec![
            Record::Boot { incarnation: 3 },
            Record::TxPrepared(prepared),
            Record::TxCommitted { branch: b.clone(), tx_cut: Some(CutId(4)), writes: vec![write("a", Some("1"))] },
            Record::TxCommitted { branch: b.clone(), tx_cut: None, writes: vec![] },
            Record::TxRolledBack { tx: b.tx.clone(), branch: Some(b.clone()) },
            Record::TxRolledBack { tx: b.tx.clone(), branch: None },
            Record::TxDecided { tx: b.tx.clone(), tx_cut: None },
            Record::CutStart { cut: CutId(4) },
            Record::CutFinish(CutFinish { cut: CutId(4), before: [b.tx.clone()].into(), after: Default::default() }),
            Record::AlterTerm { term: crate::alter::Term(5) },
            Record::PartitionReset { partition: PartitionId(3), partitions: 8, since: 4 },
            Record::Copied { partition: PartitionId(3), writes: vec![write("c", Some("2"))] },
        ]
    }

    #[test]
    fn a_view_decodes_what_the_record_decodes() {
        for record in records() {
            let bytes = record.encode();
            let view = RecordView::decode(record.kind(), &bytes).unwrap();
            assert_eq!(view, RecordView::of(&record), "{record:?}");
        }
    }

    /// Every truncation and every byte changed: the view fails exactly when the record does.
    #[test]
    fn a_view_rejects_what_the_record_rejects() {
        for record in records() {
            let bytes = record.encode();
            let kind = record.kind();
            let mut cases: Vec<Vec<u8>> = (0..bytes.len()).map(|n| bytes[..n].to_vec()).collect();
            for i in 0..bytes.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut b = bytes.clone();
                    b[i] ^= flip;
                    cases.push(b);
                }
            }
            for case in cases {
                let owned = Record::decode(kind, &case);
                let view = RecordView::decode(kind, &case);
                assert_eq!(owned.is_ok(), view.is_ok(), "{record:?} as {case:?}");
                if let (Ok(owned), Ok(view)) = (&owned, &view) {
                    assert_eq!(*view, RecordView::of(owned));
                }
            }
        }
    }
}
