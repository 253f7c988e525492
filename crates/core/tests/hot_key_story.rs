//! A hot key under 1PC (`txn::locks`): a second transaction on a locked key is pipelined after the
//! first — evaluated on its uncommitted write, sent down the chain after it — instead of aborting;
//! the first committer commits it only after the first.

use std::sync::Arc;
use waymark_core::message::PrepareWrites;
use waymark_core::{
    AbortReason, Body, Envelope, Input, Lsn, Output, Placement, Record, ResolvedWrite, Role, TxId, TxnMsg, Vnode,
    VnodeConfig, VnodeId, Write, WriteOp,
};

fn ids() -> Vec<VnodeId> {
    vec![VnodeId::new("store0", "p"), VnodeId::new("store0", "f"), VnodeId::new("store0", "n")]
}

/// One partition, chain [p, f]: p is the primary, f the backup and first committer; n a near.
fn booted(i: usize) -> Vnode {
    let ids = ids();
    let placement = Arc::new(
        Placement::from_chains(
            vec![waymark_core::placement::ChainRecord { epoch: 0, chain: ids[..2].to_vec(), learners: vec![] }],
            ids.clone(),
        )
        .unwrap(),
    );
    let mut v = Vnode::new(VnodeConfig::new(ids[i].clone(), placement, ids[0].clone()));
    v.step(0, Input::Restarted);
    v.step(1, Input::WalDurable(Lsn(1)));
    v
}

fn tx(seq: u32) -> TxId {
    TxId { near: ids()[2].clone(), incarnation: 0, seq }
}

fn incr(seq: u32) -> Envelope {
    let writes = PrepareWrites::Unresolved(vec![Write { key: b"hot".to_vec(), op: WriteOp::IncrBy(1) }]);
    let msg = TxnMsg::Prepare {
        tx: tx(seq),
        reads: vec![],
        writes,
        one_phase: true,
        first_committer: ids()[1].clone(),
        downstream: vec![ids()[1].clone()],
        after: vec![],
        epoch: 0,
    };
    Envelope { from: ids()[2].clone(), to: ids()[0].clone(), cut: None, body: Body::Txn(msg) }
}

fn sent(outputs: &[Output]) -> Vec<Envelope> {
    outputs.iter().filter_map(|o| if let Output::Send(e) = o { Some(e.clone()) } else { None }).collect()
}

fn resolved(value: &str, version: u64) -> Vec<ResolvedWrite> {
    vec![ResolvedWrite { key: b"hot".to_vec(), value: Some(value.into()), version, deadline_ms: None }]
}

#[test]
fn a_second_increment_on_a_locked_key_is_pipelined_after_the_first_instead_of_aborting() {
    let mut p = booted(0);
    p.step(2, Input::Message(incr(1)));
    let out = p.step(3, Input::Message(incr(2)));
    let prepared: Vec<_> =
        out.iter().filter_map(|o| if let Output::Append(Record::TxPrepared(r)) = o { Some(r) } else { None }).collect();
    assert_eq!(prepared.len(), 1, "{out:?}");
    assert_eq!(prepared[0].writes, resolved("2", 2), "evaluated on the first increment's write");
    assert_eq!(prepared[0].after, vec![tx(1)]);
    let out = p.step(4, Input::WalDurable(Lsn(3)));
    let down = sent(&out);
    assert_eq!(down.len(), 2, "both prepares go down the chain, in order: {out:?}");
    let after: Vec<Vec<TxId>> = down
        .iter()
        .map(|e| match &e.body {
            Body::Txn(TxnMsg::Prepare { after, .. }) => after.clone(),
            other => panic!("not a prepare: {other:?}"),
        })
        .collect();
    assert_eq!(after, vec![vec![], vec![tx(1)]]);

    let mut f = booted(1);
    let mut acks = vec![];
    for (n, e) in down.into_iter().enumerate() {
        f.step(5 + n as u64, Input::Message(e));
    }
    acks.extend(sent(&f.step(9, Input::WalDurable(Lsn(3)))));
    assert_eq!(f.store().get(b"hot").value, Some(b"2".to_vec()), "the first committer applied both, in order");
    for (n, a) in acks.into_iter().enumerate() {
        p.step(10 + n as u64, Input::Message(a));
    }
    assert_eq!(p.store().get(b"hot").value, Some(b"2".to_vec()));
    assert_eq!(p.prepared_count(), 0);
}

#[test]
fn the_first_committer_refuses_a_pipelined_transaction_whose_predecessor_it_never_committed() {
    let mut p = booted(0);
    p.step(2, Input::Message(incr(1)));
    p.step(3, Input::Message(incr(2)));
    let down = sent(&p.step(4, Input::WalDurable(Lsn(3))));
    // The first prepare is lost on a broken link; only the second arrives.
    let mut f = booted(1);
    let out = f.step(5, Input::Message(down[1].clone()));
    assert!(matches!(&out[..], [Output::Append(Record::TxRolledBack { branch: None, .. })]), "{out:?}");
    let ack = sent(&f.step(6, Input::WalDurable(Lsn(2))));
    assert!(matches!(
        &ack[0].body,
        Body::Txn(TxnMsg::PrepareAck { role: Role::Backup, result: Err(AbortReason::PresumedAbort), .. })
    ));
    assert_eq!(f.store().get(b"hot").version, 0, "nothing of the second transaction was applied");
}
