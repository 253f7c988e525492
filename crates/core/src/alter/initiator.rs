//! The initiator's side of an alteration: propose, wait for the outcome, retry a bounded number
//! of times with doubling back-off, then report (seed 004 point 6: "should be repeated by the
//! node which initiated the alteration").

use super::metadata::AlterRecord;
use super::node::{AlterNode, AlterOutput, AlterTimer, Proposal, ProposalId};

impl AlterNode {
    pub(super) fn propose(&mut self, n: u64, record: AlterRecord) {
        let id = ProposalId { initiator: self.cfg.id.clone(), n };
        self.proposals.insert(id.clone(), Proposal { record: record.clone(), attempts: 1 });
        self.submit(id, record, 1);
    }

    pub(super) fn submit(&mut self, id: ProposalId, record: AlterRecord, attempt: u32) {
        self.timer(AlterTimer::ProposeTimeout(id.clone(), attempt), self.cfg.propose_timeout_us);
        self.on_propose(id, record);
    }

    pub(super) fn on_outcome(&mut self, id: ProposalId, ok: bool, applied: u64, seq: u64) {
        let Some(p) = self.proposals.get(&id) else { return };
        if ok {
            let attempts = p.attempts;
            self.proposals.remove(&id);
            self.own_done(id.n);
            return self.out.push(AlterOutput::Done { id, ok: true, attempts, applied, seq });
        }
        self.retry(id);
    }

    /// Bounded retries with doubling back-off; then a clear failure.
    pub(super) fn retry(&mut self, id: ProposalId) {
        let Some(p) = self.proposals.get_mut(&id) else { return };
        if p.attempts > self.cfg.retries_max {
            let attempts = p.attempts;
            self.proposals.remove(&id);
            self.own_done(id.n);
            return self.out.push(AlterOutput::Done { id, ok: false, attempts, applied: 0, seq: 0 });
        }
        p.attempts += 1;
        let attempt = p.attempts;
        let backoff_us = self.cfg.retry_backoff_us << (attempt - 2).min(10);
        self.timer(AlterTimer::Resubmit(id, attempt), backoff_us);
    }

    pub(super) fn is_current(&self, id: &ProposalId, attempt: u32) -> bool {
        self.proposals.get(id).is_some_and(|p| p.attempts == attempt)
    }
}
