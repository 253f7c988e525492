//! The `blocking` comparison strategy (DESIGN §4): what Ignite's full-snapshot exchange and
//! Citus's restore point effectively do. PAUSE: start no transaction (queue clients) and answer
//! once none this vnode coordinates is open. DRAIN: once nothing is prepared here, write the
//! marker (`CutStart` + an empty `CutFinish`) and answer. CHECK: answer whether this vnode is
//! still paused. END: resume the queue.
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
//! marker is written only when nothing is prepared here; a prepare arriving after it is refused
//! while paused; and a vnode that restarted (losing both) fails the CHECK round.

use crate::ids::{ClientId, CutId, VnodeId};
use crate::io::{Request, Response};
use crate::message::CutMsg;
use crate::record::{CutFinish, Record};
use crate::vnode::Vnode;
use std::collections::{BTreeSet, VecDeque};

#[derive(Debug, Default, Hash)]
pub struct BlockingState {
    paused: Option<CutId>,
    pause_asked: Option<VnodeId>,
    drain_asked: Option<VnodeId>,
    /// The cut whose marker this vnode wrote; until END it refuses every prepare.
    marker_written: Option<CutId>,
    /// Client transactions waiting for the resume, with when each arrived.
    queue: VecDeque<(ClientId, u64, Request, u64)>,
    /// How long each transaction that waited was held back (drained by the driver).
    stalls_us: Vec<u64>,
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
            self.blocking.queue.push_back((client, req, request.clone(), self.now_us));
        }
        true
    }

    pub(crate) fn blocking_pause(&mut self, from: VnodeId, cut: CutId) {
        if self.cut.last_finished >= Some(cut) {
            return; // already ended (a late message): never pause for it
        }
        self.blocking.paused = Some(cut);
        self.blocking.pause_asked = Some(from);
        self.blocking_progress();
    }

    pub(crate) fn blocking_drain(&mut self, from: VnodeId, cut: CutId) {
        if self.blocking.paused == Some(cut) && self.cut.last_finished >= Some(cut) {
            return self.send_cut(&from, CutMsg::Drained { cut }); // drained already: a resent DRAIN
        }
        if self.blocking.paused == Some(cut) {
            self.blocking.drain_asked = Some(from);
            self.blocking_progress();
        }
    }

    pub(crate) fn blocking_check(&mut self, from: VnodeId, cut: CutId) {
        let paused = self.blocking.paused == Some(cut);
        self.send_cut(&from, CutMsg::Checked { cut, paused });
    }

    /// Runs after every step while paused.
    pub(crate) fn blocking_progress(&mut self) {
        let Some(cut) = self.blocking.paused else { return };
        if self.near.txs.is_empty() {
            if let Some(to) = self.blocking.pause_asked.take() {
                self.send_cut(&to, CutMsg::Paused { cut });
            }
        }
        if self.part.prepared.is_empty() {
            if let Some(to) = self.blocking.drain_asked.take() {
                self.out.append(Record::CutStart { cut });
                self.cut.note_started(cut);
                let empty = BTreeSet::new();
                self.out.append(Record::CutFinish(CutFinish { cut, before: empty.clone(), after: empty }));
                self.blocking.marker_written = Some(cut);
                self.send_cut(&to, CutMsg::Drained { cut });
            }
        }
    }

    pub(crate) fn blocking_resume(&mut self, cut: CutId) {
        if self.blocking.paused.is_none_or(|p| p > cut) {
            return;
        }
        let BlockingState { queue, mut stalls_us, .. } = std::mem::take(&mut self.blocking);
        for (client, req, request, since_us) in queue {
            stalls_us.push(self.now_us - since_us);
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
