//! 2PC without its near (issue 30; only with the cluster setting `failover` on): a participant in
//! doubt whose near — its first committer — is on a host the metadata records dead resolves the
//! transaction with the other live vnodes instead of waiting for that host.
//!
//! 1. **A commit is seen only once it is on two hosts.** The near tells the participants on other
//!    hosts first (and, for each primary on its own host, that primary's backups elsewhere:
//!    `FinishBackup`); each answers `FinishAck` once its outcome record is durable. Only once one
//!    came from another host does the near tell the participants on its own host, and answer its
//!    client (at once when every replica it wrote is on its own host). Until then this host's
//!    branches keep their locks, and the near answers their status questions "pending". So a
//!    commit that anyone saw — a client, or a transaction that read it — is held by a live vnode
//!    after any one host's death (`--tree --failover` seed 356: the near's own branch committed
//!    at once, a later transaction read it and committed on two hosts, and the recovery below then
//!    aborted the first: money vanished). Lost acknowledgements: the near tells the other hosts
//!    again on each timeout, backing off, and a participant that committed acknowledges again.
//! 2. **Recovery.** The branch asks every store vnode on a live host `Recover{tx}`. Each answers
//!    committed (it committed a branch of `tx`: `decided`), aborted (a tombstone), or in doubt —
//!    and before answering it *fences* every branch of `tx` it holds, and tombstones a `tx` it
//!    never saw, durably (`TxRolledBack` without a branch): a fenced branch takes no commit from
//!    the near and never asks it again, whatever that host does later; a late `Prepare` is
//!    refused. Its own commit of another branch of `tx` counts first (seed 200). Any committed →
//!    commit. Every live vnode answered and none committed → abort: no live branch can commit any
//!    more, and by 1. nobody saw a commit.
//! 3. **When.** Only once no chain holds a vnode of a host recorded dead (the promotions are
//!    done): a participant the promotions have not yet replaced could otherwise come back, ask its
//!    near, and commit what the others aborted; with a partition left without live replica the
//!    branch waits.
//!
//! Invariant: a branch that is prepared and whose `tx` is tombstoned here is fenced.

use crate::ids::{Branch, ClientRequest, CutId, Role, TxId, VnodeId};
use crate::io::{Response, Timer};
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
    /// Near: decisions taken back (`on_rolled_back`), the newest `TAKEN_BACK_KEPT`.
    taken_back: BTreeSet<TxId>,
}

/// How many decisions taken back a near remembers: its own host's branches ask about one soon
/// after, and a host seldom has more in doubt at once.
const TAKEN_BACK_KEPT: usize = 4_096;

/// A commit the near decided, waiting for a participant on another host to hold it.
#[derive(Debug, Hash)]
pub(crate) struct UnackedCommit {
    /// The client that waits for `response`.
    who: ClientRequest,
    /// `None` once the client was answered `Unknown` (the wait outlasted its timeout).
    response: Option<Response>,
    tx_cut: Option<CutId>,
    /// The participants on this host: told to commit only once another host holds the commit.
    local: Vec<VnodeId>,
    /// The participants on other hosts, told again on each timeout.
    remote: Vec<VnodeId>,
    /// The backups on other hosts of the participants on this host, each with its primary: told
    /// too, so that a transaction whose primaries are all on this host has another host to hold it.
    remote_backups: Vec<(VnodeId, VnodeId)>,
    /// When the wait times out next (a prepare's timer may fire earlier: it is not cancelled).
    deadline_us: u64,
    /// Timeouts so far (backs off the re-sent `Finish`).
    attempts: u32,
}

impl UnackedCommit {
    /// `who`'s commit of `tx_cut`, with its participants on this host (`local`) and on others.
    pub(crate) fn new(
        who: ClientRequest,
        response: Response,
        tx_cut: Option<CutId>,
        local: Vec<VnodeId>,
        remote: Vec<VnodeId>,
    ) -> Self {
        let (remote_backups, deadline_us, attempts) = (vec![], 0, 0);
        UnackedCommit { who, response: Some(response), tx_cut, local, remote, remote_backups, deadline_us, attempts }
    }
}

/// What a branch in doubt does about its near (`Vnode::recover_orphan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Orphan {
    /// Its near is not recorded dead and the branch is not fenced: ask the near as before.
    No,
    /// Recovery without the near must wait for the metadata (promotions, a second dead host): the
    /// branch looks again at the first in-doubt timeout, not backed off — the wait ends with an
    /// alteration, not with an answer (`--seed 1067 --vnodes 12 --fanout 4 --failover`: backed off
    /// to 1.6 s, a branch held its keys past healing and every cut after it failed).
    Waiting,
    /// A recovery runs (or just settled the branch): its answers come, backed off if lost.
    Recovering,
}

impl Vnode {
    /// Whether `tx`'s branches here are fenced: tombstoned, with failover on (the module's
    /// invariant). A fenced branch takes no commit but from its own recovery; an abort it takes
    /// from anyone: an abort heard anywhere means no branch of `tx` ever committed (a commit needs
    /// the near's commit decision, which is unique), so no recovery can decide commit. That also
    /// settles a branch tombstoned because a sibling branch here aborted (`--tree --failover
    /// --workload append --fanout 2` seed 232: it ignored the near's abort and held its locks for
    /// seconds, until its backed-off recovery).
    pub(crate) fn fenced(&self, tx: &TxId) -> bool {
        self.part.tombstones.contains(tx) && self.failover_on()
    }

    /// A 2PC branch in doubt: recover without the near when its host is recorded dead or the
    /// branch is fenced already.
    pub(crate) fn recover_orphan(&mut self, branch: &Branch) -> Orphan {
        let Some(p) = self.part.prepared.get(branch) else { return Orphan::Recovering };
        let near = p.rec.first_committer.clone();
        if p.rec.one_phase || !(self.failing_over(&near) || self.fenced(&branch.tx)) {
            return Orphan::No;
        }
        if !self.promotions_done() {
            return Orphan::Waiting; // a replica of a dead host still in a chain (module, point 3)
        }
        if self.hosts_recorded_dead() > 1 {
            // The commit a client saw is on the near's host and one other: with two hosts recorded
            // dead, that other may be among them (`--seed 268 --vnodes 5 --fanout 5 --failover`).
            return Orphan::Waiting;
        }
        let tx = branch.tx.clone();
        self.fence(&tx);
        let me = self.cfg.id.clone();
        if let Some(tx_cut) = self.committed_another_branch(&tx) {
            // Another branch of `tx` committed here: that is the answer (`--tree --failover` seed
            // 200: a vnode aborted its backup branch while its primary branch had committed).
            self.settle_orphan(&tx, Decision::Commit { tx_cut });
            return Orphan::Recovering;
        }
        let live: BTreeSet<VnodeId> =
            self.cfg.placement.vnodes().into_iter().filter(|v| *v != me && !self.failing_over(v)).collect();
        self.orphans.recovering.insert(tx.clone(), live.clone());
        for v in &live {
            self.send_txn(v, TxnMsg::Recover { tx: tx.clone() });
        }
        self.recovery_progress(&tx);
        Orphan::Recovering
    }

    /// The cut stamp of `tx` if this vnode committed a branch of it as a participant. The near's
    /// own decision is no such commit: it counts only once a branch holds it, and a recovery runs
    /// because no live one may (`--tree --failover` seed 203: the near's host came back with its
    /// decision durable after the others had aborted without it).
    fn committed_another_branch(&self, tx: &TxId) -> Option<Option<CutId>> {
        self.near.decided.get(tx).copied().filter(|_| tx.near != self.cfg.id)
    }

    /// How many hosts the metadata records dead.
    fn hosts_recorded_dead(&self) -> usize {
        let Some(t) = self.tree.as_ref() else { return 0 };
        crate::alter::cluster::dead_hosts(t.alter.metadata()).len()
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
    pub(crate) fn on_recover(&mut self, from: VnodeId, tx: TxId) {
        let status = if let Some(tx_cut) = self.committed_another_branch(&tx) {
            TxStatus::Committed { tx_cut }
        } else {
            let held: Vec<Branch> = self.part.prepared.keys().filter(|b| b.tx == tx).cloned().collect();
            self.fence(&tx);
            if !self.orphans.recovering.contains_key(&tx) {
                // Fenced, a branch hears no `Finish` any more: it recovers on its own, now.
                for b in &held {
                    self.set_timer(crate::io::Timer::InDoubt(b.clone()), 0);
                }
            }
            if !held.is_empty() {
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

    /// Near: a 2PC commit decided; the participants on other hosts are told now, those on this
    /// host and the client once one of them holds the commit (module, point 1).
    pub(crate) fn await_second_host(&mut self, tx: TxId, mut u: UnackedCommit) {
        let wait_us = self.cfg.timeouts.prepare_timeout_us;
        let response = u.response.as_ref().expect("a fresh commit's answer");
        u.remote_backups = self.remote_backups(response, &u.local);
        u.deadline_us = self.now_us + wait_us;
        self.tell_other_hosts(&tx, &u);
        self.orphans.unacked.insert(tx.clone(), u);
        self.set_timer(Timer::PrepareTimeout(tx), wait_us);
    }

    /// The backups on other hosts of the keys `response` wrote whose primary is one of `local`.
    fn remote_backups(&self, response: &Response, local: &[VnodeId]) -> Vec<(VnodeId, VnodeId)> {
        let Response::Committed { writes, .. } = response else { return vec![] };
        let p = &self.cfg.placement;
        let mut out: Vec<(VnodeId, VnodeId)> = vec![];
        for w in writes {
            let chain = p.chain(p.partition_of(&w.key));
            let Some((primary, backups)) = chain.split_first().filter(|(primary, _)| local.contains(primary)) else {
                continue;
            };
            for b in backups.iter().filter(|b| b.host != self.cfg.id.host) {
                if !out.iter().any(|(x, y)| x == b && y == primary) {
                    out.push((b.clone(), primary.clone()));
                }
            }
        }
        out
    }

    /// Tells the participants on other hosts, and the backups there of this host's primaries.
    fn tell_other_hosts(&mut self, tx: &TxId, u: &UnackedCommit) {
        let tx_cut = u.tx_cut;
        for p in &u.remote {
            self.send_txn(p, TxnMsg::Finish { tx: tx.clone(), role: Role::Primary, commit: true, tx_cut });
        }
        for (backup, primary) in &u.remote_backups {
            self.send_txn(backup, TxnMsg::FinishBackup { tx: tx.clone(), primary: primary.clone(), tx_cut });
        }
    }

    /// Near: no other host acknowledged the commit in time. The client hears `Unknown` (once);
    /// the participants on other hosts are told again, backing off — an acknowledgement may have
    /// been lost, and a participant that committed acknowledges again (`on_finish`).
    pub(crate) fn second_host_timeout(&mut self, tx: TxId) {
        let now = self.now_us;
        let Some(u) = self.orphans.unacked.get(&tx) else { return };
        let settled_here = u.local == [self.cfg.id.clone()] && !self.part.prepared.keys().any(|b| b.tx == tx);
        if settled_here && u.response.is_none() {
            // This host's only branch was settled by a recovery: nothing is left to commit here.
            self.orphans.unacked.remove(&tx);
            return;
        }
        if now < u.deadline_us {
            return; // a prepare's timer, not this wait's
        }
        let mut u = self.orphans.unacked.remove(&tx).expect("looked up above");
        u.attempts += 1;
        let cap_us = self.cfg.timeouts.in_doubt_backoff_max_us;
        let wait_us = (self.cfg.timeouts.prepare_timeout_us << u.attempts.min(8)).min(cap_us);
        u.deadline_us = now + wait_us;
        if u.response.take().is_some() {
            self.reply(u.who.client, u.who.req, Response::Unknown { tx: tx.clone() });
        }
        self.tell_other_hosts(&tx, &u);
        self.orphans.unacked.insert(tx.clone(), u);
        self.set_timer(Timer::PrepareTimeout(tx), wait_us);
    }

    /// Near: a participant on another host was rolled back by a recovery without this near (its
    /// host was recorded dead, perhaps only cut off, while the commit was unacknowledged). The
    /// recovery found no live vnode committed, and each fenced `tx` first, so no other host will
    /// ever hold the commit: by point 1 nobody saw it. The near takes its decision back — it
    /// answers a 2PC status question about `tx` "aborted" from then on (`near_took_back`) — and
    /// this host's branches roll back; its client, if still waiting, hears that the transaction
    /// failed over. Before this, they asked the near, heard "pending" for ever, and held their keys
    /// (`--seed 53 --tree --fanout 2 --failover`: a host cut off right after its near decided).
    pub(crate) fn on_rolled_back(&mut self, from: VnodeId, tx: TxId) {
        if from.host == self.cfg.id.host {
            return;
        }
        let Some(u) = self.orphans.unacked.remove(&tx) else { return };
        self.orphans.taken_back.insert(tx.clone());
        while self.orphans.taken_back.len() > TAKEN_BACK_KEPT {
            self.orphans.taken_back.pop_first();
        }
        for p in &u.local {
            self.send_txn(p, TxnMsg::Finish { tx: tx.clone(), role: Role::Primary, commit: false, tx_cut: None });
        }
        if u.response.is_some() {
            let response = Response::Aborted { tx: Some(tx), reason: AbortReason::FailingOver };
            self.reply(u.who.client, u.who.req, response);
        }
    }

    /// Near, back in touch with the tree after a spell without (`ask_again_once_back`): every
    /// commit still unacknowledged is told to the other hosts again now, not after its backed-off
    /// timer — what it told them meanwhile was lost, and its own host's branches wait on the answer
    /// (`--seed 145 --workload append --fanout 2 --failover --clients 12 --duration-ms 2000`,
    /// liveness: a host cut off twice, its branches held their keys 1.9 s past healing).
    pub(crate) fn tell_unacked_again_now(&mut self) {
        let now = self.now_us;
        let txs: Vec<TxId> = self.orphans.unacked.keys().cloned().collect();
        for tx in txs {
            if let Some(u) = self.orphans.unacked.get_mut(&tx) {
                u.deadline_us = now;
            }
            self.set_timer(Timer::PrepareTimeout(tx), 0);
        }
    }

    /// Near: whether it took its decision on `tx` back (`on_rolled_back`). In memory only: not
    /// covered yet, a crash of this host after the decision is taken back and before its branches'
    /// roll-backs are durable — restarted, they ask, and the logged decision answers commit (a
    /// near restarted while a commit was unacknowledged has the same gap).
    pub(crate) fn near_took_back(&self, tx: &TxId) -> bool {
        self.orphans.taken_back.contains(tx)
    }

    /// Near: a participant's commit is durable. Once one is on another host than this one, this
    /// host's participants commit and the client hears of it (module, point 1).
    pub(crate) fn on_finish_ack(&mut self, from: VnodeId, tx: TxId) {
        if from.host == self.cfg.id.host {
            return;
        }
        let Some(u) = self.orphans.unacked.remove(&tx) else { return };
        for p in &u.local {
            self.send_txn(p, TxnMsg::Finish { tx: tx.clone(), role: Role::Primary, commit: true, tx_cut: u.tx_cut });
        }
        // A backup branch here (of another host's primary) that asked meanwhile heard "pending":
        // it asks again now rather than after its backed-off timer (`--tree --failover --workload
        // append` seed 154: its primary's `Finish` was lost, and it held its keys past healing).
        let mine: Vec<Branch> = self.part.prepared.keys().filter(|b| b.tx == tx).cloned().collect();
        for b in mine {
            self.set_timer(Timer::InDoubt(b), 0);
        }
        if let Some(response) = u.response {
            self.reply_revealing(u.tx_cut, u.who.client, u.who.req, response);
        }
    }

    /// Near: whether a commit of `writes` must wait for a `FinishAck` from another host: with
    /// failover on, when a replica of a key it wrote is on another host.
    pub(crate) fn commit_needs_second_host(&self, writes: &[crate::store::ResolvedWrite]) -> bool {
        let on_tree = self.failover_on();
        let p = &self.cfg.placement;
        on_tree && writes.iter().any(|w| p.chain(p.partition_of(&w.key)).iter().any(|v| v.host != self.cfg.id.host))
    }
}
