//! The root: it orders alterations one at a time (seed 004 point 6: one logical path), and fails
//! over "the same way" as any parent (points 1–3) through terms, without two roots ever both
//! answering `ok` for different alterations at one place in the order.
//!
//! A parent's heartbeat is not a lease: during a split a secondary root and the primary may both
//! think the root's children are theirs. So the root's children vote, as in Raft:
//! - the *voters* are the primary root and its configured children, one per host over three hosts
//!   or more (`root_voters`); a majority of them is needed for anything;
//! - a root (the primary when it starts, or a secondary started by an assisting child) claims a
//!   term higher than any it knows; a child promises itself to at most one root per term, durably
//!   (`PersistTerm`), and refuses alterations of lower terms;
//! - with promises from a majority, the root adopts the newest metadata among them (by version,
//!   `(term, seq)`) and orders in its term; the first thing it orders is `root` = its name and term;
//! - the root answers `ok` only for an alteration of its own term that a majority confirmed.
//!
//! Invariant: at most one root wins a term (each voter promises once per term; the primary votes
//! only for itself).
//! Invariant: an alteration answered `ok` is in the metadata of every later term's root, since
//! the majority that confirmed it and the majority that promised share a voter, and a voter's
//! version only grows.
//!
//! A child prefers its primary root: it promises to a secondary only while the primary is silent,
//! and promises to the primary whenever it claims a higher term — which is the switch-back.

use super::cluster;
use super::io::{AlterMsg, AlterOutput};
use super::metadata::{md5_of, AlterRecord, Metadata, ProposalId, View};
use super::node::AlterNode;
use super::order::{AlterSeq, MetaVersion, Term};
use crate::ids::VnodeId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The voters of a root's terms, from the primary root and its configured children.
///
/// Over three hosts or more, one per host — the first child on each host, and the root only if no
/// child runs on its host — so that one host's crash takes at most one vote and the others stay a
/// majority: with three hosts, the root and `store0@node1` both voted from node1, and killing node1
/// left 2 of 4 voters, so no alteration (no cut, no failover) until it came back. Over one or two
/// hosts no choice survives the loss of every host, and every configured vnode votes as before
/// (the host with fewer votes can be lost).
///
/// Invariant: a function of the configuration alone, so the primary root, its secondaries and
/// every copy of the config count the same voters and the same majority.
pub fn root_voters(primary_root: &VnodeId, children: &[VnodeId]) -> Vec<VnodeId> {
    let all: Vec<&VnodeId> = children.iter().chain([primary_root]).collect();
    let mut per_host: Vec<VnodeId> = vec![];
    for v in &all {
        if !per_host.iter().any(|p| p.host == v.host) {
            per_host.push((*v).clone());
        }
    }
    let voters = if per_host.len() >= 3 { per_host } else { all.into_iter().cloned().collect() };
    debug_assert!(!voters.is_empty(), "a root has at least itself as a voter");
    voters
}

/// Proposals the root holds waiting to be ordered; beyond this it refuses new ones.
pub const QUEUE_MAX: usize = 1_024;

/// Every vnode's promised root term; at a root, its lead and the proposals it will order.
#[derive(Debug, Default)]
pub(super) struct RootState {
    /// The highest root term this vnode promised itself to or claimed (durable: `PersistTerm`).
    /// Invariant: never decreases (`promise`).
    pub(super) term: Term,
    /// At a root: its campaign for a term, or the term it orders in.
    pub(super) lead: Option<Lead>,
    /// Root only: proposals waiting to be ordered.
    /// Invariant: at most `QUEUE_MAX`, each proposal once.
    pub(super) queue: VecDeque<Queued>,
}

/// A proposal waiting at the root to be ordered.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) id: ProposalId,
    pub(super) record: AlterRecord,
}

impl RootState {
    /// Invariant: a promised term never goes back.
    fn promise(&mut self, term: Term) {
        assert!(term > self.term, "a promised term never goes back: {term} after {}", self.term);
        self.term = term;
    }
}

#[derive(Debug, Hash)]
pub(crate) enum Lead {
    /// Claimed `term`; promises so far, with each voter's metadata.
    Campaign { term: Term, promises: BTreeMap<VnodeId, Metadata> },
    /// Won `term`: orders alterations in it.
    Active { term: Term },
}

impl AlterNode {
    pub(super) fn is_root(&self) -> bool {
        self.cfg.parents.is_empty()
    }

    /// The term this root orders in, if it won one.
    pub(super) fn lead_term(&self) -> Option<Term> {
        match self.root.lead {
            Some(Lead::Active { term }) => Some(term),
            _ => None,
        }
    }

    /// What a root's heartbeat says of its term (`Some(Term::ZERO)`: none won yet); other parents
    /// say nothing.
    pub(super) fn heartbeat_lead(&self) -> Option<Term> {
        self.is_root().then(|| self.lead_term().unwrap_or(Term::ZERO))
    }

    /// The primary root's name (a secondary root stands in for it).
    fn primary_root(&self) -> &VnodeId {
        self.cfg.secondary_of.as_ref().unwrap_or(&self.cfg.id)
    }

    fn is_voter(&self, v: &VnodeId) -> bool {
        root_voters(self.primary_root(), &self.cfg.children).contains(v)
    }

    /// Whether the voters in `oks`, with the primary root's own vote when this is it and it
    /// votes, are more than half of the voters (`root_voters`, computed once per call).
    pub(super) fn quorum(&self, oks: &BTreeSet<VnodeId>) -> bool {
        if self.cfg.breaks.root_without_quorum {
            return true;
        }
        let voters = root_voters(self.primary_root(), &self.cfg.children);
        let own = (self.cfg.secondary_of.is_none() && voters.contains(&self.cfg.id)) as usize;
        let others = oks.iter().filter(|v| voters.contains(v) && **v != self.cfg.id).count();
        own + others > voters.len() / 2
    }

    /// Invariant: once a vnode promised `term` it never confirms an alteration of a lower term —
    /// the metadata it promised with holds everything it ever confirmed.
    pub(super) fn set_term(&mut self, term: Term) {
        self.root.promise(term);
        self.out.push(AlterOutput::PersistTerm { term });
        if !self.is_root() && self.in_flight.as_ref().is_some_and(|f| f.at.term < term) {
            self.leave_in_flight();
        }
    }

    /// A root that does not order in a term claims a new one, on start and on every heartbeat tick.
    pub(super) fn check_lead(&mut self) {
        if self.is_root() && self.lead_term().is_none() {
            self.campaign();
        }
    }

    fn campaign(&mut self) {
        let term = self.root.term.next();
        self.set_term(term);
        let mut promises = BTreeMap::new();
        if self.cfg.secondary_of.is_none() {
            promises.insert(self.cfg.id.clone(), self.metadata.clone());
        }
        self.root.lead = Some(Lead::Campaign { term, promises });
        let children: Vec<VnodeId> = self.children_seen_us.keys().cloned().collect();
        for c in &children {
            self.send(c, AlterMsg::Claim { term });
        }
        self.maybe_win();
    }

    /// A child of a root: promise, if `term` is new and `from` is a root this vnode may follow.
    /// A claim for the term already promised is refused, even from the root it was promised to:
    /// which root that was is not kept across a restart (a repeated claim only comes from a relay,
    /// and the root counted the first answer).
    pub(super) fn on_claim(&mut self, from: &VnodeId, term: Term) {
        if term <= self.root.term || !self.may_follow(from) {
            return self.refuse(from);
        }
        self.set_term(term);
        self.follow_root(from);
        let metadata = Some(self.metadata.clone());
        self.send(from, AlterMsg::Promise { term, granted: true, metadata });
    }

    /// Tell a root of an older term which term this vnode is promised to.
    pub(super) fn refuse(&mut self, to: &VnodeId) {
        self.send(to, AlterMsg::Promise { term: self.root.term, granted: false, metadata: None });
    }

    /// The primary root always (it returned: switch back); a secondary only while the primary is
    /// silent and no other secondary is followed and alive.
    fn may_follow(&self, root: &VnodeId) -> bool {
        if self.cfg.parents.first() == Some(root) {
            return true;
        }
        let f = &self.failover;
        let other = f.secondary.as_ref().is_some_and(|s| s != root && !self.silent(f.secondary_seen_us));
        self.silent(f.primary_seen_us) && !other
    }

    fn follow_root(&mut self, root: &VnodeId) {
        if self.cfg.parents.first() == Some(root) {
            if self.failover.secondary.is_some() || self.failover.election.is_some() {
                self.switch_back();
            }
            return;
        }
        if self.failover.secondary.as_ref() != Some(root) {
            self.leave_in_flight();
            self.failover.election = None;
            self.failover.secondary = Some(root.clone());
            self.failover.secondary_seen_us = self.now_us;
        }
    }

    /// A term seen on an alteration or a heartbeat of the root followed: promised from now on.
    pub(super) fn adopt_term(&mut self, term: Term) {
        if term > self.root.term {
            self.set_term(term);
        }
    }

    pub(super) fn on_promise(&mut self, from: &VnodeId, term: Term, granted: bool, metadata: Option<Metadata>) {
        if !granted {
            return self.on_refused(term);
        }
        let voter = self.is_voter(from);
        let Some(Lead::Campaign { term: t, promises }) = self.root.lead.as_mut() else { return };
        if *t == term && voter {
            promises.insert(from.clone(), metadata.unwrap_or_default());
            self.maybe_win();
        }
    }

    /// A higher term exists: this root's claim or term is over; it claims again on the next tick.
    fn on_refused(&mut self, term: Term) {
        if term <= self.root.term {
            return;
        }
        self.root.promise(term); // persisted with the next claim, which goes above it
        self.root.lead = None;
        if let Some(f) = self.in_flight.as_mut().filter(|_| self.cfg.parents.is_empty()) {
            f.fail();
            self.finish(); // answered as failed: no longer this root's term
        }
    }

    fn maybe_win(&mut self) {
        let Some(Lead::Campaign { term, promises }) = self.root.lead.as_ref() else { return };
        let oks: BTreeSet<VnodeId> = promises.keys().cloned().collect();
        if !self.quorum(&oks) {
            return;
        }
        let term = *term;
        debug_assert!(promises.values().all(|m| m.view() == View::Full), "a voter keeps a whole copy");
        // Invariant (`MetaVersion`): equal versions, equal metadata — the catch-up may keep
        // either of two equal copies (a restarted voter once rebuilt another history at the
        // same version: `tests/tree_recovery.rs`).
        debug_assert!(
            promises
                .values()
                .chain([&self.metadata])
                .all(|m| promises.values().all(|o| o.version() != m.version() || o.md5() == m.md5())),
            "two copies at one version differ"
        );
        let whole = promises.values().filter(|m| m.view() == View::Full);
        let newest = whole.max_by_key(|m| m.version()).filter(|m| m.version() > self.metadata.version());
        if let Some(m) = newest.cloned() {
            // Catch up before ordering: the newest copy among a majority holds every alteration
            // a root ever answered `ok`.
            self.set_metadata(m.clone());
            self.out.push(AlterOutput::PersistClone { metadata: m });
        }
        assert!(self.in_flight.is_none(), "a root in a campaign orders nothing");
        let record = AlterRecord::set("root", format!("{} term {term}", self.cfg.id));
        // The term's first record is its `root` record, right on the copy adopted; proposals queued
        // during the campaign (own reports, retries) wait behind it. Queued behind them, it came
        // seqs later, and a stale root that ordered it late in its lost term (when the next term
        // had answered ok there) looked like a root winning a term on a copy missing alterations
        // answered ok (`--tree` seed 8958). The lead is still a campaign: `propose_own` only
        // queues it (at `QUEUE_MAX` it is refused, and retried).
        let n = self.propose_own(record);
        let id = ProposalId { initiator: self.cfg.id.clone(), n };
        let first = !self.cfg.breaks.root_record_queued;
        if let Some(i) = self.root.queue.iter().position(|q| q.id == id).filter(|_| first) {
            let root = self.root.queue.remove(i).expect("queued at i");
            self.root.queue.push_front(root);
        }
        self.root.lead = Some(Lead::Active { term });
        self.order_next();
    }

    /// A root whose own copy of its term's first record (its `root` record, `maybe_win`) read
    /// back damaged gives the term up and claims a new one on the next tick, so that no other
    /// record is ever the first one ordered in a term.
    pub(super) fn first_of_term_lost(&mut self, term: Term) {
        if self.is_root() && self.lead_term() == Some(term) && self.metadata.term() < term {
            self.root.lead = None;
        }
    }
}

// ---- the orderer: proposals travel up to the root, which orders one at a time ----

impl AlterNode {
    pub(super) fn on_propose(&mut self, id: ProposalId, record: AlterRecord) {
        if let Some(parent) = self.parent().cloned() {
            return self.send(&parent, AlterMsg::Propose { id, record });
        }
        if self.root.queue.len() >= QUEUE_MAX {
            // Back-pressure: the initiator retries with back-off, then reports the failure.
            let outcome = AlterMsg::Outcome { id: id.clone(), seq: AlterSeq::ZERO, ok: false, applied: 0 };
            return self.answer(&id, outcome);
        }
        if cluster::is_observation(&record.key) {
            self.supersede_observations(&id, &record);
        }
        if !self.root.queue.iter().any(|q| q.id == id) {
            self.root.queue.push_back(Queued { id, record });
        }
        assert!(self.root.queue.len() <= QUEUE_MAX);
        self.order_next();
    }

    /// Drops from the queue every observation of `record`'s key not yet ordered, answering each
    /// failed (its initiator withdraws it, or retries it if it still holds): only the latest
    /// observation matters, and every one ordered costs a round of the whole tree. After a heal,
    /// a deep tree's parents queued dozens of reports that later ones contradicted, and the
    /// cut's phases waited behind them for seconds (`--tree` seed 1185, 12 vnodes, fan-out 2).
    fn supersede_observations(&mut self, newer: &ProposalId, record: &AlterRecord) {
        let (stale, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.root.queue)
            .into_iter()
            .partition(|q| q.record.key == record.key && &q.id != newer);
        self.root.queue = keep.into();
        for Queued { id, .. } in stale {
            let outcome = AlterMsg::Outcome { id: id.clone(), seq: AlterSeq::ZERO, ok: false, applied: 0 };
            self.answer(&id, outcome);
        }
    }

    /// Sends an outcome to its initiator (this vnode itself, possibly).
    pub(super) fn answer(&mut self, id: &ProposalId, outcome: AlterMsg) {
        if id.initiator == self.cfg.id {
            self.on_message(self.cfg.id.clone(), outcome);
        } else {
            self.send(&id.initiator.clone(), outcome);
        }
    }

    /// The root orders one alteration at a time, and only in a term it won.
    pub(super) fn order_next(&mut self) {
        let Some(term) = self.lead_term() else { return };
        if self.in_flight.is_some() {
            return;
        }
        let Some(Queued { id, mut record }) = self.root.queue.pop_front() else { return };
        // Every copy skips a proposal it applied before (`Metadata::apply`): a retried or
        // duplicated one, ordered again, changes nothing (no lost update).
        record.origin = Some(id.clone());
        let at = MetaVersion { term, seq: self.metadata.seq().next() };
        let md5 = md5_of(&record.encode(at));
        self.begin(at, id, record, md5);
    }
}
