//! The initiator's side of an alteration: propose, wait for the outcome, retry a bounded number
//! of times with doubling back-off, then report (seed 004 point 6: "should be repeated by the
//! node which initiated the alteration").

use super::io::{AlterOutput, AlterTimer};
use super::metadata::{AlterRecord, ProposalId};
use super::node::AlterNode;
use super::order::AlterSeq;
use std::collections::BTreeMap;

/// This vnode's own proposals, until each ends (applied everywhere, or given up).
#[derive(Debug, Default)]
pub(super) struct Initiator {
    /// Invariant: a proposal is here from `propose` until its `Done`; `attempts` only grows, up to
    /// `retries_max + 1`.
    proposals: BTreeMap<ProposalId, Proposal>,
    /// Proposals made on this vnode's own behalf (`propose_own`), wrapping.
    own: u64,
}

#[derive(Debug, Hash)]
struct Proposal {
    record: AlterRecord,
    attempts: u32,
}

impl AlterNode {
    /// A proposal this vnode makes on its own behalf (a report, the root's own name); numbered by
    /// time so that a restart cannot reuse a number still queued at the root.
    pub(super) fn propose_own(&mut self, record: AlterRecord) -> u64 {
        self.initiator.own = self.initiator.own.wrapping_add(1);
        let n = ProposalId::OWN_BIT | (self.now_us << 8) | (self.initiator.own & 0xff);
        self.propose(n, record);
        n
    }

    pub(super) fn propose(&mut self, n: u64, record: AlterRecord) {
        let id = ProposalId { initiator: self.cfg.id.clone(), n };
        self.initiator.proposals.insert(id.clone(), Proposal { record: record.clone(), attempts: 1 });
        self.submit(id, record, 1);
    }

    /// The back-off before attempt `attempt` is over: send the proposal again.
    pub(super) fn resubmit(&mut self, id: ProposalId, attempt: u32) {
        let record = self.initiator.proposals[&id].record.clone();
        self.submit(id, record, attempt);
    }

    fn submit(&mut self, id: ProposalId, record: AlterRecord, attempt: u32) {
        self.timer(AlterTimer::ProposeTimeout(id.clone(), attempt), self.cfg.propose_timeout_us);
        self.on_propose(id, record);
    }

    pub(super) fn on_outcome(&mut self, id: ProposalId, ok: bool, applied: u64, seq: AlterSeq) {
        let Some(p) = self.initiator.proposals.get(&id) else { return };
        if ok {
            let attempts = p.attempts;
            self.initiator.proposals.remove(&id);
            self.own_done(id.n);
            return self.out.push(AlterOutput::Done { id, ok: true, attempts, applied, seq });
        }
        self.retry(id);
    }

    /// Bounded retries with doubling back-off; then a clear failure.
    pub(super) fn retry(&mut self, id: ProposalId) {
        let Some(p) = self.initiator.proposals.get_mut(&id) else { return };
        assert!(p.attempts <= self.cfg.retries_max + 1, "attempts beyond the limit");
        if p.attempts > self.cfg.retries_max {
            let attempts = p.attempts;
            self.initiator.proposals.remove(&id);
            self.own_done(id.n);
            return self.out.push(AlterOutput::Done { id, ok: false, attempts, applied: 0, seq: AlterSeq::ZERO });
        }
        p.attempts += 1;
        let attempt = p.attempts;
        let backoff_us = self.cfg.retry_backoff_us << (attempt - 2).min(10);
        self.timer(AlterTimer::Resubmit(id, attempt), backoff_us);
    }

    /// Stops retrying own proposal `n`: what it claims is no longer true (`report.rs`). Its
    /// timers find it gone (`is_current`); an outcome that still arrives is ignored.
    pub(super) fn withdraw_own(&mut self, n: u64) {
        let id = ProposalId { initiator: self.cfg.id.clone(), n };
        self.initiator.proposals.remove(&id);
        self.own_done(n);
    }

    pub(super) fn is_current(&self, id: &ProposalId, attempt: u32) -> bool {
        self.initiator.proposals.get(id).is_some_and(|p| p.attempts == attempt)
    }
}
