//! The cut process on the cluster tree (DESIGN §6): START → STARTED → FINISH → END are four
//! branch-confirmed alterations of the metadata key `cut/<id>`, proposed by the operator at the
//! root. A store vnode is a leaf of the tree; it acts on each phase and confirms:
//! START — start the local cut; STARTED — release replies held for real-time safety;
//! FINISH — confirm when the local cut is over, with its verdict; END — stop colouring.
//! A successful cut's END writes `END:ok` into the metadata: that entry is the snapshot catalog.
//!
//! Real-time safety's hold is the cut's main cost to clients (every reply about an after
//! transaction waits from the leaf's START to its STARTED), so the operator shortens it: once
//! START was applied on every store vnode it sends each of them `CutMsg::StartedEverywhere`
//! directly, one hop, and they release their held replies then instead of after the STARTED
//! alteration's three persisted, read-back hops down the tree. The notice states a fact the
//! branch confirmations already established (every leaf logged `CutStart` durably), so it needs
//! no durability of its own; a leaf that misses it releases at STARTED as before.
//!
//! Under `strategy = blocking` (the cluster's config, the same on every leaf) the same four
//! alterations carry the blocking strategy (`cut::blocking`): START — pause, confirm once no
//! transaction this vnode coordinates is open; STARTED — confirm once nothing is prepared here,
//! after appending the marker; FINISH — confirm ok only if still paused for this cut since its
//! START (a leaf that restarted lost its pause: the cut fails, as the coordinator's CHECK);
//! END (ok or failed) — resume. The operator is the same: STARTED is proposed only after every
//! leaf paused, FINISH only after every leaf wrote its marker.

use crate::alter::{AlterInput, AlterNode, AlterOutput, AlterRecord, AlterSeq};
use crate::config::CutStrategy;
use crate::cut::operator::Phase;
use crate::ids::CutId;
use crate::io::{Output, Timer};
use crate::message::{Body, Envelope};
use crate::record::Record;
use crate::vnode::Vnode;
use std::collections::VecDeque;

/// A store vnode's place in the tree.
pub struct TreeRole {
    pub(crate) alter: AlterNode,
    pub(crate) finish_pending: Option<PendingFinish>,
    /// Set once the role was started from the log (`Restarted`).
    pub(crate) started: bool,
    /// The placement follower (`txn::promotion`).
    pub(crate) placement: crate::txn::promotion::PlacementFollower,
}

/// A FINISH alteration applied here whose verdict waits for the local cut: answered `Applied`
/// once the cut is over (`tree_local_cut_over`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingFinish {
    /// The alteration's sequence number, which the answer names.
    pub(crate) seq: AlterSeq,
    pub(crate) cut: CutId,
}

/// Whether a store vnode on `host`, whose copy of the metadata is `m`, is among those a cut
/// phase with `value` counts (`Vnode::counted_by`): every vnode for a cut without a view, else
/// one whose copy shows the view the phase names and its own host not recorded dead. The
/// simulator's cut checkers read a vnode's part in a cut by the same rule.
pub fn counts(m: &crate::alter::Metadata, host: &str, value: &[u8]) -> bool {
    use crate::alter::cluster;
    let Some(view) = Phase::view_of(value) else { return true }; // a cut over every store vnode
    cluster::cut_view(m) == view && !cluster::host_dead(m, host)
}

/// `cut/<id>` → the cut id.
pub fn cut_of(key: &str) -> Option<CutId> {
    key.strip_prefix("cut/")?.parse().ok().map(CutId)
}

impl Vnode {
    /// Feeds the tree role and carries out what it asks, until it asks nothing more.
    pub(crate) fn alter_input(&mut self, input: AlterInput) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let Some(tree) = self.tree.as_mut() else { return };
            for out in tree.alter.step(self.now_us, input) {
                if let Some(next) = self.alter_output(out) {
                    inputs.push_back(next);
                }
            }
        }
        self.follow_placement();
        self.ask_again_once_back();
        self.fail_fast_on_dead_hosts();
    }

    fn alter_output(&mut self, out: AlterOutput) -> Option<AlterInput> {
        match out {
            AlterOutput::Send { to, msg } => {
                let env = Envelope { from: self.cfg.id.clone(), to, cut: None, body: Body::Alter(msg) };
                self.out.promise(Output::Send(env));
                None
            }
            AlterOutput::Persist { seq, bytes } => {
                self.out.append(Record::Alteration { seq, bytes });
                None
            }
            AlterOutput::PersistApplied { term, seq, record } => {
                self.out.append(Record::AlterApplied { term, seq, record });
                None
            }
            AlterOutput::PersistClone { metadata } => {
                self.out.append(Record::AlterClone { metadata });
                None
            }
            // Sends that follow wait for this record to be durable (the outbox's write-ahead rule).
            AlterOutput::PersistTerm { term } => {
                self.out.append(Record::AlterTerm { term });
                None
            }
            AlterOutput::Apply { seq, record, .. } => self.apply_cut_phase(seq, &record),
            // A client's ACL change is answered; catch-up's proposals are followed by their chains.
            AlterOutput::Done { id, ok, .. } => {
                self.acl_done(id.n, ok);
                None
            }
            AlterOutput::StartSecondaryParent { id, of, metadata, term } => {
                self.out.timer(Output::StartSecondaryParent { id, of, metadata, term });
                None
            }
            AlterOutput::StopSecondaryParent { id } => {
                self.out.timer(Output::StopSecondaryParent { id });
                None
            }
            AlterOutput::SetTimer { timer, at_us } => {
                self.out.timer(Output::SetTimer { timer: Timer::Alter(timer), at_us });
                None
            }
        }
    }

    /// Acts on a phase of a cut; `Some(Applied)` when the verdict is known now.
    fn apply_cut_phase(&mut self, seq: AlterSeq, record: &AlterRecord) -> Option<AlterInput> {
        let applied = |ok| Some(AlterInput::Applied { seq, ok });
        let Some(cut) = cut_of(&record.key) else { return applied(true) };
        // Typed phases: a value that names none is refused, never taken for an END.
        let Some(phase) = Phase::parse(&record.value) else {
            debug_assert!(false, "{cut}: `{}` is no cut phase", String::from_utf8_lossy(&record.value));
            return applied(false);
        };
        if !matches!(phase, Phase::End { .. }) && !self.counted_by(&record.value) {
            return applied(false); // not among the vnodes the cut counts (`cut_members`)
        }
        if self.cfg.strategy == CutStrategy::Blocking {
            return self.apply_blocking_phase(seq, cut, phase).map(|ok| AlterInput::Applied { seq, ok });
        }
        match phase {
            Phase::Start => {
                self.start_local_cut(cut);
                self.out.hold_all(); // the confirmation promises a durable `CutStart`
                applied(self.cut.running_id() == Some(cut))
            }
            Phase::Started if self.rt.refused(cut) => applied(false),
            Phase::Started => {
                self.cut_started_everywhere(cut);
                applied(true)
            }
            Phase::Finish => match self.cut.running.as_ref().filter(|c| c.id == cut).map(|c| c.outcome.known()) {
                Some(Some(ok)) => applied(ok),
                Some(None) => {
                    self.tree.as_mut().expect("tree role").finish_pending = Some(PendingFinish { seq, cut });
                    None
                }
                None => applied(false), // never started here, or lost in a crash
            },
            Phase::End { .. } => {
                self.on_cut_end(cut);
                self.cut_started_everywhere(cut);
                applied(true)
            }
        }
    }

    /// Whether this vnode is among those a phase with `value` counts. A cut started over the live
    /// hosts (`alter::cluster::cut_members`) names the view it chose them from: a vnode whose copy
    /// of the metadata shows another view (a host recorded dead or alive since, a placement
    /// changed) or its own host dead (cut off from the root only, still hearing the tree) refuses
    /// the phase. So the vnodes that apply it are among those the operator counted, and as many as
    /// it counted means every one of them.
    fn counted_by(&self, value: &[u8]) -> bool {
        if self.cfg.breaks.cut_counts_any_vnode {
            return true;
        }
        let Some(t) = self.tree.as_ref() else { return Phase::view_of(value).is_none() };
        counts(t.alter.metadata(), &self.cfg.id.host, value)
    }

    /// The operator's notice that START{cut} was applied on every store vnode: release the
    /// replies held for it now, a tree round before the STARTED alteration arrives (which still
    /// comes, and is answered as ever). Under `blocking`, STARTED means drain, not release: the
    /// notice is none of its business.
    pub(crate) fn on_started_everywhere_notice(&mut self, cut: CutId) {
        if self.cfg.strategy == CutStrategy::Consistent {
            self.cut_started_everywhere(cut);
        }
    }

    /// A phase of a blocking cut (`cut::blocking`); `Some(ok)` when the verdict is known now.
    fn apply_blocking_phase(&mut self, seq: AlterSeq, cut: CutId, phase: Phase) -> Option<bool> {
        match phase {
            Phase::Start => self.blocking_tree_pause(seq, cut),
            Phase::Started => self.blocking_tree_drain(seq, cut),
            Phase::Finish => Some(self.blocking_still_paused(cut)),
            Phase::End { .. } => {
                self.on_cut_end(cut);
                self.blocking_resume(cut);
                Some(true)
            }
        }
    }

    /// The local cut's verdict is known: answer a FINISH that waits for it.
    pub(crate) fn tree_local_cut_over(&mut self, cut: CutId, ok: bool) {
        let Some(tree) = self.tree.as_mut() else { return };
        if let Some(pending) = tree.finish_pending.filter(|p| p.cut == cut) {
            tree.finish_pending = None;
            self.alter_input(AlterInput::Applied { seq: pending.seq, ok });
        }
    }

    /// The driver read back an alteration record that became durable.
    pub(crate) fn on_alter_persisted(&mut self, seq: AlterSeq, bytes: Vec<u8>) {
        self.alter_input(AlterInput::Persisted { seq, bytes });
    }

    /// A store vnode of the tree reads its placement from the metadata it recovered (genesis, then
    /// the alterations and clones in its log); while it runs it follows the metadata's changes
    /// (`txn::promotion`).
    pub(crate) fn placement_from_metadata(&mut self) {
        let Some(logged) = self.logged.tree.as_ref() else { return };
        if let Some(p) = crate::alter::cluster::placement(&logged.metadata) {
            self.cfg.placement = std::sync::Arc::new(p);
        }
        // What the log holds may be an alteration a change of root undid: not routed by until
        // a majority is known to hold it.
        let version = logged.metadata.version();
        if let Some(t) = self.tree.as_mut() {
            t.placement.unconfirmed = Some(version);
        }
    }

    /// The placement this vnode routes by.
    pub fn placement(&self) -> &crate::placement::Placement {
        &self.cfg.placement
    }

    /// The tree role's view, for tools and the simulator.
    pub fn tree(&self) -> Option<&AlterNode> {
        self.tree.as_ref().map(|t| &t.alter)
    }
}
