//! What clients saw: every transaction they ran, with its reads, writes, outcome and times.
//! Checkers read this; nothing here judges it.

use std::collections::BTreeMap;
use waymark_core::{CutId, Key, ResolvedWrite, TxId, Value, Version, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    /// The client never learnt: timed out, or the near lost track of a 1PC chain.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct ClientTxn {
    pub client: usize,
    /// A short label of the workload's operation, e.g. `transfer`, `audit`, `append`.
    pub kind: &'static str,
    pub tx: Option<TxId>,
    /// The GETs that preceded the transaction, validated by it (`WATCH`).
    pub reads: Vec<ClientRead>,
    pub writes: Vec<Write>,
    /// Values written, as the primaries evaluated them (`Committed` only).
    pub written: Vec<ResolvedWrite>,
    pub outcome: Outcome,
    pub invoked_us: u64,
    pub completed_us: u64,
    /// An aborted attempt the client's transaction client tried again after a conflict: the same
    /// operation's writes come again in a later record.
    pub retried: bool,
}

/// A scan of the whole keyspace a client ran to its end, page by page.
#[derive(Clone, Debug, Default)]
pub struct ScanRun {
    pub client: usize,
    /// When its first page was asked for, and its last answered.
    pub began_us: u64,
    pub ended_us: u64,
    pub keys: std::collections::BTreeSet<Key>,
    pub pages: usize,
}

/// What a client's GET answered: the key's value and version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRead {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
}

/// A cut the cut process finished, as its client (the operator) was told.
#[derive(Clone, Debug)]
pub struct CutRun {
    pub cut: CutId,
    pub ok: bool,
    pub begun_us: u64,
    pub ended_us: u64,
}

/// A snapshot's export of a successful cut, as the sim models it: each running store vnode's
/// answer to "what did you hold at this cut" (`None`: it cannot say; the export would fail).
#[derive(Clone, Debug)]
pub struct CutExport {
    pub cut: CutId,
    pub at_us: u64,
    pub held: Vec<(usize, Option<waymark_core::cut::holdings::CutHoldings>)>,
}

/// When a cut process began and when it was declared successful, as the driver saw it: the
/// coordinator's `CutBegin` and `CutEnd{ok}` records (or, on the tree, the operator's START
/// proposal and the moment FINISH was applied everywhere). No vnode starts the cut before
/// `begun_us`; every vnode had written its `CutFinish` by `declared_us`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutWindow {
    pub begun_us: u64,
    pub declared_us: Option<u64>,
}

/// What a client learnt about committed data other than a commit acknowledgement (DESIGN §4: an
/// effect of a transaction is observed by these too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// A GET answered `key` at `version`: the writer of that version had committed.
    Read { key: Key, version: Version },
    /// A transaction failed its `WATCH` on `key`, read at `read_version`: the key had moved on,
    /// so the writer of the next version had committed.
    WatchFailed { key: Key, read_version: Version },
}

#[derive(Clone, Debug)]
pub struct Observed {
    pub client: usize,
    /// When the request that learnt it was sent.
    pub invoked_us: u64,
    pub at_us: u64,
    pub what: Observation,
}

#[derive(Clone, Debug, Default)]
pub struct History {
    pub txns: Vec<ClientTxn>,
    /// Scans of the whole keyspace that ran to their end (`--scans`).
    pub scans: Vec<ScanRun>,
    /// Every read answered and every `WATCH` that failed, when the client learnt it.
    pub observed: Vec<Observed>,
    pub cuts: Vec<CutRun>,
    pub cut_windows: BTreeMap<CutId, CutWindow>,
    /// What each running store vnode answered a snapshot's export of a successful cut.
    pub exports: Vec<CutExport>,
}

impl History {
    pub fn committed(&self) -> impl Iterator<Item = &ClientTxn> {
        self.txns.iter().filter(|t| t.outcome == Outcome::Committed)
    }
}

/// How a cut ended, as the log of whoever declares cuts says: the coordinator's `CutEnd`, or the
/// tree's catalog (`cut/<id>` = `END:ok` / `END:failed` in the root's metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeclaredCut {
    pub cut: CutId,
    pub ok: bool,
}
