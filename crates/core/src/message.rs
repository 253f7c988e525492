//! What vnodes say to each other. Every message travels in an `Envelope` whose `cut` field is the
//! colour of seed 000 §5 (Mattern's rule): set while the sender runs a cut.

use crate::cut::versions::{SnapshotVersions, TxVersion};
use crate::ids::{CutId, Key, Role, TxId, Value, Version, VnodeId};
use crate::store::{ReadCheck, ResolvedWrite, Write};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Envelope {
    pub from: VnodeId,
    pub to: VnodeId,
    /// The sender's running cut, on transaction messages only.
    pub cut: Option<CutId>,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Body {
    Txn(TxnMsg),
    Cut(CutMsg),
    /// Alterations of cluster metadata over the tree (never coloured).
    Alter(crate::alter::AlterMsg),
    /// A learner's copy of a partition (`catch_up`; never coloured).
    Copy(crate::catch_up::CopyMsg),
}

/// Why a transaction did not commit, as its client is told.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AbortReason {
    /// Another transaction holds a lock on `key` (no-wait locking).
    LockConflict { key: Key },
    /// A watched key changed since the client read it.
    WatchFailed { key: Key },
    /// `INCRBY` on a value that is not an integer.
    NotAnInteger { key: Key },
    /// Not every participant answered in time.
    Timeout,
    /// The transaction was resolved as aborted by its first committer (presumed abort).
    PresumedAbort,
    /// `versions` strategy: `key` was written by a transaction after a running snapshot, and this
    /// one is before it — it would be restored with a read or write of an excluded transaction.
    SnapshotOrder { key: Key },
    /// `blocking` strategy: this vnode has written its cut marker and takes no prepare until
    /// the cut ends, so that no transaction commits before the marker on one replica and after
    /// it on another.
    CutMarkerWritten,
    /// The sender routed by another epoch of the placement than the receiver holds (one of them
    /// has not yet applied a promotion): retry once both agree (`Placement::epoch_sum`).
    StalePlacement,
    /// The partition's primary is on a host the metadata records dead and no replica has taken
    /// over yet: retry in a moment (Redis Cluster's `-TRYAGAIN`).
    FailingOver,
    /// A write the primary evaluated (`APPEND`) would leave `key` past the value limit.
    ValueTooLarge { key: Key },
    /// The primary's host holds `limits.maxmemory_bytes` of data or more (`Input::MemoryLimit`):
    /// a transaction that stores a value is refused, as Redis's `noeviction` refuses writes;
    /// one that only deletes goes on.
    OutOfMemory,
    /// A write the primary evaluated (`INCRBY`, `APPEND`) names a collection (`collection`): the
    /// client evaluates the command itself, and answers Redis's `WRONGTYPE`.
    WrongType { key: Key },
    /// The transaction drops a collection of more than `collection::DROP_INLINE_MAX` elements.
    CollectionTooLarge { key: Key },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PrepareWrites {
    /// From the near vnode to a primary: evaluate under lock.
    Unresolved(Vec<Write>),
    /// From a primary down its chain: already evaluated.
    Resolved(Vec<ResolvedWrite>),
}

/// The outcome of a transaction as its first committer knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxStatus {
    Committed {
        tx_cut: Option<CutId>,
    },
    Aborted,
    /// The first committer has not decided yet; ask again later.
    Pending,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnMsg {
    Prepare {
        tx: TxId,
        reads: Vec<ReadCheck>,
        writes: PrepareWrites,
        one_phase: bool,
        first_committer: VnodeId,
        /// 1PC: the rest of the chain after the receiver. 2PC: the receiver's backups.
        downstream: Vec<VnodeId>,
        /// 1PC: transactions whose uncommitted writes this one was evaluated on; the first
        /// committer commits it only after them (`txn::locks`).
        after: Vec<TxId>,
        /// The sender's `Placement::epoch_sum` over the keys this message carries: the receiver
        /// refuses it unless its own sum over them is the same.
        epoch: u64,
    },
    /// `Ok` carries the values written (for `INCRBY` replies); in 1PC, also the first committer's stamp.
    /// On a refusal, `tx_cut` is the cut its reason reveals: a `WATCH` failed on a value written by
    /// a transaction stamped with a cut not yet started everywhere (the near holds the abort).
    /// `role` is the answering branch's: `Primary` answers the near, `Backup` its upstream branch.
    PrepareAck {
        tx: TxId,
        role: Role,
        result: Result<Vec<ResolvedWrite>, AbortReason>,
        tx_cut: Option<CutId>,
    },
    /// `role` is the receiving branch's.
    Finish {
        tx: TxId,
        role: Role,
        commit: bool,
        tx_cut: Option<CutId>,
    },
    /// `one_phase` says which role answers: the 1PC last backup, or the 2PC near.
    StatusQuery {
        tx: TxId,
        one_phase: bool,
    },
    StatusReply {
        tx: TxId,
        status: TxStatus,
    },
    Read {
        req: u64,
        key: Key,
    },
    /// From the near, to a backup on another host of a primary on the near's host: commit the
    /// branch `primary` prepared here, before that primary does (`txn::orphan`, with failover on).
    FinishBackup {
        tx: TxId,
        primary: VnodeId,
        tx_cut: Option<CutId>,
    },
    /// To the near: this branch's commit is durable (`txn::orphan`, with failover on).
    FinishAck {
        tx: TxId,
    },
    /// A participant recovering `tx` without its near asks what this vnode knows (`txn::orphan`).
    Recover {
        tx: TxId,
    },
    /// `Pending`: held here in doubt, and fenced.
    Recovered {
        tx: TxId,
        status: TxStatus,
    },
    /// The vnode asked does not lead the key's partition by the placement it holds (or has not
    /// caught up with it since it started): the near answers `TRYAGAIN`.
    ReadRefused {
        req: u64,
    },
    /// `writer_cut`: the value reveals a transaction after this cut (real-time safety).
    ReadReply {
        req: u64,
        value: Option<Value>,
        version: Version,
        writer_cut: Option<CutId>,
        /// The value's deadline and the primary's clock (`Response::Value`).
        deadline_ms: Option<u64>,
        now_ms: u64,
    },
    /// To the near, in answer to its commit told again: a recovery without the near rolled this
    /// vnode's branch of `tx` back (`txn::orphan`), so no other host will ever hold the commit.
    RolledBack {
        tx: TxId,
    },
    /// A near asks a partition's primary for a page of its keys (`txn::scan`); refused with
    /// `ReadRefused`.
    Scan {
        req: u64,
        cursor: crate::io::ScanCursor,
        count: u32,
    },
    /// `writer_cut`: the newest cut after which a write of a returned key was committed
    /// (real-time safety, as `ReadReply`).
    ScanReply {
        req: u64,
        keys: Vec<Key>,
        next: Option<crate::io::ScanCursor>,
        writer_cut: Option<CutId>,
    },
    /// A near asks a collection's primary for its head and elements (`Request::Elements`);
    /// refused with `ReadRefused`.
    ReadElements {
        req: u64,
        key: Key,
        pick: crate::io::Pick,
    },
    /// `ReadReply` with the elements picked, and where a page goes on.
    ElementsReply {
        req: u64,
        value: Option<Value>,
        version: Version,
        writer_cut: Option<CutId>,
        deadline_ms: Option<u64>,
        now_ms: u64,
        elements: Vec<crate::io::Element>,
        next: Option<crate::io::Member>,
    },
}

/// The cut process (DESIGN §6: START → STARTED → FINISH → END), for now driven by a coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CutMsg {
    Start {
        cut: CutId,
    },
    StartAck {
        cut: CutId,
    },
    Started {
        cut: CutId,
    },
    StartedAck {
        cut: CutId,
    },
    /// Answer when the local cut is over.
    Finish {
        cut: CutId,
    },
    Finished {
        cut: CutId,
        ok: bool,
    },
    End {
        cut: CutId,
        ok: bool,
    },
    /// Blocking strategy: start no transaction; answer once none this vnode coordinates is open.
    Pause {
        cut: CutId,
    },
    Paused {
        cut: CutId,
    },
    /// Blocking strategy: once nothing is prepared here, write the marker and answer.
    /// `End` resumes.
    Drain {
        cut: CutId,
    },
    Drained {
        cut: CutId,
    },
    /// `blocking`, after every vnode drained: is this vnode still paused for `cut`? A vnode that
    /// restarted meanwhile lost its pause and may have started transactions that straddle some
    /// vnode's marker, so the cut must fail.
    Check {
        cut: CutId,
    },
    Checked {
        cut: CutId,
        paused: bool,
    },
    /// `versions` phase 1: fix `snp_version`, answer once the transactions active then finished.
    VersionsStart {
        cut: CutId,
    },
    /// `None`: this vnode cannot take part (it restarted during the cut, or it failed here).
    VersionsReport {
        cut: CutId,
        snp: Option<TxVersion>,
    },
    /// `versions` phase 2: await the branches below the map, log it, answer.
    VersionsMap {
        cut: CutId,
        map: SnapshotVersions,
    },
    VersionsMapLogged {
        cut: CutId,
        ok: bool,
    },
    /// `versions` phase 3: stop collecting late transactions and hand them over.
    VersionsStop {
        cut: CutId,
    },
    VersionsLate {
        cut: CutId,
        late: Option<BTreeSet<TxId>>,
    },
    /// `versions` phase 3: log the union of the late transactions. `End` follows.
    VersionsSkip {
        cut: CutId,
        skip: BTreeSet<TxId>,
    },
    VersionsSkipLogged {
        cut: CutId,
        ok: bool,
    },
    /// The cut process on the tree (`cut::tree_process`): a notice from the operator, sent
    /// straight to every store vnode once START{cut} was applied on all of them — what the
    /// STARTED alteration will say a tree round later, so replies held for real-time safety go
    /// now. Not a phase: nothing is logged or answered; the STARTED alteration still follows.
    StartedEverywhere {
        cut: CutId,
    },
}

impl TxnMsg {
    /// Responses, as opposed to requests (the `uncoloured-responses` break mode strips these).
    pub fn is_response(&self) -> bool {
        matches!(
            self,
            TxnMsg::PrepareAck { .. }
                | TxnMsg::StatusReply { .. }
                | TxnMsg::ReadReply { .. }
                | TxnMsg::ElementsReply { .. }
                | TxnMsg::ReadRefused { .. }
                | TxnMsg::Recovered { .. }
                | TxnMsg::ScanReply { .. }
        )
    }
}
