//! The restore filter (DESIGN §4): a vnode's state at cut C is every transaction committed before
//! `CutStart{C}` (minus `after`, normally empty), plus those committed between `CutStart{C}` and
//! `CutFinish{C}` that are in `before`; nothing after `CutFinish{C}`. A pure function of a base
//! checkpoint and the log that follows it.

use crate::breaks::Breaks;
use crate::ids::{Branch, CutId, TxId};
use crate::record::{CutFinish, Record};
use crate::record_view::{RecordView, WriteRef};
use crate::store::{value_digest, ResolvedWrite, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The state a log segment starts from: committed data, plus the write sets of transactions that
/// were prepared and not yet finished there (their commit may lie inside the cut window).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub store: Store,
    pub prepared: BTreeMap<Branch, Vec<ResolvedWrite>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RestoreError {
    #[error("{cut}: no CutStart record in the log given")]
    NoStart { cut: CutId },
    #[error("{cut}: no CutFinish record after its CutStart (the local cut did not finish)")]
    NoFinish { cut: CutId },
    #[error("{cut}: the log's CutFinish differs from the one given")]
    FinishMismatch { cut: CutId },
    #[error("{tx} committed at record {index} but its prepare is neither in the checkpoint nor in the log")]
    CommitWithoutPrepare { tx: TxId, index: usize },
}

/// A vnode's state at a cut, and the transactions that made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// The keys kept whole (all of them unless the replay was told [`CutReplay::keeping_whole`]).
    pub store: Store,
    /// The other keys, each value replaced by its [`value_digest`]: the same keys and versions.
    pub digests: Store,
    /// Transactions committed here that the cut includes.
    pub included: BTreeSet<TxId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    BeforeStart,
    Inside,
}

/// Replays `log` over `base`, keeping exactly the transactions on the before side of `target.cut`.
pub fn restore_to_cut<'a>(
    base: Checkpoint,
    log: impl IntoIterator<Item = &'a Record>,
    target: &CutFinish,
) -> Result<Restored, RestoreError> {
    restore_to_cut_with(base, log, target, &Breaks::default())
}

/// `restore_to_cut`, with the simulator's deliberate bugs (`restore_without_base`,
/// `restore_stale_values`).
pub fn restore_to_cut_with<'a>(
    base: Checkpoint,
    log: impl IntoIterator<Item = &'a Record>,
    target: &CutFinish,
    breaks: &Breaks,
) -> Result<Restored, RestoreError> {
    let mut replay = CutReplay::toward(base, target.clone(), *breaks);
    for record in log {
        if replay.step(RecordView::of(record))? == Step::Finished {
            break;
        }
    }
    match replay.finish()? {
        Replayed::Restored(restored) => Ok(restored),
        // Unreachable: only a replay seeking its target asks for another pass.
        Replayed::Again(_) => Err(RestoreError::NoFinish { cut: target.cut }),
    }
}

/// The restore filter fed one record at a time, so that a replay can stream a log it never holds
/// whole (`restore_to_cut` is this machine over a slice).
///
/// The filter's verdict on a commit depends on the cut's `CutFinish`, which comes after it in the
/// log. `toward` is given it up front and decides each commit as it comes. `seeking` knows only
/// the cut: a commit before `CutStart` is applied at once (the cut includes it unless it is in
/// `after`, and a transaction in flight at `CutStart` commits here after it), a commit inside the
/// window is held, with its writes, until `CutFinish` says whether it is `before`. Should
/// `after` name a transaction that committed before `CutStart` after all, the replay ends in
/// [`Replayed::Again`] and must be run again `toward` that finish. Either way the store ends as
/// `restore_to_cut` leaves it: the same writes applied in the same order.
pub struct CutReplay {
    cut: CutId,
    /// Known up front (`toward`), or from the log's first `CutFinish{cut}` on (`seeking`).
    target: Option<CutFinish>,
    seeking: bool,
    /// Invariant: holds only keys `whole` accepts, with their values.
    store: Store,
    /// Invariant: holds only keys `whole` rejects, with value digests (as do `prepared` and `held`).
    digests: Store,
    /// `None`: every key whole.
    whole: Option<KeepWhole>,
    prepared: BTreeMap<Branch, Vec<ResolvedWrite>>,
    included: BTreeSet<TxId>,
    window: Window,
    /// Seeking, inside the window: the commits the finish will decide on, in log order.
    held: Vec<HeldCommit>,
    /// Records stepped so far (the index errors name).
    index: usize,
    finished: bool,
    /// Seeking: the finish puts after the cut a transaction already applied before `CutStart`.
    again: bool,
    breaks: Breaks,
}

/// Which keys a replay keeps whole, value and version; the others' values it keeps only as a
/// [`value_digest`]. A restore compares a partition's replicas but writes out one copy, so the
/// other replicas' values need not be held: their digests show whether they agree.
pub type KeepWhole = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// A commit inside the cut's window, waiting for the `CutFinish` that decides it (`seeking`).
struct HeldCommit {
    tx: TxId,
    writes: Vec<ResolvedWrite>,
}

/// Whether a replay needs more of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    More,
    /// The target's `CutFinish` was met: nothing after it counts.
    Finished,
}

/// How a replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    Restored(Restored),
    /// A seeking replay applied a commit before `CutStart` that this finish puts after the cut:
    /// replay again, `toward` it.
    Again(CutFinish),
}

/// The writes a commit applies: its own, borrowed from the log, or those its branch prepared.
enum CommitWrites<'a> {
    Inline(Vec<WriteRef<'a>>),
    Prepared(Vec<ResolvedWrite>),
}

impl CutReplay {
    /// A replay toward a known finish: `restore_to_cut`.
    pub fn toward(base: Checkpoint, target: CutFinish, breaks: Breaks) -> CutReplay {
        let cut = target.cut;
        CutReplay::new(base, cut, Some(target), breaks)
    }

    /// A replay to `cut` whose finish is the first `CutFinish{cut}` of the log.
    pub fn seeking(base: Checkpoint, cut: CutId) -> CutReplay {
        CutReplay::new(base, cut, None, Breaks::default())
    }

    fn new(base: Checkpoint, cut: CutId, target: Option<CutFinish>, breaks: Breaks) -> CutReplay {
        let Checkpoint { store, prepared } = base;
        CutReplay {
            cut,
            seeking: target.is_none(),
            target,
            store,
            digests: Store::default(),
            whole: None,
            prepared,
            included: BTreeSet::new(),
            window: Window::BeforeStart,
            held: vec![],
            index: 0,
            finished: false,
            again: false,
            breaks,
        }
    }

    /// A replay that keeps whole only the keys `whole` accepts (before its first record): the
    /// base's other keys, and every write to them from here on, keep a digest of their value.
    pub fn keeping_whole(mut self, whole: KeepWhole) -> CutReplay {
        assert_eq!(self.index, 0, "what a replay keeps is decided before its first record");
        let (store, digested) = std::mem::take(&mut self.store).split_by(|k| whole(k));
        self.store = store;
        self.digests = digested.digested();
        for writes in self.prepared.values_mut() {
            for w in writes.iter_mut().filter(|w| !whole(&w.key)) {
                w.value = w.value.as_deref().map(|v| value_digest(v).to_vec());
            }
        }
        self.whole = Some(whole);
        self
    }

    fn is_whole(&self, key: &[u8]) -> bool {
        self.whole.as_ref().is_none_or(|whole| whole(key))
    }

    /// A write as this replay holds it: whole, or with a digest for its value.
    fn own(&self, w: WriteRef<'_>) -> ResolvedWrite {
        if self.is_whole(w.key) {
            return w.to_owned_write();
        }
        let value = w.value.map(|v| value_digest(v).to_vec());
        ResolvedWrite { key: w.key.to_vec(), value, version: w.version, deadline_ms: w.deadline_ms }
    }

    /// Applies a write borrowed from the log to the store that holds its key.
    fn apply_ref(&mut self, w: WriteRef<'_>) {
        if self.is_whole(w.key) {
            self.store.apply_ref(w.key, w.value, w.version, w.deadline_ms);
        } else {
            let digest = w.value.map(value_digest);
            self.digests.apply_ref(w.key, digest.as_ref().map(|d| &d[..]), w.version, w.deadline_ms);
        }
    }

    /// Applies a write held by this replay (see [`CutReplay::own`]) to the store that holds its key.
    fn apply_owned(&mut self, w: ResolvedWrite) {
        if self.is_whole(&w.key) {
            self.store.apply_owned(w);
        } else {
            self.digests.apply_owned(w);
        }
    }

    /// Feeds the next record of the log. Once `Finished`, further records are not looked at.
    pub fn step(&mut self, record: RecordView<'_>) -> Result<Step, RestoreError> {
        if self.finished {
            return Ok(Step::Finished);
        }
        let index = self.index;
        self.index += 1;
        match record {
            RecordView::Prepared { branch, writes } => {
                let writes = writes.into_iter().map(|w| self.own(w)).collect();
                drop(self.prepared.insert(branch, writes));
            }
            RecordView::RolledBack { branch: Some(branch) } => drop(self.prepared.remove(branch.as_ref())),
            RecordView::Committed { branch, writes } => self.commit(&branch, writes, index)?,
            RecordView::CutStart { cut } if cut == self.cut => self.window = Window::Inside,
            RecordView::CutFinish(f) if f.cut == self.cut => return self.cut_finish(f.into_owned()),
            RecordView::Reset { partition, partitions } => self.reset(partition, partitions),
            RecordView::Copied { writes } => {
                for w in writes {
                    let w = self.own(WriteRef::from(&w));
                    self.apply_owned(w);
                }
            }
            _ => {}
        }
        Ok(Step::More)
    }

    /// A learner's `PartitionReset`: nothing it held of the partition before counts.
    fn reset(&mut self, partition: crate::ids::PartitionId, partitions: u32) {
        let of_p = |k: &[u8]| partitions > 0 && crate::placement::partition_of(k, partitions) == partition;
        for store in [&mut self.store, &mut self.digests] {
            store.drop_partition(partition, partitions);
        }
        for writes in self.prepared.values_mut() {
            writes.retain(|w| !of_p(&w.key));
        }
        for held in &mut self.held {
            held.writes.retain(|w| !of_p(&w.key));
        }
    }

    /// At the end of the log (or once `Finished`): the state at the cut.
    pub fn finish(self) -> Result<Replayed, RestoreError> {
        let cut = self.cut;
        if !self.finished {
            return match (self.seeking, self.window) {
                // A replay that never met the finish cannot tell a missing start from a missing end.
                (true, _) | (false, Window::Inside) => Err(RestoreError::NoFinish { cut }),
                (false, Window::BeforeStart) => Err(RestoreError::NoStart { cut }),
            };
        }
        if self.again {
            if let Some(target) = self.target {
                return Ok(Replayed::Again(target));
            }
        }
        Ok(Replayed::Restored(Restored { store: self.store, digests: self.digests, included: self.included }))
    }

    fn commit(&mut self, branch: &Branch, inline: Vec<WriteRef<'_>>, index: usize) -> Result<(), RestoreError> {
        let writes = if inline.is_empty() {
            let prepared = self.prepared.remove(branch);
            CommitWrites::Prepared(
                prepared.ok_or_else(|| RestoreError::CommitWithoutPrepare { tx: branch.tx.clone(), index })?,
            )
        } else {
            CommitWrites::Inline(inline)
        };
        let tx = &branch.tx;
        let keep = match (self.window, &self.target) {
            (Window::BeforeStart, _) if self.breaks.restore_without_base => false,
            (Window::BeforeStart, Some(target)) => !target.after.contains(tx),
            (Window::BeforeStart, None) => true,
            (Window::Inside, Some(target)) => target.before.contains(tx),
            (Window::Inside, None) => {
                let writes = self.own_all(writes);
                self.held.push(HeldCommit { tx: tx.clone(), writes });
                return Ok(());
            }
        };
        if keep {
            self.keep(tx.clone(), writes);
        }
        Ok(())
    }

    /// A commit's writes as this replay holds them.
    fn own_all(&self, writes: CommitWrites<'_>) -> Vec<ResolvedWrite> {
        match writes {
            CommitWrites::Inline(ws) => ws.into_iter().map(|w| self.own(w)).collect(),
            CommitWrites::Prepared(ws) => ws,
        }
    }

    /// Applies a kept commit's writes and counts it included.
    fn keep(&mut self, tx: TxId, writes: CommitWrites<'_>) {
        if self.window == Window::Inside && self.breaks.restore_stale_values {
            let writes = self.own_all(writes);
            let stale = |w: ResolvedWrite| {
                let holder = if self.is_whole(&w.key) { &self.store } else { &self.digests };
                ResolvedWrite { value: holder.get(&w.key).value, ..w }
            };
            let writes: Vec<ResolvedWrite> = writes.into_iter().map(stale).collect();
            for w in writes {
                self.apply_owned(w);
            }
        } else {
            match writes {
                CommitWrites::Inline(ws) => {
                    for w in ws {
                        self.apply_ref(w);
                    }
                }
                CommitWrites::Prepared(ws) => {
                    for w in ws {
                        self.apply_owned(w);
                    }
                }
            }
        }
        self.included.insert(tx);
    }

    fn cut_finish(&mut self, f: CutFinish) -> Result<Step, RestoreError> {
        if self.window != Window::Inside {
            return Err(RestoreError::NoStart { cut: self.cut });
        }
        match &self.target {
            Some(target) if *target != f => return Err(RestoreError::FinishMismatch { cut: self.cut }),
            Some(_) => {}
            None => {
                self.again = !f.after.is_disjoint(&self.included);
                for HeldCommit { tx, writes } in std::mem::take(&mut self.held) {
                    if f.before.contains(&tx) {
                        self.keep(tx, CommitWrites::Prepared(writes));
                    }
                }
                self.target = Some(f);
            }
        }
        self.finished = true;
        Ok(Step::Finished)
    }
}

/// Finds the `CutFinish` of `cut` in a log, if the local cut finished there.
pub fn find_finish<'a>(log: impl IntoIterator<Item = &'a Record>, cut: CutId) -> Option<&'a CutFinish> {
    log.into_iter().find_map(|r| match r {
        Record::CutFinish(f) if f.cut == cut => Some(f),
        _ => None,
    })
}
/// The writes a `TxCommitted` record at `index` applies: its own, or (a 2PC commit, which logs
/// none) those its branch prepared, taken out of `prepared`.
pub(crate) fn committed_writes(
    prepared: &mut BTreeMap<Branch, Vec<ResolvedWrite>>,
    branch: &Branch,
    writes: &[ResolvedWrite],
    index: usize,
) -> Result<Vec<ResolvedWrite>, RestoreError> {
    if !writes.is_empty() {
        return Ok(writes.to_vec());
    }
    prepared.remove(branch).ok_or_else(|| RestoreError::CommitWithoutPrepare { tx: branch.tx.clone(), index })
}
