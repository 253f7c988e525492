//! The restore filter (DESIGN §4): a vnode's state at cut C is every transaction committed before
//! `CutStart{C}` (minus `after`, normally empty), plus those committed between `CutStart{C}` and
//! `CutFinish{C}` that are in `before`; nothing after `CutFinish{C}`. A pure function of a base
//! checkpoint and the log that follows it.

use crate::breaks::Breaks;
use crate::ids::{Branch, CutId, TxId};
use crate::record::{CutFinish, Record};
use crate::store::{ResolvedWrite, Store};
use std::collections::{BTreeMap, BTreeSet};

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
    pub store: Store,
    /// Transactions committed here that the cut includes.
    pub included: BTreeSet<TxId>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
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
    let Checkpoint { mut store, mut prepared } = base;
    let mut included = BTreeSet::new();
    let mut window = Window::BeforeStart;
    for (index, record) in log.into_iter().enumerate() {
        match record {
            Record::TxPrepared(p) => drop(prepared.insert(p.branch(), p.writes.clone())),
            Record::TxRolledBack { branch: Some(branch), .. } => drop(prepared.remove(branch)),
            Record::TxCommitted { branch, writes, .. } => {
                let tx = &branch.tx;
                let writes = committed_writes(&mut prepared, branch, writes, index)?;
                let keep = match window {
                    Window::BeforeStart if breaks.restore_without_base => false,
                    Window::BeforeStart => !target.after.contains(tx),
                    Window::Inside => target.before.contains(tx),
                };
                if keep && window == Window::Inside && breaks.restore_stale_values {
                    let stale = |w: &ResolvedWrite| ResolvedWrite { value: store.get(&w.key).value, ..w.clone() };
                    let writes: Vec<ResolvedWrite> = writes.iter().map(stale).collect();
                    store.apply_all(&writes);
                    included.insert(tx.clone());
                } else if keep {
                    store.apply_all(&writes);
                    included.insert(tx.clone());
                }
            }
            Record::CutStart { cut } if *cut == target.cut => window = Window::Inside,
            Record::CutFinish(f) if f.cut == target.cut => {
                if window != Window::Inside {
                    return Err(RestoreError::NoStart { cut: target.cut });
                }
                if f != target {
                    return Err(RestoreError::FinishMismatch { cut: target.cut });
                }
                return Ok(Restored { store, included });
            }
            _ => {}
        }
    }
    match window {
        Window::BeforeStart => Err(RestoreError::NoStart { cut: target.cut }),
        Window::Inside => Err(RestoreError::NoFinish { cut: target.cut }),
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
