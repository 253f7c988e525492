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
