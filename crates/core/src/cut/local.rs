//! One vnode's local cut, in the single-threaded form of DESIGN §4 (seed 000 §4–§10).
//!
//! In one step, at the start: append `CutStart{C}`, take `waiting` (transactions prepared here and
//! not finished), and colour every later transaction message with C. Each waiting transaction is
//! classified when it finishes: rolled back → ignored; `tx_cut == C` → after; committed otherwise →
//! before; recovered → the local cut fails. When `waiting` is empty: `CutFinish{C, before, after}`.
//!
//! Invariant: a transaction that commits here after `CutStart{C}` and is not in `waiting` was
//! prepared through a message coloured C, so its first committer had started C and stamped it C:
//! it is after C on every participant.
//! Invariant: `CutFinish{C}` is appended only when `waiting` is empty (unless `finish-early`).
//! Invariant: a vnode colours and stamps with C from its `CutStart{C}` until END{C} or a newer
//! cut, across restarts (`Vnode::resume_cut_after_restart`).

use crate::ids::{Branch, CutId, TxId, VnodeId};
use crate::message::CutMsg;
use crate::record::{CutFinish, Record};
use crate::vnode::Vnode;
use std::collections::BTreeSet;

#[derive(Debug, Default, Hash)]
pub struct CutState {
    pub(crate) running: Option<LocalCut>,
    /// Invariant: no cut with an id `<= last_finished` is ever started again here.
    pub(crate) last_finished: Option<CutId>,
    /// What this vnode held as a copy at each of its recent `CutFinish`es (`cut::holdings`).
    pub(crate) holdings: super::holdings::HoldingsLog,
}

#[derive(Debug, Hash)]
pub(crate) struct LocalCut {
    pub(crate) id: CutId,
    pub(crate) waiting: BTreeSet<Branch>,
    pub(crate) before: BTreeSet<TxId>,
    pub(crate) after: BTreeSet<TxId>,
    pub(crate) outcome: LocalOutcome,
    /// The cut process asked for the outcome (phase FINISH); answer it once known.
    pub(crate) asked_by: Option<VnodeId>,
}

impl CutState {
    pub fn running_id(&self) -> Option<CutId> {
        self.running.as_ref().map(|c| c.id)
    }

    /// Recovery: a cut this vnode started before a crash must never start again.
    pub(crate) fn note_started(&mut self, cut: CutId) {
        self.last_finished = self.last_finished.max(Some(cut));
    }

    fn is_known(&self, cut: CutId) -> bool {
        self.last_finished >= Some(cut) || self.running.as_ref().is_some_and(|c| c.id >= cut)
    }
}

/// Where a local cut stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LocalOutcome {
    /// Transactions of `waiting` are still to finish.
    Waiting,
    /// `CutFinish` appended: this vnode's part of the cut is whole.
    Finished,
    /// The local cut failed (a recovered transaction, real-time safety gave up, lost in a crash).
    Failed,
}

impl LocalOutcome {
    /// The answer to the cut process's FINISH, once there is one.
    pub(crate) fn known(self) -> Option<bool> {
        match self {
            LocalOutcome::Waiting => None,
            LocalOutcome::Finished => Some(true),
            LocalOutcome::Failed => Some(false),
        }
    }
}

/// How a prepared branch ended here, as the cut classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BranchEnd {
    /// Committed, stamped with the cut it came after (`None`: before every running cut).
    Committed {
        tx_cut: Option<CutId>,
    },
    RolledBack,
}

impl Vnode {
    /// Recovery under the consistent strategy: `cut` is the newest cut the log started. Its END is
    /// not logged, so it may still run elsewhere: this vnode goes on colouring its messages and
    /// stamping its commits with it, as before the crash, until it hears END or a newer cut —
    /// else a transaction it commits from now on (after its `CutStart` in its log, so after the
    /// cut here) could be stamped *before* and be included by the other participants (`--cuts`
    /// seed 7544, 12 vnodes, 3 replicas: a first committer restarted between its `CutFinish` and
    /// the END and stamped a commit `None`). Its local cut is lost (what it waited for was in
    /// memory): asked to FINISH, it answers failed; a `CutFinish` logged before the crash stands.
    pub(crate) fn resume_cut_after_restart(&mut self, cut: CutId) {
        self.cut.note_started(cut);
        let (waiting, before, after) = Default::default();
        self.cut.running =
            Some(LocalCut { id: cut, waiting, before, after, outcome: LocalOutcome::Failed, asked_by: None });
        // Replies stamped `cut` need not be held: if the cut is ever declared successful, this
        // vnode answered its FINISH ok before the crash, and FINISH is asked only once every vnode
        // started the cut; if not, the cut fails (the local cut is lost) and no restore shows it.
        self.cut_started_everywhere(cut);
    }

    /// Seed 000 §4: starting twice is a no-op; an older cut still running here ends implicitly.
    pub(crate) fn start_local_cut(&mut self, cut: CutId) {
        if self.cut.is_known(cut) {
            return;
        }
        if let Some(old) = self.cut.running.take() {
            self.cut.last_finished = self.cut.last_finished.max(Some(old.id));
        }
        self.out.append_unheld(Record::CutStart { cut });
        let waiting: BTreeSet<Branch> =
            self.part.prepared.iter().filter(|(_, p)| !p.read_only).map(|(b, _)| b.clone()).collect();
        let local = LocalCut {
            id: cut,
            waiting,
            before: BTreeSet::new(),
            after: BTreeSet::new(),
            outcome: LocalOutcome::Waiting,
            asked_by: None,
        };
        self.cut.running = Some(local);
        if self.cfg.breaks.finish_early {
            self.write_cut_finish();
        }
        self.maybe_finish_cut();
    }

    /// Seed 000 §7: classify a transaction of `waiting` as it finishes here.
    pub(crate) fn cut_tx_finished(&mut self, branch: &Branch, end: BranchEnd, recovered: bool, read_only: bool) {
        let Some(c) = self.cut.running.as_mut() else { return };
        if c.outcome != LocalOutcome::Waiting || read_only || !c.waiting.remove(branch) {
            return;
        }
        let tx = &branch.tx;
        match end {
            _ if recovered => c.outcome = LocalOutcome::Failed,
            BranchEnd::RolledBack => {}
            BranchEnd::Committed { tx_cut } if tx_cut == Some(c.id) => drop(c.after.insert(tx.clone())),
            BranchEnd::Committed { .. } => drop(c.before.insert(tx.clone())),
        }
        if c.outcome == LocalOutcome::Failed {
            self.answer_cut_process();
        }
        self.maybe_finish_cut();
    }

    fn maybe_finish_cut(&mut self) {
        let Some(c) = self.cut.running.as_ref() else { return };
        if c.outcome == LocalOutcome::Waiting && c.waiting.is_empty() {
            if self.cfg.breaks.fail_every_cut {
                let cut = c.id;
                return self.fail_local_cut(cut);
            }
            self.write_cut_finish();
        }
    }

    /// Seed 000 §8.1.
    fn write_cut_finish(&mut self) {
        let c = self.cut.running.as_mut().expect("a running cut");
        assert!(c.waiting.is_empty() || self.cfg.breaks.finish_early, "CutFinish with transactions in flight");
        let finish = CutFinish { cut: c.id, before: c.before.clone(), after: c.after.clone() };
        c.outcome = LocalOutcome::Finished;
        let cut = c.id;
        self.out.append(Record::CutFinish(finish));
        self.note_holdings(cut);
        self.answer_cut_process();
    }

    fn answer_cut_process(&mut self) {
        if let Some((cut, Some(ok))) = self.cut.running.as_ref().map(|c| (c.id, c.outcome.known())) {
            self.tree_local_cut_over(cut, ok);
        }
        let Some(c) = self.cut.running.as_mut() else { return };
        let (Some(ok), Some(to)) = (c.outcome.known(), c.asked_by.clone()) else { return };
        c.asked_by = None;
        let cut = c.id;
        self.send_cut(&to, CutMsg::Finished { cut, ok });
    }

    /// The local cut `cut` can no longer be trusted here (real-time safety gave up on it).
    pub(crate) fn fail_local_cut(&mut self, cut: CutId) {
        if let Some(c) = self.cut.running.as_mut().filter(|c| c.id == cut && c.outcome != LocalOutcome::Failed) {
            c.outcome = LocalOutcome::Failed;
            self.answer_cut_process();
        }
    }

    /// Phase FINISH reached this vnode: answer now or when the local cut is over.
    pub(crate) fn on_cut_finish_asked(&mut self, from: VnodeId, cut: CutId) {
        match self.cut.running.as_mut() {
            Some(c) if c.id == cut => {
                c.asked_by = Some(from);
                self.answer_cut_process();
            }
            // Never started, or lost in a crash: this vnode has no local cut to offer.
            _ => self.send_cut(&from, CutMsg::Finished { cut, ok: false }),
        }
    }

    /// Seed 000 §10: stop colouring; `last_finished = C`.
    pub(crate) fn on_cut_end(&mut self, cut: CutId) {
        if self.cut.running.as_ref().is_some_and(|c| c.id <= cut) {
            self.cut.running = None;
        }
        self.cut.last_finished = self.cut.last_finished.max(Some(cut));
    }
}
