//! Vnode stories in the openraft style: given this state, on this input, exactly these outputs.

use std::sync::Arc;
use waymark_core::message::{AbortReason, PrepareWrites};
use waymark_core::{
    Body, ClientId, CutId, CutMsg, Envelope, Input, Lsn, Output, Placement, Record, Request, Response, Role, TxnMsg,
    Vnode, VnodeConfig, VnodeId, Write, WriteOp,
};

fn ids() -> Vec<VnodeId> {
    vec![VnodeId::new("store0", "node000"), VnodeId::new("store0", "node001")]
}

/// Two vnodes, two partitions, one replica each: partition 0 on node000, partition 1 on node001.
fn booted(i: usize) -> Vnode {
    let ids = ids();
    let placement = Arc::new(Placement::round_robin(&ids, 2, 1));
    let mut v = Vnode::new(VnodeConfig::new(ids[i].clone(), placement, ids[0].clone()));
    assert_eq!(v.step(0, Input::Restarted), vec![Output::Append(Record::Boot { incarnation: 0 })]);
    assert_eq!(v.step(1, Input::WalDurable(Lsn(1))), vec![]);
    v
}

/// A key whose partition lives on vnode `i`.
fn key_on(i: usize) -> Vec<u8> {
    let placement = Placement::round_robin(&ids(), 2, 1);
    (0..).map(|n| format!("k{n}").into_bytes()).find(|k| placement.primary_of(k) == &ids()[i]).unwrap()
}

fn sends(outputs: &[Output]) -> Vec<&Envelope> {
    outputs.iter().filter_map(|o| if let Output::Send(e) = o { Some(e) } else { None }).collect()
}

#[test]
fn a_single_partition_write_is_one_phase_and_the_primary_answers_only_once_its_commit_is_durable() {
    let mut near = booted(1);
    let key = key_on(0);
    let set = Request::Txn { reads: vec![], writes: vec![Write { key: key.clone(), op: WriteOp::Set(b"v".to_vec()) }] };
    let out = near.step(2, Input::Client { client: ClientId(7), req: 1, request: set });
    let prepare = sends(&out)[0].clone();
    assert!(
        matches!(&prepare.body, Body::Txn(TxnMsg::Prepare { one_phase: true, downstream, .. }) if downstream.is_empty())
    );

    let mut primary = booted(0);
    let out = primary.step(3, Input::Message(prepare));
    assert_eq!(out.len(), 1, "only the commit record, the ack waits: {out:?}");
    assert!(matches!(&out[0], Output::Append(Record::TxCommitted { tx_cut: None, writes, .. }) if writes.len() == 1));

    let out = primary.step(4, Input::WalDurable(Lsn(2)));
    let ack = sends(&out)[0].clone();
    assert!(matches!(&ack.body, Body::Txn(TxnMsg::PrepareAck { role: Role::Primary, result: Ok(_), .. })));
    let out = near.step(5, Input::Message(ack));
    assert!(matches!(&out[..], [Output::Reply { client: ClientId(7), req: 1, response: Response::Committed { .. } }]));
    assert_eq!(primary.store().get(&key).value, Some(b"v".to_vec()));
}

#[test]
fn a_coloured_message_starts_the_cut_before_it_is_handled() {
    let mut primary = booted(0);
    let writes = PrepareWrites::Unresolved(vec![Write { key: key_on(0), op: WriteOp::Set(b"v".to_vec()) }]);
    let tx = waymark_core::TxId { near: ids()[1].clone(), incarnation: 0, seq: 0 };
    let prepare = TxnMsg::Prepare {
        tx,
        reads: vec![],
        writes,
        one_phase: false,
        first_committer: ids()[1].clone(),
        downstream: vec![],
        after: vec![],
        epoch: 0,
    };
    let env = Envelope { from: ids()[1].clone(), to: ids()[0].clone(), cut: Some(CutId(1)), body: Body::Txn(prepare) };
    let out = primary.step(2, Input::Message(env));
    assert_eq!(out[0], Output::Append(Record::CutStart { cut: CutId(1) }), "the cut starts first: {out:?}");
    assert!(matches!(out[1], Output::Append(Record::CutFinish(_))), "nothing was in flight: it finishes at once");
    assert!(matches!(out[2], Output::Append(Record::TxPrepared(_))));
    assert_eq!(primary.running_cut(), Some(CutId(1)));
    let out = primary.step(3, Input::WalDurable(Lsn(4)));
    assert_eq!(sends(&out)[0].cut, Some(CutId(1)), "the answer is coloured with the running cut");
}

/// Feeds `v` every input until it is quiet: appends become durable at once.
fn settle(v: &mut Vnode, now: u64, input: Input, lsn: &mut u64) -> Vec<Output> {
    let mut out = v.step(now, input);
    let appended = out.iter().filter(|o| matches!(o, Output::Append(_))).count() as u64;
    if appended > 0 {
        *lsn += appended;
        out.extend(v.step(now, Input::WalDurable(Lsn(*lsn))));
    }
    out
}

#[test]
fn two_partitions_take_two_phases_and_the_near_decides_with_a_durable_record_first() {
    let mut near = booted(0);
    let mut other = booted(1);
    let (a, b) = (key_on(0), key_on(1));
    let writes =
        vec![Write { key: a.clone(), op: WriteOp::IncrBy(-5) }, Write { key: b.clone(), op: WriteOp::IncrBy(5) }];
    let (mut near_lsn, mut other_lsn) = (1, 1);
    let request = Request::Txn { reads: vec![], writes };
    let out = settle(&mut near, 2, Input::Client { client: ClientId(1), req: 9, request }, &mut near_lsn);
    let prepares: Vec<Envelope> = sends(&out).into_iter().cloned().collect();
    assert_eq!(prepares.len(), 2, "one prepare per primary, the near being one of them");
    assert!(prepares.iter().all(|p| matches!(&p.body, Body::Txn(TxnMsg::Prepare { one_phase: false, .. }))));

    let mut acks = vec![];
    for p in prepares {
        let (v, lsn) = if p.to == ids()[0] { (&mut near, &mut near_lsn) } else { (&mut other, &mut other_lsn) };
        let out = settle(v, 3, Input::Message(p), lsn);
        assert!(matches!(out[0], Output::Append(Record::TxPrepared(_))), "prepare is logged before the ack: {out:?}");
        acks.extend(sends(&out).into_iter().cloned());
    }
    let mut decision = vec![];
    for ack in acks {
        decision.extend(near.step(4, Input::Message(ack)));
    }
    assert!(matches!(decision[0], Output::Append(Record::TxDecided { tx_cut: None, .. })), "{decision:?}");
    assert_eq!(decision.len(), 1, "the reply and the finishes wait for the decision to be durable");
    let out = near.step(5, Input::WalDurable(Lsn(near_lsn + 1)));
    assert!(matches!(&out[0], Output::Reply { req: 9, response: Response::Committed { .. }, .. }));
    assert_eq!(sends(&out).len(), 2, "Finish to both primaries");
}

#[test]
fn after_a_crash_a_prepared_branch_is_in_doubt_and_asks_its_first_committer() {
    let mut primary = booted(0);
    let writes = PrepareWrites::Unresolved(vec![Write { key: key_on(0), op: WriteOp::Set(b"v".to_vec()) }]);
    let tx = waymark_core::TxId { near: ids()[1].clone(), incarnation: 0, seq: 0 };
    let prepare = TxnMsg::Prepare {
        tx: tx.clone(),
        reads: vec![],
        writes,
        one_phase: false,
        first_committer: ids()[1].clone(),
        downstream: vec![],
        after: vec![],
        epoch: 0,
    };
    let env = Envelope { from: ids()[1].clone(), to: ids()[0].clone(), cut: None, body: Body::Txn(prepare) };
    let out = primary.step(2, Input::Message(env));
    let Output::Append(prepared) = out[0].clone() else { panic!("{out:?}") };

    // The crash loses memory, not the durable log: Boot + TxPrepared.
    let log = vec![Record::Boot { incarnation: 0 }, prepared];
    let placement = Arc::new(Placement::round_robin(&ids(), 2, 1));
    let mut back = Vnode::recover(VnodeConfig::new(ids()[0].clone(), placement, ids()[0].clone()), &log);
    assert_eq!(back.prepared_count(), 1);
    let out = back.step(10, Input::Restarted);
    assert_eq!(out[0], Output::Append(Record::Boot { incarnation: 1 }));
    let Some(Output::SetTimer { timer, .. }) = out.get(1).cloned() else { panic!("an in-doubt timer: {out:?}") };
    back.step(11, Input::WalDurable(Lsn(3)));
    let out = back.step(1_000_000, Input::Timer(timer));
    let query = sends(&out)[0].clone();
    assert_eq!(query.to, ids()[1], "the first committer (the near) is asked");
    assert!(matches!(&query.body, Body::Txn(TxnMsg::StatusQuery { one_phase: false, .. })));

    // The near restarted too and has no record of it: presumed abort.
    let reply = TxnMsg::StatusReply { tx, status: waymark_core::message::TxStatus::Aborted };
    let env = Envelope { from: ids()[1].clone(), to: ids()[0].clone(), cut: None, body: Body::Txn(reply) };
    let out = back.step(1_000_001, Input::Message(env));
    assert!(matches!(out[0], Output::Append(Record::TxRolledBack { .. })), "{out:?}");
    assert_eq!(back.prepared_count(), 0);
}

#[test]
fn a_store_vnode_of_the_tree_routes_by_the_placement_its_metadata_records() {
    use waymark_core::alter::cluster::{self, VnodeEntry};
    let ids = ids();
    let given = Arc::new(Placement::round_robin(&ids, 2, 1));
    // The metadata says otherwise: partition 0 on node001, partition 1 on node000.
    let reversed: Vec<VnodeId> = ids.iter().rev().cloned().collect();
    let recorded = Placement::round_robin(&reversed, 2, 1);
    let manager = VnodeId::new("manager1", "node000");
    let vnodes = ids.iter().map(|id| VnodeEntry { id, parents: vec![manager.clone()] });
    let mut cfg = VnodeConfig::new(ids[0].clone(), given.clone(), ids[0].clone());
    cfg.genesis = cluster::genesis(&[], vnodes, Some(&recorded));
    let tree = waymark_core::alter::AlterConfig {
        siblings: ids.clone(),
        failover: true,
        leaf_view: true,
        ..waymark_core::alter::AlterConfig::new(ids[0].clone(), vec![manager.clone()], vec![])
    };
    cfg.tree = Some(tree);
    let v = Vnode::new(cfg);
    assert_eq!(v.placement(), &recorded);
    assert_ne!(v.placement(), &*given);
}

fn cut_msg(from: usize, to: usize, msg: CutMsg) -> Input {
    let ids = ids();
    Input::Message(Envelope { from: ids[from].clone(), to: ids[to].clone(), cut: None, body: Body::Cut(msg) })
}

fn cut_sends(outputs: &[Output]) -> Vec<CutMsg> {
    sends(outputs).into_iter().filter_map(|e| if let Body::Cut(m) = &e.body { Some(m.clone()) } else { None }).collect()
}

/// Vnode 1, booted, with a branch of a 2PC transaction (near: vnode 0) prepared and durable: a
/// cut that starts now waits for it. Returns the vnode and its log.
fn with_a_prepared_branch() -> (Vnode, Vec<Record>) {
    let mut v = booted(1);
    let writes = PrepareWrites::Unresolved(vec![Write { key: key_on(1), op: WriteOp::Set(b"v".to_vec()) }]);
    let tx = waymark_core::TxId { near: ids()[0].clone(), incarnation: 0, seq: 0 };
    let prepare = TxnMsg::Prepare {
        tx,
        reads: vec![],
        writes,
        one_phase: false,
        first_committer: ids()[0].clone(),
        downstream: vec![],
        after: vec![],
        epoch: 0,
    };
    let env = Envelope { from: ids()[0].clone(), to: ids()[1].clone(), cut: None, body: Body::Txn(prepare) };
    let out = v.step(2, Input::Message(env));
    let Output::Append(prepared) = out[0].clone() else { panic!("{out:?}") };
    v.step(3, Input::WalDurable(Lsn(2)));
    (v, vec![Record::Boot { incarnation: 0 }, prepared])
}

fn coloured_read(cut: u64) -> Input {
    let ids = ids();
    let read = TxnMsg::Read { req: 1, key: key_on(1) };
    Input::Message(Envelope { from: ids[0].clone(), to: ids[1].clone(), cut: Some(CutId(cut)), body: Body::Txn(read) })
}

/// The one-replica real-time case of issue 11, decided: `CutStart` is appended without holding
/// later messages, but the answer to START waits for it. Were `StartAck` to leave first (it did
/// while a transaction kept the local cut open), a crash losing `CutStart` would leave a vnode
/// that acknowledged the cut without knowing it: it would acknowledge STARTED (other vnodes then
/// release their held replies), commit as *before* the cut a transaction a client sent after
/// seeing an *after* one, start the cut late from a coloured message and finish it with that
/// transaction inside — the real-time order broken in a successful cut.
#[test]
fn a_vnode_acknowledges_a_cut_only_once_its_cut_start_is_durable_so_a_crash_cannot_make_it_forget_one() {
    let (mut v, mut log) = with_a_prepared_branch();
    let out = v.step(4, cut_msg(0, 1, CutMsg::Start { cut: CutId(1) }));
    assert_eq!(out, vec![Output::Append(Record::CutStart { cut: CutId(1) })], "StartAck waits for CutStart");
    let out = v.step(5, Input::WalDurable(Lsn(3)));
    assert_eq!(cut_sends(&out), vec![CutMsg::StartAck { cut: CutId(1) }]);

    // A crash now keeps `CutStart`: the restarted vnode knows cut 1 is over for it. A coloured
    // message does not start it again, and it has no local cut to offer FINISH.
    log.push(Record::CutStart { cut: CutId(1) });
    let mut v = Vnode::recover(v.config().clone(), &log);
    v.step(6, Input::Restarted);
    v.step(7, Input::WalDurable(Lsn(4)));
    let out = v.step(8, coloured_read(1));
    assert!(!out.iter().any(|o| matches!(o, Output::Append(Record::CutStart { .. }))), "{out:?}");
    let out = v.step(9, cut_msg(0, 1, CutMsg::Finish { cut: CutId(1) }));
    assert_eq!(cut_sends(&out), vec![CutMsg::Finished { cut: CutId(1), ok: false }]);
}

/// The same when a coloured message started the cut first: START, arriving before that
/// `CutStart` is durable, is answered only once it is.
#[test]
fn a_cut_started_by_a_coloured_message_is_acknowledged_only_once_its_cut_start_is_durable() {
    let (mut v, _) = with_a_prepared_branch();
    let out = v.step(4, coloured_read(1));
    assert!(out.contains(&Output::Append(Record::CutStart { cut: CutId(1) })));
    let out = v.step(5, cut_msg(0, 1, CutMsg::Start { cut: CutId(1) }));
    assert!(cut_sends(&out).is_empty(), "StartAck before CutStart is durable: {out:?}");
    let out = v.step(6, Input::WalDurable(Lsn(3)));
    assert_eq!(cut_sends(&out), vec![CutMsg::StartAck { cut: CutId(1) }]);
}

/// Real-time safety covers a failed `WATCH` (issue 11): the abort tells the client the key moved
/// on, so when the write that moved it is *after* a cut not yet started everywhere, the primary's
/// refusal names that cut and the near holds the abort until STARTED, like an acknowledgement.
#[test]
fn an_abort_that_reveals_an_after_write_is_held_until_every_vnode_started_the_cut() {
    let ids = ids();
    let (mut primary, _) = with_a_prepared_branch();
    // The prepared branch commits, stamped after cut 1 by its first committer (vnode 0).
    let tx = waymark_core::TxId { near: ids[0].clone(), incarnation: 0, seq: 0 };
    let finish = TxnMsg::Finish { tx, role: Role::Primary, commit: true, tx_cut: Some(CutId(1)) };
    let env = Envelope { from: ids[0].clone(), to: ids[1].clone(), cut: Some(CutId(1)), body: Body::Txn(finish) };
    let mut lsn = 2;
    settle(&mut primary, 4, Input::Message(env), &mut lsn);

    // A transaction that read the key before that write: its WATCH fails, and says why.
    let key = key_on(1);
    let writes = PrepareWrites::Unresolved(vec![Write { key: key.clone(), op: WriteOp::Set(b"w".to_vec()) }]);
    let late = waymark_core::TxId { near: ids[0].clone(), incarnation: 0, seq: 1 };
    let reads = vec![waymark_core::ReadCheck { key: key.clone(), version: 0 }];
    let prepare = TxnMsg::Prepare {
        tx: late.clone(),
        reads,
        writes,
        one_phase: false,
        first_committer: ids[0].clone(),
        downstream: vec![],
        after: vec![],
        epoch: 0,
    };
    let env = Envelope { from: ids[0].clone(), to: ids[1].clone(), cut: None, body: Body::Txn(prepare) };
    let out = settle(&mut primary, 5, Input::Message(env), &mut lsn);
    let refusal = sends(&out).into_iter().find(|e| matches!(&e.body, Body::Txn(TxnMsg::PrepareAck { .. }))).cloned();
    let refusal = refusal.expect("the primary answers");
    let Body::Txn(TxnMsg::PrepareAck { result: Err(AbortReason::WatchFailed { .. }), tx_cut, .. }) = &refusal.body
    else {
        panic!("a WATCH failure: {refusal:?}")
    };
    assert_eq!(*tx_cut, Some(CutId(1)), "the refusal names the cut its reason reveals");

    // The near holds the abort until STARTED{1}.
    let mut near = booted(0);
    let request = Request::Txn {
        reads: vec![waymark_core::ReadCheck { key: key.clone(), version: 0 }],
        writes: vec![Write { key, op: WriteOp::Set(b"w".to_vec()) }],
    };
    let mut near_lsn = 1;
    let out = settle(&mut near, 6, Input::Client { client: ClientId(3), req: 1, request }, &mut near_lsn);
    let Some(Body::Txn(TxnMsg::Prepare { tx, .. })) = sends(&out).first().map(|e| e.body.clone()) else {
        panic!("{out:?}")
    };
    let Body::Txn(TxnMsg::PrepareAck { role, result, tx_cut, .. }) = refusal.body else { unreachable!() };
    let ack = TxnMsg::PrepareAck { tx, role, result, tx_cut };
    let env = Envelope { from: ids[1].clone(), to: ids[0].clone(), cut: Some(CutId(1)), body: Body::Txn(ack) };
    let out = settle(&mut near, 7, Input::Message(env), &mut near_lsn);
    assert!(!out.iter().any(|o| matches!(o, Output::Reply { .. })), "the abort is held: {out:?}");
    let out = settle(&mut near, 8, cut_msg(1, 0, CutMsg::Started { cut: CutId(1) }), &mut near_lsn);
    let aborted = |o: &Output| matches!(o, Output::Reply { req: 1, response: Response::Aborted { .. }, .. });
    assert!(out.iter().any(aborted), "released by STARTED: {out:?}");
}
