//! Primaries and backups: prepare (lock, validate, evaluate, log), then commit or roll back on the
//! first committer's word. A participant that hears nothing asks the first committer.
//!
//! Invariant (write-ahead): a `PrepareAck` leaves only after this vnode's `TxPrepared` (or, for a
//! 1PC first committer, `TxCommitted`) is durable — enforced by the outbox. A branch that only
//! validated reads is logged too, with the keys it locked, so a restart locks them again.

use crate::cut::local::BranchEnd;
use crate::ids::{Branch, CutId, Key, Lsn, Role, TxId, VnodeId};
use crate::io::Timer;
use crate::message::{AbortReason, PrepareWrites, TxStatus, TxnMsg};
use crate::record::{Prepared, Record};
use crate::store::{ReadCheck, ResolvedWrite};
use crate::vnode::Vnode;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Default, Hash)]
pub struct ParticipantState {
    pub(crate) prepared: BTreeMap<Branch, PreparedTx>,
    /// Transactions rolled back here; a late prepare of one of them is refused.
    pub(crate) tombstones: imbl::OrdSet<TxId>,
    /// Branches finished here lately (committed, rolled back or refused), oldest first: a duplicated
    /// `Prepare` arriving after its branch finished is dropped instead of being evaluated again
    /// (an `INCRBY` applied twice). Memory only: a copy never outlives the connection, and a
    /// crash breaks every connection of the vnode. Bounded by `FINISHED_KEPT`.
    pub(crate) finished: BTreeSet<Branch>,
    pub(crate) finished_order: VecDeque<Branch>,
}

/// How many finished branches a participant remembers against duplicated prepares.
const FINISHED_KEPT: usize = 1 << 16;

#[derive(Debug, Hash)]
pub(crate) struct PreparedTx {
    pub(crate) rec: Prepared,
    /// A primary that only validated reads: logged (its read locks), nothing to replicate.
    pub(crate) read_only: bool,
    pub(crate) locked: Vec<Key>,
    /// Downstream vnodes whose `PrepareAck` is awaited.
    pub(crate) pending: BTreeSet<VnodeId>,
    /// Rebuilt from the log after a crash (seed 000 §7.1: finishing it fails a running cut).
    pub(crate) recovered: bool,
    /// 1PC: a transaction evaluated after this one (pipelined on its writes) committed here, so the
    /// first committer committed this one first (`predecessors_committed`): no hop may presume it
    /// aborted (`txn::promotion`; `--tree --failover` seed 158).
    pub(crate) successor_committed: bool,
    /// Where this branch's `TxPrepared` is in the log (`Lsn(0)` when the branch was rebuilt from
    /// the log: durable).
    pub(crate) prepared_at: Lsn,
    /// The placement generation this branch was prepared under (`catch_up::CatchUp`; 0 when
    /// rebuilt from the log): a primary serves a learner's pages only once no older branch
    /// writes the partition.
    pub(crate) generation: u64,
    pub(crate) backoff_us: u64,
}

/// What the first committer decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Commit { tx_cut: Option<CutId> },
    Abort(AbortReason),
}

impl PreparedTx {
    /// Whether this branch, as the furthest replica left in its chain, may presume itself aborted:
    /// not when it may have passed a commit up before a crash (rebuilt from the log), nor when a
    /// transaction pipelined after it committed here.
    pub(crate) fn may_presume(&self) -> bool {
        !self.recovered && !self.successor_committed
    }
}

impl ParticipantState {
    /// A 1PC branch evaluated after `after` committed here: those still prepared here committed
    /// at the first committer, and so did, transitively, those they were evaluated after
    /// (`--tree --failover --workload append` seed 1238: T2 after T1 after T0 on one key, T2's
    /// commit came back, T0's and T1's were delayed; T0 alone presumed itself aborted, T1 asked
    /// the first committer, which answered that it committed — over T0's value).
    pub(crate) fn note_successor_committed(&mut self, after: &[TxId]) {
        let mut todo: Vec<TxId> = after.to_vec();
        while let Some(tx) = todo.pop() {
            for p in self.prepared.values_mut().filter(|p| p.rec.tx == tx && !p.successor_committed) {
                p.successor_committed = true;
                todo.extend(p.rec.after.iter().cloned());
            }
        }
    }

    fn note_finished(&mut self, branch: &Branch) {
        if self.finished.insert(branch.clone()) {
            self.finished_order.push_back(branch.clone());
        }
        while self.finished_order.len() > FINISHED_KEPT {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }
}

/// Where a `Prepare` goes and by which placement it was routed.
pub(crate) struct Route {
    pub(crate) first_committer: VnodeId,
    /// 1PC: the rest of the chain after the receiver. 2PC: the receiver's backups.
    pub(crate) downstream: Vec<VnodeId>,
    /// 1PC: transactions this one was evaluated after (`txn::locks`).
    pub(crate) after: Vec<TxId>,
    /// The sender's `Placement::epoch_sum` over the message's keys.
    pub(crate) epoch: u64,
}

impl Vnode {
    pub(crate) fn on_prepare(
        &mut self,
        from: VnodeId,
        tx: TxId,
        reads: Vec<ReadCheck>,
        writes: PrepareWrites,
        one_phase: bool,
        route: Route,
    ) {
        let Route { first_committer, downstream, after, epoch } = route;
        let role = if matches!(writes, PrepareWrites::Unresolved(_)) { Role::Primary } else { Role::Backup };
        if self.part.tombstones.contains(&tx) {
            let result = Err(AbortReason::PresumedAbort);
            return self.send_txn(&from, TxnMsg::PrepareAck { tx, role, result, tx_cut: None });
        }
        let branch = Branch { tx: tx.clone(), upstream: from.clone(), role };
        if self.part.prepared.contains_key(&branch)
            || self.part.finished.contains(&branch)
            || self.near.decided.contains_key(&tx)
        {
            return; // a duplicate: the first copy is being (or was) answered
        }
        let stale = epoch != self.epoch_of(&reads, &writes) || !self.may_serve();
        if stale && !self.cfg.breaks.accept_stale_epoch {
            // Routed by another placement: the sender, or this vnode, has not applied a promotion
            // yet. Refused before anything is logged or locked; a duplicate is dropped above.
            self.part.note_finished(&branch);
            let result = Err(AbortReason::StalePlacement);
            return self.send_txn(&from, TxnMsg::PrepareAck { tx, role, result, tx_cut: None });
        }
        if self.blocking_refuses_prepares() {
            return self.refuse_durably(branch, AbortReason::CutMarkerWritten);
        }
        if one_phase {
            if let Some(key) = self.versions_too_late(&tx, &writes) {
                return self.refuse_durably(branch, AbortReason::SnapshotOrder { key });
            }
        }
        if let PrepareWrites::Unresolved(ws) = &writes {
            if let Some(key) = self.versions_guard(&reads, ws) {
                self.part.note_finished(&branch);
                let result = Err(AbortReason::SnapshotOrder { key });
                return self.send_txn(&from, TxnMsg::PrepareAck { tx, role, result, tx_cut: None });
            }
            self.versions_note_reads(&reads);
        }
        self.versions_note_side(&tx);
        let is_primary = role == Role::Primary;
        let (resolved, after) = match writes {
            PrepareWrites::Resolved(ws) => (ws, after),
            PrepareWrites::Unresolved(ws) => {
                let fc = one_phase.then_some(&first_committer);
                match self.validate_and_resolve(&tx, &reads, &ws, fc) {
                    Ok(e) => (e.writes, e.after),
                    Err(reason) => {
                        // Refused: a late copy of this prepare must be refused too, not evaluated
                        // again — in 1PC the first committer would commit what the near aborted.
                        self.part.note_finished(&branch);
                        // A failed WATCH reveals the write that moved the key (DESIGN §4).
                        let tx_cut = match &reason {
                            AbortReason::WatchFailed { key } if !self.cfg.breaks.unheld_watch_failures => {
                                self.rt.reveals(key)
                            }
                            _ => None,
                        };
                        let ack = TxnMsg::PrepareAck { tx, role, result: Err(reason), tx_cut };
                        return self.send_txn(&from, ack);
                    }
                }
            }
        };
        let mut rec = Prepared {
            tx,
            writes: resolved,
            first_committer,
            upstream: from,
            downstream,
            one_phase,
            role,
            after,
            read_locks: vec![],
        };
        if one_phase && rec.downstream.is_empty() {
            return self.commit_as_first_committer(rec);
        }
        let locked = if is_primary { self.lock(&rec.branch(), &reads, &rec.writes) } else { vec![] };
        rec.read_locks = locked.iter().filter(|k| !rec.writes.iter().any(|w| &w.key == *k)).cloned().collect();
        if !one_phase && is_primary {
            rec.downstream = self.backups_of(&rec.writes);
        }
        self.prepare(rec, locked);
    }

    /// Answers a prepare with an abort that survives a crash: a tombstone in memory and a
    /// `TxRolledBack` in the log (the ack leaves only once that is durable), so a late copy of
    /// the prepare is refused again and a first committer never commits what it refused.
    fn refuse_durably(&mut self, branch: Branch, reason: AbortReason) {
        self.part.tombstones.insert(branch.tx.clone());
        self.out.append(Record::TxRolledBack { tx: branch.tx.clone(), branch: None });
        let ack = TxnMsg::PrepareAck { tx: branch.tx, role: branch.role, result: Err(reason), tx_cut: None };
        self.send_txn(&branch.upstream, ack);
    }

    /// The placement epochs of the partitions a prepare's keys fall in (`Placement::epoch_sum`).
    fn epoch_of(&self, reads: &[ReadCheck], writes: &PrepareWrites) -> u64 {
        let written: Vec<&Key> = match writes {
            PrepareWrites::Unresolved(ws) => ws.iter().map(|w| &w.key).collect(),
            PrepareWrites::Resolved(ws) => ws.iter().map(|w| &w.key).collect(),
        };
        self.cfg.placement.epoch_sum(reads.iter().map(|r| &r.key).chain(written))
    }

    /// The backups of every partition this primary writes to.
    fn backups_of(&self, writes: &[ResolvedWrite]) -> Vec<VnodeId> {
        let placement = &self.cfg.placement;
        let mut out: Vec<VnodeId> =
            writes.iter().flat_map(|w| placement.chain(placement.partition_of(&w.key))[1..].to_vec()).collect();
        out.sort();
        out.dedup();
        out.retain(|v| v != &self.cfg.id);
        out
    }

    /// 1PC, last of the chain: commit at once, stamped, and answer with the stamp (seed 000 §5.2).
    fn commit_as_first_committer(&mut self, rec: Prepared) {
        if !self.predecessors_committed(&rec.after) {
            // A transaction it was evaluated after never committed here: presume it aborted,
            // durably, so a late copy can never commit (`locks.rs`).
            return self.refuse_durably(rec.branch(), AbortReason::PresumedAbort);
        }
        let tx_cut = self.stamp(&rec.tx);
        if !rec.writes.is_empty() {
            let writes = rec.writes.clone();
            self.out.append(Record::TxCommitted { branch: rec.branch(), tx_cut, writes });
            self.near.decided.insert(rec.tx.clone(), tx_cut);
            self.apply_committed(&rec.writes, tx_cut);
        }
        let ack = TxnMsg::PrepareAck { tx: rec.tx, role: rec.role, result: Ok(rec.writes), tx_cut };
        self.send_txn(&rec.upstream, ack);
    }

    /// Every branch is logged before it is acknowledged, a read-only one too: its record carries
    /// the keys it locked for reads, which a crash would otherwise release while the near still
    /// counts the acknowledgement — a write could then commit under a read this vnode validated,
    /// and the near commit the stale read (`tests/txn_story.rs`, found by the simulator).
    fn prepare(&mut self, rec: Prepared, locked: Vec<Key>) {
        let branch = rec.branch();
        let read_only = rec.writes.is_empty();
        let prepared_at = self.out.append(Record::TxPrepared(rec.clone()));
        let pending: BTreeSet<VnodeId> = match (rec.one_phase, read_only) {
            (true, _) => rec.downstream.iter().take(1).cloned().collect(),
            (false, false) => rec.downstream.iter().cloned().collect(),
            (false, true) => BTreeSet::new(),
        };
        self.forward_prepare(&rec);
        if pending.is_empty() {
            let ack =
                TxnMsg::PrepareAck { tx: rec.tx.clone(), role: rec.role, result: Ok(rec.writes.clone()), tx_cut: None };
            self.send_txn(&rec.upstream, ack);
        }
        let backoff_us = self.cfg.timeouts.in_doubt_timeout_us;
        let p = PreparedTx {
            rec,
            read_only,
            locked,
            pending,
            recovered: false,
            successor_committed: false,
            prepared_at,
            generation: self.catch_up.generation,
            backoff_us,
        };
        self.part.prepared.insert(branch.clone(), p);
        self.set_timer(Timer::InDoubt(branch), backoff_us);
    }

    /// Passes the prepare down: in 1PC to the next of the chain once `TxPrepared` is durable; in
    /// 2PC to every backup at once, while it is being made durable.
    ///
    /// Why 2PC need not wait: the `Prepare` promises nothing. The branch is acknowledged upstream
    /// only once this vnode's `TxPrepared` is durable *and* every backup acknowledged, and the
    /// near (the first committer) decides only on every primary's acknowledgement. If this vnode
    /// crashes before its record is durable, it never acknowledges, the near decides abort, and
    /// a backup holding the branch learns so when it asks. So the primary's fsync and its backups'
    /// run in parallel, not in series. In 1PC the backup down the chain may be the first
    /// committer: it would commit a transaction this vnode forgets in a crash, and this vnode —
    /// with no prepared record — would never ask, serve the old value and diverge (break
    /// `one-phase-forward-before-durable`).
    fn forward_prepare(&mut self, rec: &Prepared) {
        if rec.one_phase {
            let Some((next, rest)) = rec.downstream.split_first() else { return };
            let msg = self.prepare_msg(rec, rec.writes.clone(), rest.to_vec());
            if self.cfg.breaks.one_phase_forward_before_durable {
                return self.send_txn_unheld(next, msg);
            }
            return self.send_txn(next, msg);
        }
        for backup in rec.downstream.clone() {
            let placement = &self.cfg.placement;
            let mine = |w: &&ResolvedWrite| placement.chain(placement.partition_of(&w.key)).contains(&backup);
            let writes: Vec<ResolvedWrite> = rec.writes.iter().filter(mine).cloned().collect();
            let msg = self.prepare_msg(rec, writes, vec![]);
            self.send_txn_unheld(&backup, msg);
        }
    }

    fn prepare_msg(&self, rec: &Prepared, writes: Vec<ResolvedWrite>, downstream: Vec<VnodeId>) -> TxnMsg {
        let epoch = self.cfg.placement.epoch_sum(writes.iter().map(|w| &w.key));
        TxnMsg::Prepare {
            epoch,
            tx: rec.tx.clone(),
            reads: vec![],
            writes: PrepareWrites::Resolved(writes),
            one_phase: rec.one_phase,
            first_committer: rec.first_committer.clone(),
            downstream,
            after: rec.after.clone(),
        }
    }

    /// A `PrepareAck` from downstream (a backup in 2PC, the next hop in 1PC) — or, when this vnode
    /// does not wait for `from`, one addressed to its near role.
    pub(crate) fn on_prepare_ack(
        &mut self,
        from: VnodeId,
        tx: TxId,
        role: Role,
        result: Result<Vec<ResolvedWrite>, AbortReason>,
        tx_cut: Option<CutId>,
    ) {
        if role == Role::Primary {
            return self.near_on_prepare_ack(from, tx, result, tx_cut);
        }
        let found = self.part.prepared.iter_mut().find(|(b, p)| b.tx == tx && p.pending.contains(&from));
        let Some((branch, p)) = found else { return };
        let branch = branch.clone();
        p.pending.remove(&from);
        if p.rec.one_phase {
            let decision = match result {
                Ok(_) => Decision::Commit { tx_cut },
                Err(reason) => Decision::Abort(reason),
            };
            return self.finish_prepared(&branch, decision);
        }
        // 2PC: a backup that refused (a blocking cut's marker is written there) refuses the
        // branch; the near then aborts it. Once refused, later backups' answers find no pending.
        let result = match result {
            Ok(_) if p.pending.is_empty() => Ok(p.rec.writes.clone()),
            Ok(_) => return,
            Err(reason) => {
                p.pending.clear();
                Err(reason)
            }
        };
        let ack = TxnMsg::PrepareAck { tx: tx.clone(), role: p.rec.role, result, tx_cut: None };
        let upstream = p.rec.upstream.clone();
        self.send_txn(&upstream, ack);
    }

    pub(crate) fn on_finish(&mut self, branch: Branch, commit: bool, tx_cut: Option<CutId>) {
        if !self.part.prepared.contains_key(&branch) {
            if commit && self.failover_on() && self.near.decided.contains_key(&branch.tx) {
                // Committed already: the near asks again because the acknowledgement was lost.
                let near = branch.tx.near.clone();
                self.send_txn(&near, TxnMsg::FinishAck { tx: branch.tx });
            } else if commit && self.fenced(&branch.tx) && !self.part.prepared.keys().any(|b| b.tx == branch.tx) {
                // Rolled back by a recovery without the near, which tells its commit again: it
                // settles its own host's branches by that (`txn::orphan`, `on_rolled_back`).
                let near = branch.tx.near.clone();
                self.send_txn(&near, TxnMsg::RolledBack { tx: branch.tx });
            }
            return;
        }
        if commit && self.fenced(&branch.tx) {
            return; // a fenced branch commits by recovery only (`txn::orphan`)
        }
        let decision = if commit { Decision::Commit { tx_cut } } else { Decision::Abort(AbortReason::Timeout) };
        self.finish_prepared(&branch, decision);
    }

    /// The first committer's answer settles every branch of `tx` held here.
    pub(crate) fn on_status_reply(&mut self, tx: TxId, status: TxStatus) {
        if status != TxStatus::Pending {
            self.versions_resolved(&tx);
        }
        let decision = match status {
            TxStatus::Committed { tx_cut } => Decision::Commit { tx_cut },
            TxStatus::Aborted => Decision::Abort(AbortReason::PresumedAbort),
            TxStatus::Pending => return,
        };
        if matches!(decision, Decision::Commit { .. }) && self.fenced(&tx) {
            return; // asked before it was fenced: commits by recovery only (`txn::orphan`)
        }
        let branches: Vec<Branch> = self.part.prepared.keys().filter(|b| b.tx == tx).cloned().collect();
        for branch in branches {
            self.finish_prepared(&branch, decision.clone());
        }
    }

    /// Applies the first committer's decision, then passes it on: down to the backups in 2PC, back
    /// up the chain in 1PC.
    pub(crate) fn finish_prepared(&mut self, branch: &Branch, decision: Decision) {
        let p = self.part.prepared.remove(branch).expect("finishing a prepared branch");
        self.part.note_finished(branch);
        let tx = &branch.tx;
        let end = match &decision {
            Decision::Commit { tx_cut } => BranchEnd::Committed { tx_cut: *tx_cut },
            Decision::Abort(_) => BranchEnd::RolledBack,
        };
        let record = match end {
            BranchEnd::Committed { tx_cut } => Record::TxCommitted { branch: branch.clone(), tx_cut, writes: vec![] },
            BranchEnd::RolledBack => Record::TxRolledBack { tx: tx.clone(), branch: Some(branch.clone()) },
        };
        self.out.append(record);
        if let BranchEnd::Committed { tx_cut } = end {
            // A commit answers those who ask later: a 1PC hop after a promotion made it the
            // furthest replica of the chain (`in_doubt_authority`), a 2PC branch a recovery
            // without the near (`txn::orphan`). The log rebuilds it too.
            self.near.decided.insert(tx.clone(), tx_cut);
            self.apply_committed(&p.rec.writes, tx_cut);
            self.part.note_successor_committed(&p.rec.after);
            if !p.rec.one_phase && self.failover_on() {
                let near = p.rec.first_committer.clone();
                self.send_txn(&near, TxnMsg::FinishAck { tx: tx.clone() });
            }
        } else {
            // With its record: tombstones are what the log says (a checkpoint holds them).
            self.part.tombstones.insert(tx.clone());
        }
        for k in &p.locked {
            self.locks.release(k, branch);
        }
        self.reads_after_finish(branch, &p.locked);
        self.cut_tx_finished(branch, end, p.recovered, p.read_only);
        self.pass_on(&p, decision);
    }

    ///
    /// In 1PC the answer up the chain waits only for this branch's `TxPrepared`, not for the
    /// outcome record just appended: the first committer down the chain logged the decision
    /// durably before answering, so a crash that loses this vnode's outcome leaves the branch in
    /// doubt here, its keys locked (reads wait), until the first committer answers it again.
    /// Waiting would add this vnode's fsync, in series, to every 1PC write.
    fn pass_on(&mut self, p: &PreparedTx, decision: Decision) {
        let tx = p.rec.tx.clone();
        if p.rec.one_phase {
            let (result, tx_cut) = match decision {
                Decision::Commit { tx_cut } => (Ok(p.rec.writes.clone()), tx_cut),
                Decision::Abort(reason) => (Err(reason), None),
            };
            let ack = TxnMsg::PrepareAck { tx, role: p.rec.role, result, tx_cut };
            return self.send_txn_upto(p.prepared_at, &p.rec.upstream, ack);
        }
        let (commit, tx_cut) = match decision {
            Decision::Commit { tx_cut } => (true, tx_cut),
            Decision::Abort(_) => (false, None),
        };
        for d in &p.rec.downstream {
            self.send_txn(d, TxnMsg::Finish { tx: tx.clone(), role: Role::Backup, commit, tx_cut });
        }
    }

    /// Nobody told us the outcome in time: ask the first committer — or, once a promotion dropped
    /// it, the furthest replica down the chain still in it (`in_doubt_authority`) — with capped
    /// doubling back-off.
    pub(crate) fn participant_in_doubt(&mut self, branch: Branch) {
        let cap = self.cfg.timeouts.in_doubt_backoff_max_us;
        self.decide_if_authority(&branch);
        match self.recover_orphan(&branch) {
            crate::txn::orphan::Orphan::No => {}
            crate::txn::orphan::Orphan::Waiting => {
                return self.set_timer(Timer::InDoubt(branch), self.cfg.timeouts.in_doubt_timeout_us);
            }
            crate::txn::orphan::Orphan::Recovering => {
                let Some(p) = self.part.prepared.get_mut(&branch) else { return };
                p.backoff_us = (p.backoff_us * 2).min(cap);
                let next = p.backoff_us;
                return self.set_timer(Timer::InDoubt(branch), next);
            }
        }
        let Some(p) = self.part.prepared.get(&branch) else { return };
        let to = match self.in_doubt_authority(&p.rec) {
            // It cannot presume (`txn::promotion`): it asks the first committer itself, dropped or
            // not, and takes its word when it answers.
            me if me == self.cfg.id && !p.may_presume() => p.rec.first_committer.clone(),
            to => to,
        };
        let Some(p) = self.part.prepared.get_mut(&branch) else { return };
        let one_phase = p.rec.one_phase;
        p.backoff_us = (p.backoff_us * 2).min(cap);
        let next = p.backoff_us;
        self.send_txn(&to, TxnMsg::StatusQuery { tx: branch.tx.clone(), one_phase });
        self.set_timer(Timer::InDoubt(branch), next);
    }
}
