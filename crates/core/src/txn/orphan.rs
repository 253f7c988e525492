//! 2PC without its near (issue 30; only with the cluster setting `failover` on): a participant in
//! doubt whose near — its first committer — is on a host the metadata records dead resolves the
//! transaction with the other live vnodes instead of waiting for that host.
//!
//! 1. **An acknowledged commit is on two hosts.** Every branch that commits on a `Finish` answers
//!    `FinishAck` once its outcome record is durable, and the near answers its client only once
//!    its own decision is durable and a `FinishAck` came from a vnode on another host (at once
//!    when every replica it wrote is on its own host). So after any one host's death a live
//!    vnode holds the commit of every acknowledged transaction.
//! 2. **Recovery.** The branch asks every store vnode on a live host `Recover{tx}`. Each answers
//!    committed (it committed a branch of `tx`: `decided`), aborted (a tombstone), or in doubt —
//!    and before answering it *fences* every branch of `tx` it holds, and tombstones a `tx` it
//!    never saw, durably (`TxRolledBack` without a branch): a fenced branch takes no `Finish` from
//!    the near and never asks it again, whatever that host does later; a late `Prepare` is
//!    refused. Any committed → commit. Every live vnode answered and none committed → abort: no
//!    branch can commit any more, and by 1. no client heard of a commit.
//! 3. **When.** Only once no chain holds a vnode of a host recorded dead (the promotions are
//!    done): a participant the promotions have not yet replaced could otherwise come back, ask its
//!    near, and commit what the others aborted; with a partition left without live replica the
//!    branch waits.
//!
//! Invariant: a branch that is prepared and whose `tx` is tombstoned here is fenced.

use crate::ids::{Branch, CutId, TxId, VnodeId};
use crate::message::{AbortReason, TxStatus, TxnMsg};
use crate::record::Record;
use crate::txn::participant::Decision;
use crate::vnode::Vnode;
use std::collections::{BTreeMap, BTreeSet};

/// The recoveries this vnode runs, by transaction.
#[derive(Debug, Default, Hash)]
pub struct Orphans {
    recovering: BTreeMap<TxId, BTreeSet<VnodeId>>,
    /// Near: committed transactions whose client waits for a `FinishAck` from another host.
    pub(crate) unacked: BTreeMap<TxId, UnackedCommit>,
}

#[derive(Debug, Hash)]
pub(crate) struct UnackedCommit {
    pub(crate) client: crate::ids::ClientId,
    pub(crate) req: u64,
    pub(crate) response: crate::io::Response,
    pub(crate) tx_cut: Option<CutId>,
}

impl Vnode {
    /// Whether `tx`'s branches here are fenced: tombstoned, with failover on (the module's
    /// invariant). A branch tombstoned for another reason (its sibling branch here was refused
    /// durably) is settled by recovery too, which then finds the refusal and aborts.
    pub(crate) fn fenced(&self, tx: &TxId) -> bool {
        self.part.tombstones.contains(tx) && self.failover_on()
    }

    /// A 2PC branch in doubt: recover without the near when its host is recorded dead or the
    /// branch is fenced already; `false` when the near is to be asked as before.
    pub(crate) fn recover_orphan(&mut self, branch: &Branch) -> bool {
        let Some(p) = self.part.prepared.get(branch) else { return true };
        let near = p.rec.first_committer.clone();
        if p.rec.one_phase || !(self.failing_over(&near) || self.fenced(&branch.tx)) {
            return false;
        }
        if !self.promotions_done() {
            return true; // a replica of a dead host still in a chain: wait (module, point 3)
        }
        let tx = branch.tx.clone();
        self.fence(&tx);
        let me = self.cfg.id.clone();
        let live: BTreeSet<VnodeId> =
            self.cfg.placement.vnodes().into_iter().filter(|v| *v != me && !self.failing_over(v)).collect();
        self.orphans.recovering.insert(tx.clone(), live.clone());
        for v in &live {
            self.send_txn(v, TxnMsg::Recover { tx: tx.clone() });
        }
        self.recovery_progress(&tx);
        true
    }

    /// Whether no chain holds a vnode of a host the metadata records dead.
    fn promotions_done(&self) -> bool {
        let p = &self.cfg.placement;
        (0..p.partitions()).all(|i| p.chain(crate::ids::PartitionId(i)).iter().all(|v| !self.failing_over(v)))
    }

    /// Tombstones `tx` durably, once: fences every branch of it held here.
    fn fence(&mut self, tx: &TxId) {
        if self.part.tombstones.insert(tx.clone()).is_none() {
            self.out.append(Record::TxRolledBack { tx: tx.clone(), branch: None });
        }
    }

    /// Another vnode recovers `tx`: what this one knows, fencing first (the answer leaves only
    /// once the tombstone is durable).
    ///
    /// The near's own decision is not a commit here: it counts only once a branch holds it, and a
    /// recovery runs because no live one may (`--tree --failover` seed 203: the near's host came
    /// back with its decision durable after the others had aborted without it).
    pub(crate) fn on_recover(&mut self, from: VnodeId, tx: TxId) {
        let committed = self.near.decided.get(&tx).filter(|_| tx.near != self.cfg.id);
        let status = if let Some(tx_cut) = committed {
            TxStatus::Committed { tx_cut: *tx_cut }
        } else {
            let held = self.part.prepared.keys().any(|b| b.tx == tx);
            self.fence(&tx);
            if held {
                TxStatus::Pending
            } else {
                TxStatus::Aborted
            }
        };
        self.send_txn(&from, TxnMsg::Recovered { tx, status });
    }

    pub(crate) fn on_recovered(&mut self, from: VnodeId, tx: TxId, status: TxStatus) {
        let Some(waiting) = self.orphans.recovering.get_mut(&tx) else { return };
        if let TxStatus::Committed { tx_cut } = status {
            self.orphans.recovering.remove(&tx);
            return self.settle_orphan(&tx, Decision::Commit { tx_cut });
        }
        waiting.remove(&from);
        self.recovery_progress(&tx);
    }

    fn recovery_progress(&mut self, tx: &TxId) {
        if self.orphans.recovering.get(tx).is_some_and(|w| w.is_empty()) {
            self.orphans.recovering.remove(tx);
            self.settle_orphan(tx, Decision::Abort(AbortReason::PresumedAbort));
        }
    }

    fn settle_orphan(&mut self, tx: &TxId, decision: Decision) {
        let branches: Vec<Branch> = self.part.prepared.keys().filter(|b| &b.tx == tx).cloned().collect();
        for branch in branches {
            self.finish_prepared(&branch, decision.clone());
        }
    }

    /// Near: a participant's commit is durable. The client hears of the commit once one is on
    /// another host than this one (module, point 1).
    pub(crate) fn on_finish_ack(&mut self, from: VnodeId, tx: TxId) {
        if from.host == self.cfg.id.host {
            return;
        }
        if let Some(u) = self.orphans.unacked.remove(&tx) {
            self.reply_revealing(u.tx_cut, u.client, u.req, u.response);
        }
    }

    /// Near: whether a commit of `writes` must wait for a `FinishAck` from another host: with
    /// failover on, when a replica of a key it wrote is on another host.
    pub(crate) fn commit_needs_second_host(&self, writes: &[crate::store::ResolvedWrite]) -> bool {
        let on_tree = self.tree.as_ref().is_some_and(|t| crate::txn::promotion::failover_on(t.alter.metadata()));
        let p = &self.cfg.placement;
        on_tree && writes.iter().any(|w| p.chain(p.partition_of(&w.key)).iter().any(|v| v.host != self.cfg.id.host))
    }
}
