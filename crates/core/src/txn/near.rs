//! The near vnode: accepts a client's transaction, sends it to the primaries involved, and as
//! first committer in 2PC decides it. Also serves single-key GETs by asking the key's primary.

use crate::ids::{ClientId, ClientRequest, CutId, Key, Role, TxId, Value, Version, VnodeId};
use crate::io::{Pick, Response, Timer};
use crate::message::{AbortReason, PrepareWrites, TxStatus, TxnMsg};
use crate::record::Record;
use crate::store::{ReadCheck, ResolvedWrite, Write};
use crate::txn::orphan::UnackedCommit;
use crate::txn::read_wait::Reader;
use crate::vnode::Vnode;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default, Hash)]
pub struct NearState {
    pub(crate) txs: BTreeMap<TxId, NearTx>,
    pub(crate) next_seq: u32,
    /// Decisions this vnode made as first committer (2PC near, or 1PC last backup), kept while the
    /// log that holds them is kept, so in-doubt participants can always be answered. A persistent
    /// map: a checkpoint's image copies it in O(1) while the vnode waits (it grows with uptime).
    pub(crate) decided: imbl::OrdMap<TxId, Option<CutId>>,
    /// GETs sent to a key's primary, by read id (the incarnation in the high 32 bits, then a
    /// count).
    pub(crate) reads: BTreeMap<u64, PendingRead>,
    /// The metadata version `txn::fail_fast` last looked at.
    pub(crate) dead_hosts_checked: Option<crate::alter::MetaVersion>,
    pub(crate) next_read: u64,
}

/// A GET sent to a key's primary: whom to answer, and the primary asked.
#[derive(Debug, Hash)]
pub(crate) struct PendingRead {
    pub(crate) asked: ClientRequest,
    pub(crate) primary: VnodeId,
}

#[derive(Debug, Hash)]
pub(crate) struct NearTx {
    client: ClientId,
    req: u64,
    one_phase: bool,
    /// Primaries asked to prepare.
    participants: Vec<VnodeId>,
    /// Invariant: a subset of `participants`: those whose `PrepareAck` has not arrived.
    waiting: BTreeSet<VnodeId>,
    writes: Vec<ResolvedWrite>,
    /// 1PC: the last of the chain, who decides.
    first_committer: Option<VnodeId>,
    /// Every replica of the partitions the transaction touches: a prepare waits on each
    /// (`txn::fail_fast`).
    pub(crate) replicas: BTreeSet<VnodeId>,
}

type Work = (Vec<ReadCheck>, Vec<Write>);

impl Vnode {
    pub(crate) fn client_txn(&mut self, client: ClientId, req: u64, reads: Vec<ReadCheck>, writes: Vec<Write>) {
        if reads.len() + writes.len() > self.cfg.limits.txn_keys_max {
            return self.reply(client, req, Response::Unavailable { why: "transaction has too many keys" });
        }
        if self.near.txs.len() >= self.cfg.limits.near_txs_max {
            return self.reply(client, req, Response::Unavailable { why: "too many transactions in flight" });
        }
        if self.too_few_copies(&writes) {
            let why = "NOREPLICAS a key's partition has fewer live copies than the cluster's min_copies";
            return self.reply(client, req, Response::Unavailable { why });
        }
        let tx = TxId { near: self.cfg.id.clone(), incarnation: self.incarnation, seq: self.near.next_seq };
        self.near.next_seq += 1;
        self.versions_registered(&tx);
        let by_primary = self.group_by_primary(reads, writes);
        if by_primary.is_empty() {
            return self.reply(client, req, Response::Committed { tx, writes: vec![] });
        }
        let replicas = self.replicas_of(&by_primary);
        // A replica on a host recorded dead, not yet dropped by a promotion: its prepare would wait
        // for it (`txn::fail_fast`).
        if replicas.iter().any(|v| self.failing_over(v)) {
            let reason = AbortReason::FailingOver;
            return self.reply(client, req, Response::Aborted { tx: Some(tx), reason });
        }
        let chain = self.one_phase_chain(&by_primary);
        let one_phase = chain.is_some();
        let first_committer = chain.as_ref().and_then(|c| c.last().cloned());
        let participants: Vec<VnodeId> = by_primary.keys().cloned().collect();
        match chain {
            Some(chain) => self.send_one_phase(&tx, by_primary, chain),
            None => self.send_two_phase(&tx, by_primary),
        }
        let waiting = participants.iter().cloned().collect();
        let ntx = NearTx { client, req, one_phase, participants, waiting, writes: vec![], first_committer, replicas };
        self.near.txs.insert(tx.clone(), ntx);
        self.set_timer(Timer::PrepareTimeout(tx), self.cfg.timeouts.prepare_timeout_us);
    }

    /// Whether a key of `writes` falls in a partition whose chain holds fewer replicas than the
    /// cluster setting `min_copies` (after a failover dropped a dead host's): refused before
    /// anything is prepared, so nothing is written; reads go on.
    fn too_few_copies(&self, writes: &[Write]) -> bool {
        let Some(t) = self.tree.as_ref() else { return false };
        let min = crate::alter::cluster::min_copies(t.alter.metadata());
        let p = &self.cfg.placement;
        min > 1 && writes.iter().any(|w| p.copies(p.partition_of(&w.key)).len() < min)
    }

    /// The placement epochs of the partitions a primary's share touches (`Placement::epoch_sum`).
    fn epoch_sum(&self, reads: &[ReadCheck], writes: &[Write]) -> u64 {
        let keys = reads.iter().map(|r| &r.key).chain(writes.iter().map(|w| &w.key));
        self.cfg.placement.epoch_sum(keys)
    }

    fn group_by_primary(&self, reads: Vec<ReadCheck>, writes: Vec<Write>) -> BTreeMap<VnodeId, Work> {
        let mut by: BTreeMap<VnodeId, Work> = BTreeMap::new();
        for r in reads {
            by.entry(self.cfg.placement.primary_of(&r.key).clone()).or_default().0.push(r);
        }
        for w in writes {
            by.entry(self.cfg.placement.primary_of(&w.key).clone()).or_default().1.push(w);
        }
        by
    }

    fn replicas_of(&self, by: &BTreeMap<VnodeId, Work>) -> BTreeSet<VnodeId> {
        let p = &self.cfg.placement;
        let keys =
            by.values().flat_map(|(reads, writes)| reads.iter().map(|r| &r.key).chain(writes.iter().map(|w| &w.key)));
        keys.flat_map(|k| p.chain(p.partition_of(k)).iter().cloned()).collect()
    }

    /// 1PC applies when one primary is involved and every key it writes has the same chain.
    fn one_phase_chain(&self, by: &BTreeMap<VnodeId, Work>) -> Option<Vec<VnodeId>> {
        if by.len() != 1 {
            return None;
        }
        let (primary, (_, writes)) = by.iter().next()?;
        let placement = &self.cfg.placement;
        let mut chains = writes.iter().map(|w| placement.chain(placement.partition_of(&w.key)));
        let Some(first) = chains.next() else { return Some(vec![primary.clone()]) };
        chains.all(|c| c == first).then(|| first.to_vec())
    }

    fn send_one_phase(&mut self, tx: &TxId, by: BTreeMap<VnodeId, Work>, chain: Vec<VnodeId>) {
        let (primary, (reads, writes)) = by.into_iter().next().expect("one primary");
        assert_eq!(chain[0], primary);
        let first_committer = chain.last().expect("chain is never empty").clone();
        let epoch = self.epoch_sum(&reads, &writes);
        let msg = TxnMsg::Prepare {
            epoch,
            tx: tx.clone(),
            reads,
            writes: PrepareWrites::Unresolved(writes),
            one_phase: true,
            first_committer,
            downstream: chain[1..].to_vec(),
            after: vec![],
        };
        self.send_prepare(&primary, msg);
    }

    fn send_two_phase(&mut self, tx: &TxId, by: BTreeMap<VnodeId, Work>) {
        for (primary, (reads, writes)) in by {
            let epoch = self.epoch_sum(&reads, &writes);
            let msg = TxnMsg::Prepare {
                epoch,
                tx: tx.clone(),
                reads,
                writes: PrepareWrites::Unresolved(writes),
                one_phase: false,
                first_committer: self.cfg.id.clone(),
                downstream: vec![],
                after: vec![],
            };
            self.send_prepare(&primary, msg);
        }
    }

    /// A near's `Prepare` leaves at once, not after the records this vnode appended before it.
    ///
    /// Why it may: it promises nothing about this vnode's log. The near logs nothing for a
    /// transaction before deciding it (presumed abort), and what the client read to build it
    /// (its `WATCH`ed versions) reached the client only once durable. If this vnode crashes before
    /// its pending records are durable, it forgets the transaction: in 2PC it is the first
    /// committer and answers any participant that asks with `Aborted`; in 1PC the chain may
    /// commit on its own, as it may when the near crashes after the `Prepare` left, and the
    /// client, whose connection died with the near, never heard an answer. Holding it would put
    /// the near's group commit in series before every primary's: under load a near always has
    /// records syncing, so each transaction would wait for one more fsync.
    fn send_prepare(&mut self, primary: &VnodeId, msg: TxnMsg) {
        // Clients are served only once `Boot` is durable: a transaction id, which carries the
        // incarnation, can never be reused by a restart that lost its `Boot`.
        assert!(self.booted, "a transaction before the vnode booted");
        self.send_txn_unheld(primary, msg);
    }

    pub(crate) fn near_on_prepare_ack(
        &mut self,
        from: VnodeId,
        tx: TxId,
        result: Result<Vec<ResolvedWrite>, AbortReason>,
        tx_cut: Option<CutId>,
    ) {
        let Some(ntx) = self.near.txs.get_mut(&tx) else { return };
        if !ntx.waiting.remove(&from) {
            return;
        }
        match result {
            // A refusal's `tx_cut`: the cut of an *after* write its reason reveals.
            Err(reason) => self.near_abort_revealing(tx, reason, tx_cut),
            Ok(writes) => {
                ntx.writes.extend(writes);
                let all_prepared = ntx.waiting.is_empty() || self.cfg.breaks.commit_before_all_prepared;
                if ntx.one_phase {
                    let ntx = self.near.txs.remove(&tx).expect("present");
                    let response = Response::Committed { tx, writes: ntx.writes };
                    self.reply_revealing_unheld(tx_cut, ntx.client, ntx.req, response);
                } else if all_prepared {
                    self.near_commit(tx);
                }
            }
        }
    }

    /// The first committer's moment (seed 000 §5.2): stamp the running cut, log the decision, tell.
    fn near_commit(&mut self, tx: TxId) {
        let ntx = self.near.txs.remove(&tx).expect("committing a known transaction");
        let tx_cut = self.stamp(&tx);
        self.out.append(Record::TxDecided { tx: tx.clone(), tx_cut });
        self.near.decided.insert(tx.clone(), tx_cut);
        let second_host = self.commit_needs_second_host(&ntx.writes);
        let response = Response::Committed { tx: tx.clone(), writes: ntx.writes };
        if second_host {
            // Answered, and committed on this host, once a participant on another host holds the
            // commit (`txn::orphan`).
            let (mut local, mut remote): (Vec<VnodeId>, Vec<VnodeId>) =
                ntx.participants.into_iter().partition(|p| p.host == self.cfg.id.host);
            if self.cfg.breaks.near_commits_first {
                remote.append(&mut local);
            }
            let who = ClientRequest { client: ntx.client, req: ntx.req };
            self.await_second_host(tx, UnackedCommit::new(who, response, tx_cut, local, remote));
            return;
        }
        self.reply_revealing(tx_cut, ntx.client, ntx.req, response);
        for p in &ntx.participants {
            self.send_txn(p, TxnMsg::Finish { tx: tx.clone(), role: Role::Primary, commit: true, tx_cut });
        }
    }

    /// Presumed abort: nothing is logged; a participant that asks later hears `Aborted`.
    fn near_abort(&mut self, tx: TxId, reason: AbortReason) {
        self.near_abort_revealing(tx, reason, None);
    }

    /// An abort whose reason reveals a write stamped `reveals` (a failed `WATCH`) is held for
    /// real-time safety like an acknowledgement; the participants are told at once.
    fn near_abort_revealing(&mut self, tx: TxId, reason: AbortReason, reveals: Option<CutId>) {
        let ntx = self.near.txs.remove(&tx).expect("aborting a known transaction");
        if !ntx.one_phase {
            for p in &ntx.participants {
                self.send_txn(p, TxnMsg::Finish { tx: tx.clone(), role: Role::Primary, commit: false, tx_cut: None });
            }
        }
        self.reply_revealing(reveals, ntx.client, ntx.req, Response::Aborted { tx: Some(tx), reason });
    }

    pub(crate) fn near_prepare_timeout(&mut self, tx: TxId) {
        if self.orphans.unacked.contains_key(&tx) {
            return self.second_host_timeout(tx);
        }
        let Some(ntx) = self.near.txs.get(&tx) else { return self.versions_ask_again(tx) };
        if ntx.one_phase {
            return self.near_give_up_one_phase(tx);
        }
        self.near_abort(tx, AbortReason::Timeout);
    }

    /// A transaction still undecided touches a partition with a replica on a host recorded dead
    /// (`txn::fail_fast`): it ends now as its timeout would end it, a 2PC one aborted as failing
    /// over.
    pub(crate) fn near_fail_over(&mut self, tx: TxId) {
        match self.near.txs.get(&tx) {
            Some(ntx) if ntx.one_phase => self.near_give_up_one_phase(tx),
            Some(_) => self.near_abort(tx, AbortReason::FailingOver),
            None => {}
        }
    }

    /// The chain may still commit a 1PC transaction: only its first committer knows, so its client
    /// hears `Unknown`.
    fn near_give_up_one_phase(&mut self, tx: TxId) {
        let ntx = self.near.txs.remove(&tx).expect("an undecided transaction");
        if let Some(fc) = ntx.first_committer {
            self.versions_one_phase_timed_out(tx.clone(), fc);
        }
        self.reply(ntx.client, ntx.req, Response::Unknown { tx });
    }

    /// The `tx_cut` a first committer stamps on `tx`: its running cut (seed 000 §5.2); under the
    /// `versions` strategy, the side `tx` was given at its near (`cut::versions`).
    pub(crate) fn stamp(&self, tx: &TxId) -> Option<CutId> {
        if self.cfg.breaks.no_tx_cut {
            return None;
        }
        match self.cfg.strategy {
            crate::config::CutStrategy::Versions => self.versions_stamp(tx),
            _ => self.cut.running_id(),
        }
    }

    /// Answers an in-doubt participant. 2PC: the near; 1PC: the last backup, which presumes abort
    /// durably (`TxRolledBack`) so that a prepare still on its way can never commit afterwards.
    ///
    /// After a promotion the one asked in 1PC may be a hop that holds the branch itself
    /// (`participant_in_doubt`'s authority): it answers `Pending` while it waits for its own
    /// answer, or decides if it is the authority now.
    pub(crate) fn on_status_query(&mut self, from: VnodeId, tx: TxId, one_phase: bool) {
        if from.host == self.cfg.id.host && self.orphans.unacked.contains_key(&tx) {
            // This host's branches commit once another host holds the commit (`txn::orphan`).
            return self.send_txn(&from, TxnMsg::StatusReply { tx, status: TxStatus::Pending });
        }
        if one_phase && !self.near.decided.contains_key(&tx) {
            if let Some(branch) = self.part.prepared.keys().find(|b| b.tx == tx).cloned() {
                self.decide_if_authority(&branch);
            }
        }
        let status = if !one_phase && self.near_took_back(&tx) {
            TxStatus::Aborted
        } else if let Some(tx_cut) = self.near.decided.get(&tx) {
            TxStatus::Committed { tx_cut: *tx_cut }
        } else if one_phase && self.part.prepared.keys().any(|b| b.tx == tx) {
            TxStatus::Pending
        } else if one_phase {
            // `OrdSet::insert` gives back the element it replaced: `None` when `tx` is new here.
            if self.part.tombstones.insert(tx.clone()).is_none() {
                self.out.append(Record::TxRolledBack { tx: tx.clone(), branch: None });
            }
            TxStatus::Aborted
        } else if self.near.txs.contains_key(&tx) {
            TxStatus::Pending
        } else {
            TxStatus::Aborted
        };
        self.send_txn(&from, TxnMsg::StatusReply { tx, status });
    }

    pub(crate) fn client_get(&mut self, client: ClientId, req: u64, key: Key) {
        let primary = self.cfg.placement.primary_of(&key).clone();
        if self.failing_over(&primary) {
            return self.reply(
                client,
                req,
                Response::Unavailable { why: "TRYAGAIN the key's primary is failing over" },
            );
        }
        if primary == self.cfg.id {
            return self.read_at_primary(Reader::Client { client, req }, key);
        }
        self.forward_read(client, req, primary, |id| TxnMsg::Read { req: id, key });
    }

    /// A client's read of a collection's head and elements: as `client_get`.
    pub(crate) fn client_elements(&mut self, client: ClientId, req: u64, key: Key, pick: Pick) {
        let primary = self.cfg.placement.primary_of(&key).clone();
        if self.failing_over(&primary) {
            let response = Response::Unavailable { why: "TRYAGAIN the key's primary is failing over" };
            return self.reply(client, req, response);
        }
        if primary == self.cfg.id {
            return self.read_at_primary(Reader::ClientElements { client, req, pick }, key);
        }
        self.forward_read(client, req, primary, |id| TxnMsg::ReadElements { req: id, key, pick });
    }

    pub(crate) fn on_read_elements(&mut self, from: VnodeId, req: u64, key: Key, pick: Pick) {
        self.read_at_primary(Reader::NearElements { from, req, pick }, key);
    }

    pub(crate) fn on_elements_reply(&mut self, req: u64, writer_cut: Option<CutId>, response: Response) {
        if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&req) {
            self.reply_revealing(writer_cut, asked.client, asked.req, response);
        }
    }

    /// Sends a client's read (or scan page) to the primary that serves it, numbered, and waits
    /// for its answer until the read time-out. Read ids carry the incarnation: a reply to a read
    /// sent before a crash must not answer a read sent after it — it would hand the client another
    /// key's value (seed 19, append).
    pub(crate) fn forward_read(
        &mut self,
        client: ClientId,
        req: u64,
        primary: VnodeId,
        msg: impl FnOnce(u64) -> TxnMsg,
    ) {
        let id = (u64::from(self.incarnation) << 32) | (self.near.next_read & 0xffff_ffff);
        self.near.next_read += 1;
        let pending = PendingRead { asked: ClientRequest { client, req }, primary: primary.clone() };
        self.near.reads.insert(id, pending);
        self.send_txn(&primary, msg(id));
        self.set_timer(Timer::ReadTimeout(id), self.cfg.timeouts.read_timeout_us);
    }

    pub(crate) fn on_read(&mut self, from: VnodeId, req: u64, key: Key) {
        self.read_at_primary(Reader::Near { from, req }, key);
    }

    pub(crate) fn on_read_reply(
        &mut self,
        req: u64,
        value: Option<Value>,
        version: Version,
        writer_cut: Option<CutId>,
        (deadline_ms, now_ms): (Option<u64>, u64),
    ) {
        if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&req) {
            let response = Response::Value { value, version, deadline_ms, now_ms };
            self.reply_revealing(writer_cut, asked.client, asked.req, response);
        }
    }

    pub(crate) fn on_read_refused(&mut self, req: u64) {
        if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&req) {
            let response = Response::Unavailable { why: "TRYAGAIN the key's partition moved" };
            self.reply(asked.client, asked.req, response);
        }
    }

    pub(crate) fn near_read_timeout(&mut self, req: u64) {
        if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&req) {
            self.reply(asked.client, asked.req, Response::Unavailable { why: "read timed out" });
        }
    }
}
