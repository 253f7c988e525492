//! Transactions as stories on the core's harness, with explicit fsyncs: what waits for what.

mod harness;
use harness::{prepare_to, Cluster};
use waymark_core::message::AbortReason;
use waymark_core::{
    Body, Breaks, ClientId, CutStrategy, Envelope, ReadCheck, Record, Request, Response, Timer, TxnMsg, Write, WriteOp,
};

/// node000 is the near; the transaction writes a key of chain node001 → node002 and one of
/// chain node002 → node000, so it is two-phase and node001's branch has node002 as its backup.
fn two_phase() -> (Cluster, waymark_core::TxId) {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default()).with_explicit_sync();
    let (a, b) = (c.key_with_chain(&[1, 2]), c.key_with_chain(&[2, 0]));
    let tx = c.client_writes(0, &[&a, &b]);
    (c, tx)
}

fn ack_from(host: &'static str) -> impl Fn(&Envelope) -> bool {
    move |e| e.from.host == host && e.to.host == "node000" && matches!(e.body, Body::Txn(TxnMsg::PrepareAck { .. }))
}

#[test]
fn a_two_phase_primary_prepares_its_backups_while_it_syncs_and_answers_only_when_both_are_durable() {
    let (mut c, _) = two_phase();
    let (primary, backup) = (c.ids[1].clone(), c.ids[2].clone());
    assert!(c.deliver(prepare_to(&primary)));
    assert!(c.unsynced(1), "node001's TxPrepared is not durable yet");
    let to_backup = |e: &Envelope| e.from == primary && prepare_to(&backup)(e);
    assert!(c.deliver(to_backup), "the prepare to the backup left before node001's fsync");
    c.sync(2);
    assert!(c.deliver(|e| e.from.host == "node002" && e.to.host == "node001"), "the backup's ack");
    assert!(!c.inflight.iter().any(ack_from("node001")), "node001 answers the near only once durable");
    c.sync(1);
    assert!(c.inflight.iter().any(ack_from("node001")));
    c.settle();
    assert!(matches!(c.heard(ClientId(1))[..], [Response::Committed { .. }]));
}

/// The case that makes it safe: the primary crashes before its `TxPrepared` is durable, after
/// its backup prepared. It never answers, the near aborts, and the backup, asking the near,
/// rolls its branch back: nothing commits anywhere.
#[test]
fn a_primary_that_crashes_before_its_prepare_is_durable_leaves_its_backup_a_branch_that_aborts() {
    let (mut c, tx) = two_phase();
    let (primary, backup) = (c.ids[1].clone(), c.ids[2].clone());
    assert!(c.deliver(prepare_to(&primary)));
    assert!(c.deliver(|e| e.from == primary && prepare_to(&backup)(e)));
    c.sync(2);
    c.crash_and_restart(1);
    assert!(!c.logs[1].iter().any(|r| matches!(r, Record::TxPrepared(p) if p.tx == tx)), "lost in the crash");
    c.drop_where(|e| e.from == primary || e.to == primary);
    assert!(c.fire(0, |t| matches!(t, Timer::PrepareTimeout(_))));
    c.settle();
    assert!(c.fire(2, |t| matches!(t, Timer::InDoubt(b) if b.tx == tx)), "node002 asks about its branch");
    c.settle();
    assert!(c.logs[2].iter().any(|r| matches!(r, Record::TxRolledBack { tx: t, .. } if *t == tx)));
    for i in 0..3 {
        assert!(!c.committed_on(i, &tx), "committed on node00{i}");
    }
    assert!(!matches!(c.heard(ClientId(1))[..], [Response::Committed { .. }]));
}

/// A near's `Prepare` promises nothing about the near's log, so it does not wait behind records
/// the near appended for other transactions: here node000 holds an unsynced `TxPrepared` (it is
/// the primary of another transaction) when its client's transaction arrives.
#[test]
fn a_near_sends_its_prepare_while_its_own_records_sync() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default()).with_explicit_sync();
    let (mine, other) = (c.key_with_chain(&[0, 1]), c.key_with_chain(&[1, 2]));
    let near = c.ids[0].clone();
    c.client_set(1, &mine);
    assert!(c.deliver(prepare_to(&near)));
    assert!(c.unsynced(0), "node000's TxPrepared for node001's transaction is not durable yet");
    let tx = c.client_set(0, &other);
    assert!(c.unsynced(0));
    let primary = c.ids[1].clone();
    assert!(c.inflight.iter().any(|e| e.from == near && prepare_to(&primary)(e)), "{tx:?} left at once");
}

/// A 1PC primary answers up the chain once its `TxPrepared` is durable, not its `TxCommitted`:
/// the first committer logged the decision. The case that makes it safe: the primary crashes
/// with its outcome record unsynced, after the client heard `Committed`. Its branch is in doubt
/// again, and the first committer's answer commits it.
#[test]
fn a_one_phase_primary_answers_before_its_outcome_is_durable_and_a_crash_leaves_the_branch_in_doubt() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default()).with_explicit_sync();
    let key = c.key_with_chain(&[1, 2]);
    let tx = c.client_set(0, &key);
    let (primary, backup) = (c.ids[1].clone(), c.ids[2].clone());
    assert!(c.deliver(prepare_to(&primary)));
    c.sync(1);
    assert!(c.deliver(prepare_to(&backup)));
    c.sync(2);
    assert!(c.deliver(|e| e.from == backup && e.to == primary), "the first committer's answer");
    assert!(c.unsynced(1), "node001's TxCommitted is not durable yet");
    assert!(c.deliver(ack_from("node001")), "node001 answered up the chain all the same");
    assert!(matches!(c.heard(ClientId(1))[..], [Response::Committed { .. }]));

    c.crash_and_restart(1);
    assert!(!c.committed_on(1, &tx), "its outcome record was lost in the crash");
    assert!(c.fire(1, |t| matches!(t, Timer::InDoubt(b) if b.tx == tx)), "node001 asks about its branch");
    c.settle();
    assert!(c.committed_on(1, &tx), "the first committer's word commits it again");
}

fn read_reply_from(from: &'static str) -> impl Fn(&Envelope) -> bool {
    move |e| e.from.host == from && matches!(e.body, Body::Txn(TxnMsg::ReadReply { .. }))
}

/// With one replica the primary is the first committer: what it applied is only as durable as
/// its own `TxCommitted`, and a read's answer waits for it (`--break reads-before-commit-durable`
/// answers at once, and the simulator's read-monotonic checker sees a crash take the value back).
#[test]
fn a_read_of_a_commit_its_primary_decided_itself_waits_for_that_record() {
    let mut c = Cluster::new(3, 1, CutStrategy::Consistent, Breaks::default()).with_explicit_sync();
    let key = c.key_with_chain(&[1]);
    c.client_set(0, &key);
    assert!(c.deliver(prepare_to(&c.ids[1].clone())));
    assert!(c.unsynced(1), "node001 committed as first committer; its TxCommitted is syncing");
    c.client(0, ClientId(2), Request::Get { key: key.clone() });
    assert!(c.deliver(|e| e.to.host == "node001" && matches!(e.body, Body::Txn(TxnMsg::Read { .. }))));
    assert!(!c.inflight.iter().any(read_reply_from("node001")), "held until the commit is durable");
    c.sync(1);
    assert!(c.deliver(read_reply_from("node001")));
    assert!(matches!(c.heard(ClientId(2))[..], [Response::Value { value: Some(_), .. }]));
}

/// Regression (found 2026-12-04 by the simulator: `topology.rs`'s store matrix at seed 0 of
/// `--workload append --vnodes 10 --replicas 3 --cuts --duration-ms 500`, on a build whose reads
/// were answered sooner). A 2PC primary that only validated a read logged nothing, so a crash after
/// its `PrepareAck` released the read's lock: a transaction writing the key there committed while
/// the first one's other prepare was on its way, and the near then committed the first on the
/// acknowledgement from before the crash — it read `r` before T2 wrote it and wrote `w` after T2
/// did, a cycle. Every branch is now logged with the keys it locked for reads, and a restart locks
/// them again.
#[test]
fn a_read_lock_survives_a_crash_so_no_write_commits_under_an_acknowledged_read() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default()).with_explicit_sync();
    let (r, w) = (c.key_with_chain(&[1, 2]), c.key_with_chain(&[2, 0]));
    let set = |k: &[u8]| Write { key: k.to_vec(), op: WriteOp::Set(b"x".to_vec()) };
    let first = Request::Txn { reads: vec![ReadCheck { key: r.clone(), version: 0 }], writes: vec![set(&w)] };
    c.client(0, ClientId(1), first);
    let t1 = match c.inflight.last().map(|e| &e.body) {
        Some(Body::Txn(TxnMsg::Prepare { tx, .. })) => tx.clone(),
        other => panic!("expected a prepare, got {other:?}"),
    };
    let (p1, p2) = (c.ids[1].clone(), c.ids[2].clone());
    let t1_to_p2 = |e: &Envelope| e.to == p2 && matches!(&e.body, Body::Txn(TxnMsg::Prepare { tx, .. }) if *tx == t1);
    assert!(c.deliver(prepare_to(&p1)), "node001 validates the read and locks r");
    c.settle_but(t1_to_p2);
    c.crash_and_restart(1);
    c.settle_but(t1_to_p2);
    // T2 writes both keys while T1's prepare to node002 is still on its way: it meets the lock.
    c.client(0, ClientId(2), Request::Txn { reads: vec![], writes: vec![set(&r), set(&w)] });
    c.settle_but(t1_to_p2);
    assert!(
        matches!(c.heard(ClientId(2))[..], [Response::Aborted { .. }]),
        "T2 wrote r under T1's read lock: {:?}",
        c.heard(ClientId(2))
    );
    c.settle();
    assert!(matches!(c.heard(ClientId(1))[..], [Response::Committed { .. }]), "T1 commits its read");
}

/// Redis's `noeviction`, with `replica-ignore-maxmemory`: while node001's host is at its memory
/// limit, its primary refuses a write that stores a value and takes one that deletes, while its
/// replica still applies what node000's primary commits; below the limit, it takes writes again.
#[test]
fn a_primary_at_the_memory_limit_refuses_values_but_takes_deletes_and_its_replicas_still_apply() {
    let mut c = Cluster::new(2, 2, CutStrategy::Consistent, Breaks::default());
    let (on_full, on_other) = (c.key_with_chain(&[1, 0]), c.key_with_chain(&[0, 1]));
    let txn = |key: &[u8], op| Request::Txn { reads: vec![], writes: vec![Write { key: key.to_vec(), op }] };
    let ask = |c: &mut Cluster, request| {
        c.client(0, ClientId(1), request);
        c.settle();
        c.heard(ClientId(1)).last().map(|r| (*r).clone()).expect("an answer")
    };
    let committed = |r: &Response| matches!(r, Response::Committed { .. });
    assert!(committed(&ask(&mut c, txn(&on_full, WriteOp::Set(b"v".to_vec())))));

    c.step(1, waymark_core::Input::MemoryLimit { reached: true });
    let refused = ask(&mut c, txn(&on_full, WriteOp::Append(b"w".to_vec())));
    assert!(matches!(refused, Response::Aborted { reason: AbortReason::OutOfMemory, .. }), "{refused:?}");
    assert!(committed(&ask(&mut c, txn(&on_other, WriteOp::Set(b"x".to_vec())))), "node000's primary is not full");
    assert_eq!(c.vnode(1).store().get(&on_other).value, Some(b"x".to_vec()), "the full host's replica applied it");
    assert!(committed(&ask(&mut c, txn(&on_full, WriteOp::Del))));
    assert_eq!(c.vnode(1).store().get(&on_full).value, None);

    c.step(1, waymark_core::Input::MemoryLimit { reached: false });
    assert!(committed(&ask(&mut c, txn(&on_full, WriteOp::Set(b"y".to_vec())))));
}
