//! Vnode stories in the openraft style: given this state, on this input, exactly these outputs.

use std::sync::Arc;
use waymark_core::message::PrepareWrites;
use waymark_core::{
    Body, ClientId, CutId, Envelope, Input, Lsn, Output, Placement, Record, Request, Response, Role, TxnMsg, Vnode,
    VnodeConfig, VnodeId, Write, WriteOp,
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
