//! The `blocking` comparison strategy (DESIGN §4): what Ignite's full-snapshot exchange and
//! Citus's restore point effectively do. PAUSE: start no transaction (queue clients) and answer
//! once none this vnode coordinates is open. DRAIN: once nothing is prepared here, write the
//! marker (`CutStart` + an empty `CutFinish`) and answer. CHECK: answer whether this vnode is
//! still paused. END: resume the queue.
//!
//! Two cut processes drive these steps, through the same functions: the coordinator's
//! (`cut::coordinator`: PAUSE, DRAIN, CHECK, END messages) and the cluster tree's
//! (`cut::tree_process`: the alterations START = pause, STARTED = drain, FINISH = check,
//! END = resume). Who waits for an answer is an `Asker`: a coordinator (sent a message) or the
//! alteration in flight at this leaf (confirmed through the tree role).
//!
//! Why CHECK: the pause lives in memory. A vnode that crashes and restarts before every marker is
//! written is no longer paused and may start a transaction that prepares on one vnode before its
//! marker and on another after it (seeds 160, 721, 915, 1011, 1622, 1666, 1781 of the
//! `--strategy blocking` sweep). CHECK is sent once every vnode drained, so a vnode still paused
//! then was paused throughout the markers; one that restarted answers `paused: false` and the
//! cut fails.
//!
//! Why no prepare after the marker: "nothing prepared here" is local. A transaction its near
//! already gave up on (a prepare timeout, so the near is idle and PAUSED went out) can still be
//! prepared on its primary and travel down the chain; a backup that drained before that prepare
//! arrived would have the commit after its marker while the primary has it before (seeds 542,
//! 753, 994, 1499). So once its marker is written a paused vnode refuses every prepare, durably,
//! until END, and such a transaction aborts instead.
//!
//! Invariant: a committed transaction is on the same side of every participant's marker. The
//! marker is written only when every vnode has paused (the coordinator sends DRAIN after all PAUSE
//! confirmations; the operator proposes STARTED after START was applied by every leaf) and
//! nothing is prepared here; a prepare arriving after it is refused while paused; and a vnode
//! that restarted (losing both) fails the CHECK round (on the tree: FINISH).
//! Invariant (liveness): on the tree, a pause is lifted by its cut's END, or after
//! `Timeouts::pause_max_us` — the cut then fails here — so a pause never outlives a cut whose
//! operator gave up or died. The queue of held transactions is bounded (`paused_queue_max`).

use crate::alter::{AlterInput, AlterSeq};
use crate::ids::{ClientId, CutId, VnodeId};
use crate::io::{Request, Response, Timer};
use crate::message::CutMsg;
use crate::record::{CutFinish, Record};
use crate::vnode::Vnode;
use std::collections::{BTreeSet, VecDeque};

/// Stall durations kept for the driver between two `take_commit_stalls_us`.
const STALLS_MAX: usize = 65_536;

/// Who waits for a pause or a drain to be confirmed.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Asker {
    /// The cut coordinator, answered with `Paused`/`Drained`.
    Coordinator(VnodeId),
    /// The tree's alteration `seq` (START or STARTED), answered with `Applied`.
    Tree { seq: AlterSeq },
}

#[derive(Debug, Default, Hash)]
pub struct BlockingState {
    paused: Option<CutId>,
    pause_asked: Option<Asker>,
    drain_asked: Option<Asker>,
    /// The cut whose marker this vnode wrote; until END it refuses every prepare.
    marker_written: Option<CutId>,
    /// Client transactions waiting for the resume, with when each arrived.
    /// Invariant: at most `limits.paused_queue_max` entries.
    queue: VecDeque<HeldRequest>,
    /// How long each transaction that waited was held back (drained by the driver).
    stalls_us: Vec<u64>,
}

/// A client's transaction held while paused, dispatched at the resume.
#[derive(Debug, Hash)]
struct HeldRequest {
    client: ClientId,
    req: u64,
    request: Request,
    since_us: u64,
}

impl Vnode {
    /// Client transactions wait while paused; `false` if the request was not taken.
    pub(crate) fn blocking_hold(&mut self, client: ClientId, req: u64, request: &Request) -> bool {
        if self.blocking.paused.is_none() || !matches!(request, Request::Txn { .. }) {
            return false;
        }
        if self.blocking.queue.len() >= self.cfg.limits.paused_queue_max {
            self.reply(client, req, Response::Unavailable { why: "paused for a snapshot; queue full" });
        } else {
            self.blocking.queue.push_back(HeldRequest { client, req, request: request.clone(), since_us: self.now_us });
        }
        assert!(self.blocking.queue.len() <= self.cfg.limits.paused_queue_max, "the paused queue is bounded");
        true
    }

    /// Pauses for `cut`; `false` if that cut already ended here (a late message: never pause).
    fn blocking_enter_pause(&mut self, cut: CutId) -> bool {
        if self.cut.last_finished >= Some(cut) {
            return false;
        }
        self.blocking.paused = Some(cut);
        true
    }

    /// Nothing this vnode coordinates is open — nor a one-phase transaction it timed out on whose
    /// first committer has not said what became of it (its chain may still be in flight, and
    /// would commit on one replica before its marker and on the next after): the pause can be
    /// confirmed.
    fn blocking_quiet(&self) -> bool {
        self.near.txs.is_empty() && self.one_phase_unresolved() == 0
    }

    /// Nothing is prepared here: the marker can be written.
    fn blocking_drained(&self) -> bool {
        self.part.prepared.is_empty()
    }

    /// The marker of `cut`: `CutStart` and an empty `CutFinish`, which the restore filter reads as
    /// "everything committed before, nothing inside" (`cut::restore`).
    fn blocking_write_marker(&mut self, cut: CutId) {
        assert_eq!(self.blocking.paused, Some(cut), "a marker is written only while paused for its cut");
        assert!(self.blocking_drained(), "{cut}: a marker with transactions prepared");
        self.out.append(Record::CutStart { cut });
        self.cut.note_started(cut);
        let empty = BTreeSet::new();
        self.out.append(Record::CutFinish(CutFinish { cut, before: empty.clone(), after: empty }));
        self.note_holdings(cut);
        self.blocking.marker_written = Some(cut);
    }

    fn blocking_answer(&mut self, asker: Asker, msg: CutMsg) {
        match asker {
            Asker::Coordinator(to) => self.send_cut(&to, msg),
            // Outside the tree role's own loop: `blocking_progress` runs at the end of a step.
            Asker::Tree { seq } => self.alter_input(AlterInput::Applied { seq, ok: true }),
        }
    }

    pub(crate) fn blocking_pause(&mut self, from: VnodeId, cut: CutId) {
        if self.blocking_enter_pause(cut) {
            self.blocking.pause_asked = Some(Asker::Coordinator(from));
            self.blocking_progress();
        }
    }

    pub(crate) fn blocking_drain(&mut self, from: VnodeId, cut: CutId) {
        if self.blocking.paused == Some(cut) && self.cut.last_finished >= Some(cut) {
            return self.send_cut(&from, CutMsg::Drained { cut }); // drained already: a resent DRAIN
        }
        if self.blocking.paused == Some(cut) {
            self.blocking.drain_asked = Some(Asker::Coordinator(from));
            self.blocking_progress();
        }
    }

    /// CHECK (the coordinator) or FINISH (the tree): paused for `cut` since its pause, and its
    /// marker written here.
    pub(crate) fn blocking_still_paused(&self, cut: CutId) -> bool {
        self.blocking.paused == Some(cut) && self.cut.last_finished >= Some(cut)
    }

    pub(crate) fn blocking_check(&mut self, from: VnodeId, cut: CutId) {
        let paused = self.blocking.paused == Some(cut);
        self.send_cut(&from, CutMsg::Checked { cut, paused });
    }

    /// The tree's START of a blocking cut, alteration `seq`: pause, and confirm once quiet.
    /// `Some(ok)` when the answer is known now; `None` when `blocking_progress` gives it later.
    pub(crate) fn blocking_tree_pause(&mut self, seq: AlterSeq, cut: CutId) -> Option<bool> {
        if !self.blocking_enter_pause(cut) {
            return Some(false);
        }
        self.set_timer(Timer::BlockingPause(cut), self.cfg.timeouts.pause_max_us);
        if self.blocking_quiet() {
            return Some(true);
        }
        self.blocking.pause_asked = Some(Asker::Tree { seq });
        None
    }

    /// The tree's STARTED of a blocking cut, alteration `seq`: every leaf paused; write the marker
    /// once drained. A leaf no longer paused for `cut` (it restarted, or its pause expired) fails it.
    pub(crate) fn blocking_tree_drain(&mut self, seq: AlterSeq, cut: CutId) -> Option<bool> {
        if self.blocking.paused != Some(cut) {
            return Some(false);
        }
        if self.blocking_drained() {
            self.blocking_write_marker(cut);
            return Some(true);
        }
        self.blocking.drain_asked = Some(Asker::Tree { seq });
        None
    }

    /// The pause of `cut` lasted `pause_max_us` without its END: lift it, and fail a phase that
    /// waits here. The cut can no longer end ok (FINISH finds this leaf not paused).
    pub(crate) fn blocking_pause_expired(&mut self, cut: CutId) {
        if self.blocking.paused != Some(cut) {
            return;
        }
        let waiting: Vec<AlterSeq> = [&self.blocking.pause_asked, &self.blocking.drain_asked]
            .into_iter()
            .filter_map(|a| match a {
                Some(Asker::Tree { seq }) => Some(*seq),
                _ => None,
            })
            .collect();
        self.blocking_resume(cut);
        for seq in waiting {
            self.alter_input(AlterInput::Applied { seq, ok: false });
        }
    }

    /// Runs after every step while paused.
    pub(crate) fn blocking_progress(&mut self) {
        let Some(cut) = self.blocking.paused else { return };
        if self.blocking_quiet() {
            if let Some(asker) = self.blocking.pause_asked.take() {
                self.blocking_answer(asker, CutMsg::Paused { cut });
            }
        }
        if self.blocking_drained() {
            if let Some(asker) = self.blocking.drain_asked.take() {
                self.blocking_write_marker(cut);
                self.blocking_answer(asker, CutMsg::Drained { cut });
            }
        }
    }

    pub(crate) fn blocking_resume(&mut self, cut: CutId) {
        if self.blocking.paused.is_none_or(|p| p > cut) {
            return;
        }
        let BlockingState { queue, mut stalls_us, .. } = std::mem::take(&mut self.blocking);
        for HeldRequest { client, req, request, since_us } in queue {
            // Bounded for a driver that never takes them (the newest are dropped past the bound).
            if stalls_us.len() < STALLS_MAX {
                stalls_us.push(self.now_us - since_us);
            }
            self.dispatch_client(client, req, request);
        }
        self.blocking.stalls_us = stalls_us;
    }

    /// How long each transaction start was held back by a cut, since the last call. The
    /// consistent cut never holds one back; the blocking strategy holds every one that arrives
    /// while it is paused.
    pub fn take_commit_stalls_us(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.blocking.stalls_us)
    }

    /// Whether a prepare must be refused: this vnode's marker is written and the cut not ended.
    pub(crate) fn blocking_refuses_prepares(&self) -> bool {
        let refuses = self.blocking.marker_written.is_some();
        assert!(!refuses || self.blocking.paused.is_some(), "a marker is written only while paused");
        refuses && !self.cfg.breaks.blocking_prepare_after_marker
    }

    pub fn is_paused(&self) -> bool {
        self.blocking.paused.is_some()
    }
}
