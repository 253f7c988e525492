//! A branch of the confirmation tree (seed 004 points 4 and 5): the one alteration in flight
//! through this vnode. It arrives from the parent (or is ordered here, at the root), is written,
//! read back and compared by md5, applied, forwarded to the working children, and confirmed to
//! the parent once every one of them confirmed — the branch transaction.
//!
//! Invariant: at most one alteration is in flight (`AlterNode::in_flight`), and it is begun only on
//! top of the version it was ordered after.
//! Invariant: a branch confirms `ok` only once its own copy was read back intact and applied and
//! `waiting` is empty (every working child confirmed `ok`).

use super::io::{AlterMsg, AlterOutput, AlterTimer};
use super::metadata::{md5_of, AlterRecord, Applied, Md5Sum, OrderedRecord, ProposalId};
use super::node::AlterNode;
use super::order::{AlterSeq, MetaVersion, Term};
use crate::ids::VnodeId;
use std::collections::BTreeSet;

/// Where this vnode's own copy of the alteration in flight stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OwnCopy {
    /// Written, not yet read back and applied.
    Pending,
    /// Read back intact and applied by the host.
    Applied,
    /// Read back damaged, refused by the host, or the branch given up.
    Failed,
}

/// The alteration in flight through this vnode.
#[derive(Debug, Hash)]
pub(super) struct InFlight {
    /// Its place in the order.
    pub(super) at: MetaVersion,
    id: ProposalId,
    record: AlterRecord,
    md5: Md5Sum,
    /// This vnode's own copy: what the host said when it acted on it (`AlterInput::Applied`).
    own: OwnCopy,
    /// Working children that have not confirmed yet.
    /// Invariant: filled once, when this vnode applied its copy and forwarded it; only shrinks.
    waiting: BTreeSet<VnodeId>,
    /// The branch failed: its own copy, or a child confirmed `ok: false`.
    failed: bool,
    /// Leaves of this branch that applied it, this one included.
    applied_count: u64,
    /// At the root: the voters (children) that confirmed `ok`.
    oks: BTreeSet<VnodeId>,
    /// Applying it changed nothing it asked for (`Applied::Refused`): the root answers failed.
    refused: bool,
}

impl InFlight {
    fn new(at: MetaVersion, id: ProposalId, record: AlterRecord, md5: Md5Sum) -> Self {
        InFlight {
            at,
            id,
            record,
            md5,
            own: OwnCopy::Pending,
            waiting: BTreeSet::new(),
            failed: false,
            applied_count: 0,
            oks: BTreeSet::new(),
            refused: false,
        }
    }

    pub(super) fn fail(&mut self) {
        self.failed = true;
        if self.own == OwnCopy::Pending {
            self.own = OwnCopy::Failed;
        }
    }

    /// A working child's confirmation; one that is not waited for (a duplicate, a late one from a
    /// child not forwarded to) counts for nothing.
    fn confirm(&mut self, from: &VnodeId, ok: bool, applied: u64) {
        if self.waiting.remove(from) {
            self.failed |= !ok;
            self.applied_count += applied;
            if ok {
                self.oks.insert(from.clone());
            }
        }
    }
}

impl AlterNode {
    /// Invariant (produced here, relied on by `on_clone` and `order_next`): one in flight.
    pub(super) fn begin(&mut self, at: MetaVersion, id: ProposalId, record: AlterRecord, md5: Md5Sum) {
        assert!(self.in_flight.is_none(), "one alteration in flight at a time");
        let bytes = record.encode(at);
        self.in_flight = Some(InFlight::new(at, id, record, md5));
        self.out.push(AlterOutput::Persist { seq: at.seq, bytes });
    }

    /// Alteration `at`, ordered on top of version `(prev_term, at.seq.prev())`.
    pub(super) fn on_alter(
        &mut self,
        from: &VnodeId,
        at: MetaVersion,
        prev_term: Term,
        id: ProposalId,
        record: AlterRecord,
        md5: Md5Sum,
    ) {
        let MetaVersion { term, seq } = at;
        if self.parent() != Some(from) {
            return; // not our parent (any more): it will time out on us
        }
        if term < self.root.term {
            // Ordered by a root that lost its term: refuse, and tell it.
            self.send(from, AlterMsg::Confirm { term, seq, ok: false, applied: 0 });
            return self.refuse(from);
        }
        self.adopt_term(term);
        if self.in_flight.as_ref().is_some_and(|f| f.at == at) {
            return;
        }
        if MetaVersion::new(prev_term, seq.prev()) != self.metadata.version() || self.in_flight.is_some() {
            // A gap or a different history: fail this one and catch up by cloning.
            self.send(from, AlterMsg::Confirm { term, seq, ok: false, applied: 0 });
            return self.fetch(from);
        }
        self.begin(at, id, record, md5);
    }

    /// Seed 004 point 4: the record is read after write and its md5 compared with the one sent.
    pub(super) fn on_persisted(&mut self, seq: AlterSeq, bytes: &[u8]) {
        // A second write of the same alteration (it was begun again after a change of parent)
        // reads back after the first was applied: nothing more to do.
        let next = self.metadata.seq().next() == seq;
        let Some(f) = self.in_flight.as_mut().filter(|f| f.at.seq == seq && next) else { return };
        let read_back = AlterRecord::decode(bytes).filter(|r| r.at == f.at);
        let intact = md5_of(bytes) == f.md5 || self.cfg.breaks.skip_md5;
        let Some(OrderedRecord { at: MetaVersion { term, .. }, record }) = read_back.filter(|_| intact) else {
            f.failed = true;
            f.own = OwnCopy::Failed;
            let term = f.at.term;
            self.first_of_term_lost(term);
            return self.finish();
        };
        // What is applied is what was read back: the md5 is what keeps a bad copy out.
        let (id, md5) = (f.id.clone(), f.md5);
        let prev_term = self.metadata.term();
        let verdict = self.metadata.apply(MetaVersion { term, seq }, &record);
        self.in_flight.as_mut().expect("in flight").refused = verdict == Applied::Refused;
        self.refresh_md5();
        self.out.push(AlterOutput::PersistApplied { term, seq, record: record.clone() });
        self.out.push(AlterOutput::Apply { term, seq, record: record.clone() });
        let children = self.working_children();
        for c in &children {
            let msg = AlterMsg::Alter { term, prev_term, seq, id: id.clone(), record: record.clone(), md5 };
            self.send(c, msg);
        }
        let f = self.in_flight.as_mut().expect("in flight");
        assert!(f.waiting.is_empty(), "`waiting` is filled once");
        f.waiting = children.into_iter().collect();
        self.timer(AlterTimer::Confirm(seq), self.cfg.confirm_timeout_us);
    }

    pub(super) fn on_applied(&mut self, seq: AlterSeq, ok: bool) {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.at.seq == seq) else { return };
        f.own = if ok { OwnCopy::Applied } else { OwnCopy::Failed };
        // Only leaves (store vnodes) are counted: a manager and the secondary standing in for it
        // may both be alive for a moment, and the cut process needs every store vnode, by name.
        let leaf = self.cfg.children.is_empty() && self.cfg.secondary_of.is_none();
        f.applied_count += (ok && leaf) as u64;
        self.maybe_finish();
    }

    pub(super) fn on_confirm(&mut self, from: &VnodeId, at: MetaVersion, ok: bool, applied: u64) {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.at == at) else { return };
        f.confirm(from, ok, applied);
        self.maybe_finish();
    }

    /// Whether a branch may confirm before its children (`--break confirm-before-children`).
    fn confirms_early(&self) -> bool {
        self.cfg.breaks.confirm_before_children && self.parent().is_some()
    }

    fn maybe_finish(&mut self) {
        let Some(f) = self.in_flight.as_ref() else { return };
        let children_done = f.waiting.is_empty() || self.confirms_early();
        if f.own != OwnCopy::Pending && children_done {
            self.finish();
        }
    }

    /// Confirm to the parent — or, at the root, answer the initiator and order the next one.
    pub(super) fn finish(&mut self) {
        let early = self.confirms_early();
        let f = self.in_flight.take().expect("in flight");
        let ok = !f.failed && f.own == OwnCopy::Applied;
        assert!(!ok || f.waiting.is_empty() || early, "confirmed ok with children waiting");
        let applied = f.applied_count;
        match self.parent().cloned() {
            Some(parent) => self.send(&parent, AlterMsg::Confirm { term: f.at.term, seq: f.at.seq, ok, applied }),
            None => {
                // Invariant: the root answers `ok` only for an alteration of its own term that a
                // majority of the voters hold — every later root's catch-up finds it.
                let held = self.lead_term() == Some(f.at.term) && self.quorum(&f.oks);
                if held && f.own == OwnCopy::Applied {
                    self.committed = self.committed.max(f.at);
                }
                let ok = ok && held;
                let ok = ok && !self.cfg.breaks.fail_every_alteration && !f.refused;
                let outcome = AlterMsg::Outcome { id: f.id.clone(), seq: f.at.seq, ok, applied };
                self.answer(&f.id, outcome);
                self.order_next();
            }
        }
    }

    pub(super) fn on_confirm_timeout(&mut self, seq: AlterSeq) {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.at.seq == seq) else { return };
        f.fail();
        self.finish();
    }

    /// The parent changed: an alteration in flight from the old one is not confirmed to anyone
    /// (its root fails it on a timeout); a new one can come in at once.
    pub(super) fn leave_in_flight(&mut self) {
        self.in_flight = None;
    }
}
