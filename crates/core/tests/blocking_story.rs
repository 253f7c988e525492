//! The `blocking` comparison strategy (`cut::blocking`) as stories: PAUSE, DRAIN (the marker),
//! CHECK, END — and why a vnode that wrote its marker refuses every prepare until END.

mod harness;
use harness::{prepare_to, Cluster};
use waymark_core::message::AbortReason;
use waymark_core::{Body, Breaks, CutId, CutMsg, CutStrategy, Envelope, Response, Timer, TxnMsg};

fn blocking(breaks: Breaks) -> Cluster {
    Cluster::new(3, 2, CutStrategy::Blocking, breaks)
}

fn end_to(host: &'static str) -> impl Fn(&Envelope) -> bool {
    move |e| e.to.host == host && matches!(e.body, Body::Cut(CutMsg::End { .. }))
}

/// Seed 542 of `--cuts --strategy blocking`, with a near that restarts: a one-phase transaction
/// from node000 down the chain node001 → node002, its `Prepare` to the backup held up; the near
/// times out on it and — before its question to the first committer gets there — crashes and
/// restarts, so it no longer knows the transaction (a near that did not restart keeps it
/// unresolved and does not pause: `a_blocking_tree_cut_waits_for_…` in the simulator's seeds).
/// It answers PAUSED; the backup, with nothing prepared, writes its marker; then the `Prepare`
/// arrives. Returns the cluster and the transaction.
fn late_prepare_after_the_backups_marker(breaks: Breaks) -> (Cluster, waymark_core::TxId) {
    let mut c = blocking(breaks);
    let key = c.key_with_chain(&[1, 2]);
    let tx = c.client_set(0, &key);
    let (primary, backup) = (c.ids[1].clone(), c.ids[2].clone());
    assert!(c.deliver(prepare_to(&primary)));
    assert!(c.fire(0, |t| matches!(t, Timer::PrepareTimeout(_))), "the near gives up on it");
    assert!(matches!(c.heard(waymark_core::ClientId(1))[..], [Response::Unknown { .. }]));
    c.drop_where(|e| e.from.host == "node000" && matches!(e.body, Body::Txn(TxnMsg::StatusQuery { .. })));
    c.crash_and_restart(0);
    c.begin_cut();
    c.deliver_all_but(prepare_to(&backup));
    assert!(c.logs[2].iter().any(|r| matches!(r, waymark_core::Record::CutStart { .. })), "the backup's marker");
    assert_eq!(c.cut_outcome(), None, "the primary still has it prepared: no marker there yet");
    assert!(c.deliver(prepare_to(&backup)));
    c.deliver_all();
    (c, tx)
}

#[test]
fn a_backup_that_wrote_its_marker_refuses_a_late_prepare_and_the_transaction_aborts_everywhere() {
    let (c, tx) = late_prepare_after_the_backups_marker(Breaks::default());
    assert_eq!(c.cut_outcome(), Some(true));
    for i in 0..3 {
        assert!(!c.committed_on(i, &tx), "committed on node00{i}");
    }
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(false));
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false));
}

#[test]
fn without_the_refusal_the_late_transaction_is_before_the_marker_on_one_replica_and_after_it_on_the_other() {
    let breaks = Breaks { blocking_prepare_after_marker: true, ..Breaks::default() };
    let (c, tx) = late_prepare_after_the_backups_marker(breaks);
    assert_eq!(c.cut_outcome(), Some(true), "the cut is declared successful");
    assert!(c.committed_on(1, &tx) && c.committed_on(2, &tx));
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(true), "the primary committed it, then drained");
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false), "the backup committed it after its marker");
}

/// Seed 15 of the same sweep, after the refusal: in two-phase commit the backups of a primary
/// answer its `Prepare` too, and the primary used to take any answer as a yes. A backup still
/// holding its marker (its END not yet arrived) refused, the primary acknowledged the branch
/// anyway, and the transaction committed everywhere but on that backup — acknowledged and lost.
#[test]
fn a_two_phase_transaction_whose_backup_refuses_is_aborted_and_its_client_told_so() {
    let mut c = blocking(Breaks::default());
    c.begin_cut();
    c.deliver_all_but(end_to("node002"));
    assert_eq!(c.cut_outcome(), Some(true), "ended for the operator; node002 has not heard yet");
    let (a, b) = (c.key_with_chain(&[0, 1]), c.key_with_chain(&[1, 2]));
    let tx = c.client_writes(0, &[&a, &b]);
    c.deliver_all_but(end_to("node002"));
    let refused = Response::Aborted { tx: Some(tx.clone()), reason: AbortReason::CutMarkerWritten };
    assert_eq!(c.heard(waymark_core::ClientId(1)), vec![&refused]);
    for i in 0..3 {
        assert!(!c.committed_on(i, &tx), "committed on node00{i}");
    }
    c.deliver_all();
    assert!(!c.vnode(2).is_paused(), "END resumes the last vnode");
}
