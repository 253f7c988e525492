//! Transactions as stories on the core's harness, with explicit fsyncs: what waits for what.

mod harness;
use harness::{prepare_to, Cluster};
use waymark_core::{Body, Breaks, ClientId, CutStrategy, Envelope, Record, Response, Timer, TxnMsg};

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
