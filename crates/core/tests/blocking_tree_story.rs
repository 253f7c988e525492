//! The blocking strategy on the cluster tree's cut process (DESIGN §4 `blocking`, §6), as stories:
//! two store vnodes `A` (the near) and `B` (the primary of the key written), both children of a
//! root `R` played by hand, which orders the operator's four alterations of `cut/1`. Under
//! `strategy = blocking` START pauses, STARTED drains and writes the marker, FINISH confirms only
//! a leaf still paused for the cut, END resumes the transactions held meanwhile.

use std::sync::Arc;
use waymark_core::alter::{md5_of, AlterConfig, AlterMsg, AlterRecord, AlterSeq, MetaVersion, ProposalId, Term};
use waymark_core::cut::operator::Phase;
use waymark_core::cut::restore::{find_finish, restore_to_cut, Checkpoint};
use waymark_core::{
    Body, ClientId, CutFinish, CutId, CutStrategy, Envelope, Input, Lsn, Output, Placement, Record, Request, Response,
    Timer, Vnode, VnodeConfig, VnodeId, Write, WriteOp,
};

fn id(name: &str) -> VnodeId {
    VnodeId::parse(name).expect("a vnode id")
}

/// A store vnode of the tree with its log; every append is durable at once, and alteration
/// records are read back at once (the driver's part).
struct Host {
    cfg: VnodeConfig,
    v: Vnode,
    log: Vec<Record>,
    confirms: Vec<AlterMsg>,
    txn_out: Vec<Envelope>,
    replies: Vec<(u64, Response)>,
    now_us: u64,
}

impl Host {
    fn new(cfg: VnodeConfig) -> Host {
        let v = Vnode::new(cfg.clone());
        let mut h = Host { cfg, v, log: vec![], confirms: vec![], txn_out: vec![], replies: vec![], now_us: 0 };
        h.input(Input::Restarted);
        h
    }

    fn input(&mut self, input: Input) {
        self.now_us += 1_000;
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let out = self.v.step(self.now_us, input);
            let before = self.log.len();
            for o in out {
                match o {
                    Output::Append(r) => {
                        if let Record::Alteration { seq, bytes } = &r {
                            inputs.insert(0, Input::AlterPersisted { seq: *seq, bytes: bytes.clone() });
                        }
                        self.log.push(r);
                    }
                    Output::Send(Envelope { body: Body::Alter(msg @ AlterMsg::Confirm { .. }), .. }) => {
                        self.confirms.push(msg)
                    }
                    Output::Send(env @ Envelope { body: Body::Txn(_), .. }) => self.txn_out.push(env),
                    Output::Reply { req, response, .. } => self.replies.push((req, response)),
                    _ => {}
                }
            }
            if self.log.len() > before {
                inputs.push(Input::WalDurable(Lsn(self.log.len() as u64)));
            }
        }
    }

    fn client_set(&mut self, req: u64, key: &[u8], value: &str) {
        let writes = vec![Write { key: key.to_vec(), op: WriteOp::Set(value.as_bytes().to_vec()) }];
        let request = Request::Txn { reads: vec![], writes };
        self.input(Input::Client { client: ClientId(1), req, request });
    }

    /// The confirmation of alteration `seq` this vnode sent, if any: `Some(ok)`.
    fn confirmed(&self, seq: AlterSeq) -> Option<bool> {
        self.confirms.iter().rev().find_map(|m| match m {
            AlterMsg::Confirm { seq: s, ok, .. } if *s == seq => Some(*ok),
            _ => None,
        })
    }

    fn crash_and_restart(&mut self) {
        self.v = Vnode::recover(self.cfg.clone(), &self.log);
        self.txn_out.clear();
        self.input(Input::Restarted);
    }

    fn cut_records(&self) -> Vec<&Record> {
        self.log.iter().filter(|r| matches!(r, Record::CutStart { .. } | Record::CutFinish(_))).collect()
    }
}

struct Cluster {
    root: VnodeId,
    hosts: Vec<Host>,
    seq: AlterSeq,
}

impl Cluster {
    /// `A` = hosts[0] (node001), `B` = hosts[1] (node002): one partition each, one replica.
    fn new() -> Cluster {
        let root = id("manager1@node000");
        let ids = vec![id("store0@node001"), id("store0@node002")];
        let placement = Arc::new(Placement::round_robin(&ids, 2, 1));
        let hosts = ids
            .iter()
            .map(|me| {
                let mut cfg = VnodeConfig::new(me.clone(), placement.clone(), ids[0].clone());
                cfg.strategy = CutStrategy::Blocking;
                cfg.tree = Some(AlterConfig::new(me.clone(), vec![root.clone()], vec![]));
                Host::new(cfg)
            })
            .collect();
        let mut c = Cluster { root, hosts, seq: AlterSeq::ZERO };
        c.send_to_all(AlterMsg::Claim { term: Term(1) });
        c
    }

    fn send_to_all(&mut self, msg: AlterMsg) {
        for h in &mut self.hosts {
            let env =
                Envelope { from: self.root.clone(), to: h.cfg.id.clone(), cut: None, body: Body::Alter(msg.clone()) };
            h.input(Input::Message(env));
        }
    }

    /// The root orders `cut/1` = `phase` and sends it to both leaves.
    fn phase(&mut self, phase: Phase) -> AlterSeq {
        self.seq = self.seq.next();
        let (term, seq) = (Term(1), self.seq);
        let prev_term = if seq == AlterSeq(1) { Term::ZERO } else { term };
        let record: AlterRecord = phase.record(CutId(1));
        let md5 = md5_of(&record.encode(MetaVersion { term, seq }));
        let id = ProposalId { initiator: self.root.clone(), n: CutId(1).0 * 8 + seq.0 };
        self.send_to_all(AlterMsg::Alter { term, prev_term, seq, id, record, md5 });
        seq
    }

    /// Delivers transaction messages between the leaves until none is left.
    fn deliver(&mut self) {
        loop {
            let pending: Vec<Envelope> = self.hosts.iter_mut().flat_map(|h| std::mem::take(&mut h.txn_out)).collect();
            if pending.is_empty() {
                return;
            }
            for env in pending {
                let to = self.hosts.iter_mut().find(|h| h.cfg.id == env.to).expect("a leaf");
                to.input(Input::Message(env));
            }
        }
    }

    fn confirmed(&self, seq: AlterSeq) -> Vec<Option<bool>> {
        self.hosts.iter().map(|h| h.confirmed(seq)).collect()
    }
}

/// A key whose partition's primary is `B`.
fn key_on_b(c: &Cluster) -> Vec<u8> {
    let b = &c.hosts[1].cfg.id;
    let p = c.hosts[1].v.placement().clone();
    (0..).map(|n| format!("k{n}").into_bytes()).find(|k| p.primary_of(k) == b).unwrap()
}

fn committed(h: &Host, req: u64) -> bool {
    h.replies.iter().any(|(r, resp)| *r == req && matches!(resp, Response::Committed { .. }))
}

#[test]
fn a_blocking_tree_cut_pauses_drains_writes_the_marker_and_resumes() {
    let mut c = Cluster::new();
    let key = key_on_b(&c);

    // T1 is open at its near A (its Prepare not delivered yet) when START arrives.
    c.hosts[0].client_set(1, &key, "one");
    assert_eq!(c.hosts[0].txn_out.len(), 1, "T1's prepare, held in flight");
    let start = c.phase(Phase::Start);
    assert_eq!(c.confirmed(start), vec![None, Some(true)], "A pauses but waits for T1; B has nothing open");
    assert!(c.hosts[0].v.is_paused() && c.hosts[1].v.is_paused());

    // A new transaction at the paused near is held back: nothing leaves for it.
    c.hosts[0].client_set(2, &key, "two");
    assert_eq!(c.hosts[0].txn_out.len(), 1, "T2 is queued, only T1's prepare is out");

    // T1 finishes: A is quiet and confirms START.
    c.deliver();
    assert!(committed(&c.hosts[0], 1));
    assert_eq!(c.confirmed(start), vec![Some(true), Some(true)]);

    // STARTED: nothing is prepared anywhere; each leaf writes the marker, then confirms.
    let started = c.phase(Phase::Started);
    assert_eq!(c.confirmed(started), vec![Some(true), Some(true)]);
    let marker = CutFinish { cut: CutId(1), before: Default::default(), after: Default::default() };
    for h in &c.hosts {
        assert_eq!(h.cut_records(), vec![&Record::CutStart { cut: CutId(1) }, &Record::CutFinish(marker.clone())]);
    }
    assert_eq!(c.hosts[0].txn_out.len(), 0, "T2 still held");

    // FINISH: both still paused for cut 1. END:ok resumes A's queue: T2 runs after the marker.
    let finish = c.phase(Phase::Finish);
    assert_eq!(c.confirmed(finish), vec![Some(true), Some(true)]);
    let end = c.phase(Phase::End { ok: true });
    assert_eq!(c.confirmed(end), vec![Some(true), Some(true)]);
    assert!(!c.hosts[0].v.is_paused());
    assert_eq!(c.hosts[0].v.take_commit_stalls_us().len(), 1, "T2 was held back once");
    c.deliver();
    assert!(committed(&c.hosts[0], 2));

    // B's log: T1 committed before the marker, T2 after; the restore at cut 1 holds T1's value.
    let b = &c.hosts[1];
    let commits: Vec<usize> = (0..b.log.len()).filter(|i| matches!(b.log[*i], Record::TxCommitted { .. })).collect();
    let start_at = b.log.iter().position(|r| *r == Record::CutStart { cut: CutId(1) }).unwrap();
    assert_eq!(commits.len(), 2);
    assert!(commits[0] < start_at && start_at + 1 < commits[1], "{:?}", b.log);
    let finish = find_finish(&b.log, CutId(1)).expect("the marker's CutFinish");
    let restored = restore_to_cut(Checkpoint::default(), &b.log, finish).expect("restorable");
    assert_eq!(restored.store.get(&key).value, Some(b"one".to_vec()));
    assert_eq!(b.v.store().get(&key).value, Some(b"two".to_vec()));
}

#[test]
fn a_leaf_that_restarted_after_pausing_fails_the_cut_at_started() {
    let mut c = Cluster::new();
    let start = c.phase(Phase::Start);
    assert_eq!(c.confirmed(start), vec![Some(true), Some(true)]);
    // B restarts: its pause was in memory. It must not write a marker and say it drained.
    c.hosts[1].crash_and_restart();
    assert!(!c.hosts[1].v.is_paused());
    let started = c.phase(Phase::Started);
    assert_eq!(c.confirmed(started), vec![Some(true), Some(false)]);
    assert!(c.hosts[1].cut_records().is_empty(), "no marker without the pause");
    // The operator ends the cut failed; A resumes.
    let end = c.phase(Phase::End { ok: false });
    assert_eq!(c.confirmed(end), vec![Some(true), Some(true)]);
    assert!(!c.hosts[0].v.is_paused());
}

#[test]
fn a_leaf_that_restarted_after_its_marker_fails_the_cut_at_finish() {
    let mut c = Cluster::new();
    let key = key_on_b(&c);
    c.phase(Phase::Start);
    let started = c.phase(Phase::Started);
    assert_eq!(c.confirmed(started), vec![Some(true), Some(true)]);
    // B restarts after its marker: no longer paused, it could take part in a transaction that
    // straddles A's marker. FINISH must not report it ok.
    c.hosts[1].crash_and_restart();
    c.hosts[1].client_set(7, &key, "unpaused");
    let finish = c.phase(Phase::Finish);
    assert_eq!(c.confirmed(finish), vec![Some(true), Some(false)], "the restarted leaf fails the cut");
}

#[test]
fn a_pause_never_outlives_its_cut_even_without_an_end() {
    let mut c = Cluster::new();
    let key = key_on_b(&c);
    c.phase(Phase::Start);
    c.hosts[0].client_set(1, &key, "held");
    assert!(c.hosts[0].txn_out.is_empty(), "held while paused");
    // The operator died: no END comes. After `pause_max_us` the leaf resumes by itself.
    let pause_max_us = c.hosts[0].cfg.timeouts.pause_max_us;
    c.hosts[0].now_us += pause_max_us;
    c.hosts[0].input(Input::Timer(Timer::BlockingPause(CutId(1))));
    assert!(!c.hosts[0].v.is_paused());
    c.deliver();
    assert!(committed(&c.hosts[0], 1), "the held transaction ran");
    // A late STARTED (an operator that was only slow) finds A no longer paused: the cut fails.
    let started = c.phase(Phase::Started);
    assert_eq!(c.confirmed(started)[0], Some(false));
}

#[test]
fn the_paused_queue_is_bounded() {
    let mut c = Cluster::new();
    let key = key_on_b(&c);
    c.phase(Phase::Start);
    let max = c.hosts[0].cfg.limits.paused_queue_max as u64;
    for req in 0..=max {
        c.hosts[0].client_set(req, &key, "x");
    }
    let refused = c.hosts[0].replies.iter().filter(|(_, r)| matches!(r, Response::Unavailable { .. })).count();
    assert_eq!(refused, 1, "one past the bound is refused, not queued");
}
