//! The core's test harness: a small in-memory cluster of store vnodes driven through
//! `Input`/`Output`, in which a story chooses every delivery. It can deliver, hold and drop
//! messages, make logs durable, fire timers and crash vnodes. Stories read as the seeds'
//! sections: given this cluster, on these deliveries, exactly this outcome.
//!
//! Durability: by default every record is durable as soon as it is appended (the stories are
//! about the order of messages). `Cluster::with_explicit_sync` makes a story sync logs itself,
//! and a crash then loses the unsynced tail, as a real disk would.
#![allow(dead_code)] // each story file uses a part of it

use std::sync::Arc;
use waymark_core::cut::restore::{find_finish, restore_to_cut, Checkpoint};
use waymark_core::cut::versions_restore::{find_versions_records, restore_to_versions_cut};
use waymark_core::{
    Body, Breaks, ClientId, CutId, CutStrategy, Envelope, Input, Lsn, Output, Placement, Record, Request, Response,
    Timer, TxId, TxnMsg, Vnode, VnodeConfig, VnodeId, Write, WriteOp,
};

/// The client id the operator uses to ask node000 for a cut.
pub const OPERATOR: ClientId = ClientId(999);
/// A story's steps are few; a loop that delivers more than this is a livelock, not a story.
const DELIVERIES_MAX: usize = 10_000;

pub struct Cluster {
    pub ids: Vec<VnodeId>,
    cfgs: Vec<VnodeConfig>,
    /// `None` while a vnode is stopped (`stop`).
    vnodes: Vec<Option<Vnode>>,
    pub logs: Vec<Vec<Record>>,
    /// How many records of each log are durable.
    durable: Vec<usize>,
    explicit_sync: bool,
    /// Sent and not yet delivered, oldest first.
    pub inflight: Vec<Envelope>,
    pub replies: Vec<(ClientId, Response)>,
    pub timers: Vec<(usize, Timer)>,
    pub now_us: u64,
    next_req: u64,
}

impl Cluster {
    /// `n` vnodes, 8 partitions, `replicas` each; node000 coordinates the cut process.
    pub fn new(n: usize, replicas: usize, strategy: CutStrategy, breaks: Breaks) -> Cluster {
        Self::configured(n, replicas, |c| (c.strategy, c.breaks) = (strategy, breaks))
    }

    /// As `new`, with every vnode's configuration set by `set`.
    pub fn configured(n: usize, replicas: usize, set: impl Fn(&mut VnodeConfig)) -> Cluster {
        let ids: Vec<VnodeId> = (0..n).map(|i| VnodeId::new("store0", format!("node{i:03}"))).collect();
        let placement = Arc::new(Placement::round_robin(&ids, 8, replicas));
        let cfgs: Vec<VnodeConfig> = ids
            .iter()
            .map(|id| {
                let mut c = VnodeConfig::new(id.clone(), placement.clone(), ids[0].clone());
                set(&mut c);
                c
            })
            .collect();
        let vnodes = cfgs.iter().map(|c| Some(Vnode::new(c.clone()))).collect();
        let mut c = Cluster {
            ids,
            cfgs,
            vnodes,
            logs: vec![vec![]; n],
            durable: vec![0; n],
            explicit_sync: false,
            inflight: vec![],
            replies: vec![],
            timers: vec![],
            now_us: 0,
            next_req: 1,
        };
        for i in 0..n {
            c.step(i, Input::Restarted);
        }
        c
    }

    /// From now on a record is durable only once the story calls `sync`.
    pub fn with_explicit_sync(mut self) -> Cluster {
        self.explicit_sync = true;
        self
    }

    pub fn vnode(&self, i: usize) -> &Vnode {
        self.vnodes[i].as_ref().expect("a running vnode")
    }

    pub fn index_of(&self, id: &VnodeId) -> usize {
        self.ids.iter().position(|v| v == id).expect("a vnode of this cluster")
    }

    /// A key whose replica chain is exactly `chain` (vnode indexes, primary first).
    pub fn key_with_chain(&self, chain: &[usize]) -> Vec<u8> {
        let placement = &self.cfgs[0].placement;
        let want: Vec<VnodeId> = chain.iter().map(|i| self.ids[*i].clone()).collect();
        (0..10_000)
            .map(|n| format!("k{n}").into_bytes())
            .find(|k| placement.chain(placement.partition_of(k)) == want)
            .expect("some key has this chain")
    }

    /// Steps vnode `i` and collects what it asks for.
    pub fn step(&mut self, i: usize, input: Input) {
        self.now_us += 10;
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let Some(vnode) = self.vnodes[i].as_mut() else { return }; // stopped: lost
            let mut appended = false;
            for out in vnode.step(self.now_us, input) {
                match out {
                    Output::Append(r) => {
                        self.logs[i].push(r);
                        appended = true;
                    }
                    Output::Send(env) => self.inflight.push(env),
                    Output::Reply { client, response, .. } => self.replies.push((client, response)),
                    Output::SetTimer { timer, .. } => self.timers.push((i, timer)),
                    _ => {}
                }
            }
            if appended && !self.explicit_sync {
                self.durable[i] = self.logs[i].len();
                inputs.push(Input::WalDurable(Lsn(self.logs[i].len() as u64)));
            }
        }
    }

    /// Everything vnode `i` appended becomes durable.
    pub fn sync(&mut self, i: usize) {
        self.durable[i] = self.logs[i].len();
        self.step(i, Input::WalDurable(Lsn(self.logs[i].len() as u64)));
    }

    /// Delivers the oldest message in flight that `pick` chooses; `false` if there is none.
    pub fn deliver(&mut self, pick: impl Fn(&Envelope) -> bool) -> bool {
        let Some(at) = self.inflight.iter().position(pick) else { return false };
        let env = self.inflight.remove(at);
        let to = self.index_of(&env.to);
        self.step(to, Input::Message(env));
        true
    }

    /// Delivers everything, oldest first, except what `hold` keeps in flight.
    pub fn deliver_all_but(&mut self, hold: impl Fn(&Envelope) -> bool) {
        for _ in 0..DELIVERIES_MAX {
            if !self.deliver(|e| !hold(e)) {
                return;
            }
        }
        panic!("more than {DELIVERIES_MAX} deliveries: the story does not settle");
    }

    pub fn deliver_all(&mut self) {
        self.deliver_all_but(|_| false);
    }

    /// Syncs every log and delivers every message until nothing is left in flight.
    pub fn settle(&mut self) {
        self.settle_but(|_| false);
    }

    /// `settle`, keeping in flight what `hold` chooses.
    pub fn settle_but(&mut self, hold: impl Fn(&Envelope) -> bool) {
        for _ in 0..DELIVERIES_MAX {
            for i in 0..self.ids.len() {
                if self.durable[i] < self.logs[i].len() {
                    self.sync(i);
                }
            }
            if !self.deliver(|e| !hold(e)) {
                return;
            }
        }
        panic!("more than {DELIVERIES_MAX} deliveries: the story does not settle");
    }

    /// Whether vnode `i` has records that are not durable yet.
    pub fn unsynced(&self, i: usize) -> bool {
        self.durable[i] < self.logs[i].len()
    }

    /// Loses every message in flight that `pick` chooses.
    pub fn drop_where(&mut self, pick: impl Fn(&Envelope) -> bool) {
        self.inflight.retain(|e| !pick(e));
    }

    /// Fires the first timer vnode `i` set that `pick` chooses; `false` if there is none.
    pub fn fire(&mut self, i: usize, pick: impl Fn(&Timer) -> bool) -> bool {
        let Some(at) = self.timers.iter().position(|(v, t)| *v == i && pick(t)) else { return false };
        let (_, timer) = self.timers.remove(at);
        self.step(i, Input::Timer(timer));
        true
    }

    /// A client of vnode `near` sends `request`; returns the request number.
    pub fn client(&mut self, near: usize, client: ClientId, request: Request) -> u64 {
        let req = self.next_req;
        self.next_req += 1;
        self.step(near, Input::Client { client, req, request });
        req
    }

    /// `SET key v` from client 1 at vnode `near`; returns the transaction it started.
    pub fn client_set(&mut self, near: usize, key: &[u8]) -> TxId {
        self.client_writes(near, &[key])
    }

    /// One transaction from client 1 at vnode `near` setting every key; returns its id.
    pub fn client_writes(&mut self, near: usize, keys: &[&[u8]]) -> TxId {
        let writes = keys.iter().map(|k| Write { key: k.to_vec(), op: WriteOp::Set(b"v".to_vec()) }).collect();
        self.client(near, ClientId(1), Request::Txn { reads: vec![], writes });
        match self.inflight.last().map(|e| &e.body) {
            Some(Body::Txn(TxnMsg::Prepare { tx, .. })) => tx.clone(),
            other => panic!("expected a prepare, got {other:?}"),
        }
    }

    /// Carries out a transaction client's `step` and its next ones at vnode `near`, delivering
    /// everything between them: its answer, or `None` once it is blocked (`Step::Blocked`).
    pub fn drive(
        &mut self,
        near: usize,
        id: ClientId,
        client: &mut waymark_core::client::TxnClient,
        mut step: waymark_core::client::Step,
    ) -> Option<waymark_core::client::Answer> {
        use waymark_core::client::Step;
        for _ in 0..64 {
            match step {
                Step::Send(requests) => {
                    let before = self.heard(id).len();
                    for r in requests {
                        self.client(near, id, r);
                    }
                    self.settle();
                    let answers = self.heard(id)[before..].iter().map(|r| Some((*r).clone())).collect();
                    step = client.on_answers(answers);
                }
                Step::Backoff { .. } => step = client.resume(),
                Step::Blocked { .. } => return None,
                Step::Done(finished) => return Some(finished.answer),
            }
        }
        panic!("the batch did not end within 64 steps");
    }

    /// What client `client` heard, in order.
    pub fn heard(&self, client: ClientId) -> Vec<&Response> {
        self.replies.iter().filter(|(c, _)| *c == client).map(|(_, r)| r).collect()
    }

    /// The operator asks node000 for a cut.
    pub fn begin_cut(&mut self) {
        self.client(0, OPERATOR, Request::Cut);
    }

    /// The operator's answer: `Some(ok)` once the cut is over.
    pub fn cut_outcome(&self) -> Option<bool> {
        self.heard(OPERATOR).into_iter().find_map(|r| match r {
            Response::CutDone { ok, .. } => Some(*ok),
            _ => None,
        })
    }

    /// Vnode `i` crashes (its messages in flight to it are lost, and so is the unsynced tail
    /// of its log) and restarts from what is durable.
    pub fn crash_and_restart(&mut self, i: usize) {
        let to = self.ids[i].clone();
        self.inflight.retain(|e| e.to != to);
        self.timers.retain(|(v, _)| *v != i);
        self.logs[i].truncate(self.durable[i]);
        self.vnodes[i] = Some(Vnode::recover(self.cfgs[i].clone(), &self.logs[i]));
        self.step(i, Input::Restarted);
    }

    /// Vnode `i` stops and never answers again; what reaches it is lost.
    pub fn stop(&mut self, i: usize) {
        self.vnodes[i] = None;
    }

    /// Whether restoring `cut` on vnode `i` includes `tx`; `None` when the log cannot restore it.
    pub fn restored_with(&self, i: usize, cut: CutId, tx: &TxId) -> Option<bool> {
        let log = &self.logs[i];
        let included = if self.cfgs[i].strategy == CutStrategy::Versions {
            let records = find_versions_records(log, cut)?;
            restore_to_versions_cut(Checkpoint::default(), log, &records).ok()?.included
        } else {
            let finish = find_finish(log, cut)?;
            restore_to_cut(Checkpoint::default(), log, finish).ok()?.included
        };
        Some(included.contains(tx))
    }

    /// Whether vnode `i`'s log commits `tx` (any branch of it).
    pub fn committed_on(&self, i: usize, tx: &TxId) -> bool {
        self.logs[i].iter().any(|r| match r {
            Record::TxCommitted { branch, .. } => &branch.tx == tx,
            _ => false,
        })
    }
}

/// A `Prepare` to `to`.
pub fn prepare_to(to: &VnodeId) -> impl Fn(&Envelope) -> bool + '_ {
    move |e| &e.to == to && matches!(e.body, Body::Txn(TxnMsg::Prepare { .. }))
}

/// A `StatusQuery` to `to`.
pub fn query_to(to: &VnodeId) -> impl Fn(&Envelope) -> bool + '_ {
    move |e| &e.to == to && matches!(e.body, Body::Txn(TxnMsg::StatusQuery { .. }))
}
