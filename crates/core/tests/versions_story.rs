//! Seed 002's known problems as stories of the `versions` strategy (`cut::versions`): given this
//! cluster, on these deliveries, exactly this outcome. Every record is durable at once; the
//! stories are about the order of messages.

use waymark_core::cut::versions_restore::find_versions_records;
use waymark_core::{Body, Breaks, CutId, CutMsg, CutStrategy, Envelope, Input, Record, Response, Timer, TxId};

mod harness;
use harness::{prepare_to, query_to, Cluster};

/// `n` vnodes, `replicas` a partition, the `versions` strategy; `unregistered` is the config's
/// `versions_unregistered` (seed 002 problem 1's late registrations).
fn versions(n: usize, replicas: usize, breaks: Breaks, unregistered: u32) -> Cluster {
    Cluster::configured(n, replicas, |c| {
        (c.strategy, c.breaks, c.versions_unregistered) = (CutStrategy::Versions, breaks, unregistered);
    })
}

/// A one-phase transaction from node000 down the chain node001 → node002, its `Prepare` to the
/// backup held up; the near times out on it (its client hears "unknown"); then a cut begins.
fn one_phase_timed_out_then_cut(breaks: Breaks) -> (Cluster, TxId) {
    let mut c = versions(3, 2, breaks, 0);
    let key = c.key_with_chain(&[1, 2]);
    let tx = c.client_set(0, &key);
    let (primary, backup) = (c.ids[1].clone(), c.ids[2].clone());
    assert!(c.deliver(prepare_to(&primary)));
    assert!(c.inflight.iter().any(prepare_to(&backup)), "the primary forwarded the prepare");
    c.step(0, Input::Timer(Timer::PrepareTimeout(tx.clone())));
    assert!(c.replies.iter().any(|(_, r)| matches!(r, Response::Unknown { .. })));
    c.begin_cut();
    (c, tx)
}

/// Seed 002 problem 2 ("OPTIMISTIC + PRIMARY_SYNC: we can miss a backup transaction"), in our
/// roles: the near has stopped tracking a transaction whose chain still commits. Phase 1 ends
/// without it; the backup logs the map before the transaction reaches it, the primary awaits it
/// and logs the map after: the cut is declared successful and restores it on one replica only.
#[test]
fn seed_002_problem_2_a_near_that_forgets_a_timed_out_one_phase_transaction_splits_the_cut() {
    // Both defences off: the near's (keep it active) and the backup's (refuse it after the map).
    let breaks = Breaks { versions_forget_one_phase: true, versions_late_one_phase: true, ..Breaks::default() };
    let (mut c, tx) = one_phase_timed_out_then_cut(breaks);
    let backup = c.ids[2].clone();
    c.deliver_all_but(prepare_to(&backup));
    assert_eq!(c.cut_outcome(), None, "the primary awaits the transaction below the map");
    assert!(find_versions_records(&c.logs[2], CutId(1)).is_none());
    assert!(c.logs[2].iter().any(|r| matches!(r, Record::VersionsMap { .. })), "the backup logged the map");
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(true), "the primary restores it");
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false), "the backup does not");
}

/// The second defence, for a near that forgot the transaction all the same (it crashed): the
/// backup, which logged the map before the `Prepare` reached it, refuses it, and the primary rolls
/// it back. The cut succeeds and restores it nowhere.
#[test]
fn a_backup_refuses_a_one_phase_transaction_that_reaches_it_after_the_map() {
    let breaks = Breaks { versions_forget_one_phase: true, ..Breaks::default() };
    let (mut c, tx) = one_phase_timed_out_then_cut(breaks);
    let backup = c.ids[2].clone();
    c.deliver_all_but(prepare_to(&backup));
    assert!(c.logs[2].iter().any(|r| matches!(r, Record::VersionsMap { .. })), "the backup logged the map");
    c.deliver_all_but(|_| false);
    assert!(c.logs[2].iter().any(|r| matches!(r, Record::TxRolledBack { tx: t, .. } if *t == tx)), "refused durably");
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(false), "the primary rolled it back");
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false), "the backup never took it");
}

/// The fix: a near keeps a one-phase transaction it timed out on active (phase 1 waits for it)
/// until its first committer says what became of it. Here the first committer has committed it
/// by the time it is asked: phase 1 ends after, every replica logs the map after it committed.
#[test]
fn seed_002_problem_2_fixed_the_near_waits_for_the_first_committers_word_and_the_cut_stays_whole() {
    let (mut c, tx) = one_phase_timed_out_then_cut(Breaks::default());
    let backup = c.ids[2].clone();
    let held = |e: &Envelope| prepare_to(&backup)(e) || query_to(&backup)(e);
    c.deliver_all_but(held);
    let maps_sent = c.inflight.iter().any(|e| matches!(e.body, Body::Cut(CutMsg::VersionsMap { .. })));
    assert!(!maps_sent && c.cut_outcome().is_none(), "phase 1 waits for the near's unresolved transaction");
    assert!(c.deliver(prepare_to(&backup)));
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(true));
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(true));
}

/// The fix, other order: the question reaches the first committer before the transaction does.
/// It presumes abort durably, so the late prepare is refused and nothing is committed anywhere.
#[test]
fn seed_002_problem_2_fixed_a_question_that_overtakes_the_transaction_aborts_it_everywhere() {
    let (mut c, tx) = one_phase_timed_out_then_cut(Breaks::default());
    let backup = c.ids[2].clone();
    c.deliver_all_but(prepare_to(&backup));
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(true));
    for i in 1..3 {
        assert_eq!(c.restored_with(i, CutId(1), &tx), Some(false));
        let committed = c.logs[i].iter().any(|r| matches!(r, Record::TxCommitted { branch, .. } if branch.tx == tx));
        assert!(!committed, "{} committed an aborted transaction", c.ids[i]);
    }
    assert!(c.logs[2].iter().any(|r| matches!(r, Record::TxRolledBack { tx: t, branch: None } if *t == tx)));
}

/// Seed 002 problem 1: a transaction registered after its near fixed `snp_version` but with a
/// smaller version (one version left to "unregistered" transactions). Mitigation (b): the near
/// keeps collecting such transactions, hands them over in phase 3, every vnode logs them in
/// `VersionsSkip`, and the restore leaves them out — the near coloured it after the cut.
#[test]
fn seed_002_problem_1_a_transaction_registered_after_snp_with_a_smaller_version_is_skipped() {
    let mut c = versions(2, 1, Breaks::default(), 1);
    c.begin_cut();
    c.deliver(|e| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })));
    c.deliver(|e| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })));
    let key = c.key_with_chain(&[1]);
    let late = c.client_set(0, &key);
    let snp = c.logs[0].iter().find_map(|r| match r {
        Record::VersionsLocalState { snp, .. } => Some(*snp),
        _ => None,
    });
    assert!(waymark_core::cut::versions::TxVersion::of(&late) < snp.unwrap(), "a version below snp");
    assert_eq!(c.inflight.last().unwrap().cut, Some(CutId(1)), "coloured after the cut");
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(true));
    let skip = find_versions_records(&c.logs[1], CutId(1)).unwrap().skip;
    assert!(skip.contains(&late), "{skip:?}");
    assert_eq!(c.restored_with(1, CutId(1), &late), Some(false), "committed before the map, yet skipped");
}

/// Without (b) the same transaction is restored by its version, though phase 1 never waited for
/// it and its near treated it as after the cut (`tests/breaks.rs` shows the checkers catch it).
#[test]
fn seed_002_problem_1_without_the_skip_set_the_late_transaction_is_restored() {
    let breaks = Breaks { versions_no_skip: true, ..Breaks::default() };
    let mut c = versions(2, 1, breaks, 1);
    c.begin_cut();
    c.deliver(|e| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })));
    c.deliver(|e| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })));
    let key = c.key_with_chain(&[1]);
    let late = c.client_set(0, &key);
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!(c.restored_with(1, CutId(1), &late), Some(true));
}

/// Seed 002 problem 3: a vnode that leaves in the middle of a snapshot (here: restarts between
/// phase 1 and phase 2) has lost what it collected. It answers the map with a failure, the
/// coordinator ends the cut as failed and tells the operator; nothing of it is restorable there.
#[test]
fn seed_002_problem_3_a_vnode_that_restarts_mid_snapshot_fails_the_cut_cleanly() {
    let mut c = versions(3, 2, Breaks::default(), 0);
    c.begin_cut();
    let report_of_2 =
        |e: &Envelope| matches!(e.body, Body::Cut(CutMsg::VersionsReport { .. })) && e.from.host == "node002";
    c.deliver_all_but(report_of_2);
    c.crash_and_restart(2);
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(false), "the operator hears that the cut failed");
    assert!(c.logs[0].contains(&Record::CutEnd { cut: CutId(1), ok: false }));
    assert!(find_versions_records(&c.logs[2], CutId(1)).is_none());
    // A restart before phase 1 reached it counts too: the resent START is refused.
    let mut c = versions(3, 2, Breaks::default(), 0);
    c.begin_cut();
    let start_to_2 = |e: &Envelope| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })) && e.to.host == "node002";
    assert!(c.deliver(start_to_2));
    c.crash_and_restart(2);
    c.step(
        2,
        Input::Message(Envelope {
            from: c.ids[0].clone(),
            to: c.ids[2].clone(),
            cut: None,
            body: Body::Cut(CutMsg::VersionsStart { cut: CutId(1) }),
        }),
    );
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(false));
}

/// Seed 002 problem 3, the vnode gone for good: the phase times out and the cut fails.
#[test]
fn seed_002_problem_3_a_vnode_that_never_answers_fails_the_cut_at_the_phase_deadline() {
    let mut c = versions(3, 2, Breaks::default(), 0);
    c.begin_cut();
    c.stop(2);
    c.deliver_all_but(|e| e.to.host == "node002");
    assert_eq!(c.cut_outcome(), None);
    let deadline = c.timers.iter().rev().find(|(i, t)| *i == 0 && matches!(t, Timer::CutPhase(..))).unwrap().1.clone();
    c.step(0, Input::Timer(deadline));
    assert_eq!(c.cut_outcome(), Some(false));
}

/// Our guard keeps in memory which keys a cut's after side read or wrote at a primary. A primary
/// that prepared such a transaction logs it once (`VersionsSideSeen`); restarted before phase 1
/// reaches it, it refuses the cut instead of guarding it with what it forgot.
#[test]
fn a_primary_that_forgot_its_guard_in_a_restart_fails_the_cut_it_guarded() {
    let mut c = versions(3, 2, Breaks::default(), 0);
    c.begin_cut();
    assert!(c.deliver(|e| matches!(e.body, Body::Cut(CutMsg::VersionsStart { .. })) && e.to.host == "node000"));
    let key = c.key_with_chain(&[1, 2]);
    c.client_set(0, &key);
    assert_eq!(c.inflight.last().unwrap().cut, Some(CutId(1)), "after the cut: coloured");
    assert!(c.deliver(prepare_to(&c.ids[1].clone())));
    assert!(c.logs[1].contains(&Record::VersionsSideSeen { cut: CutId(1) }));
    c.crash_and_restart(1);
    c.inflight.push(Envelope {
        from: c.ids[0].clone(),
        to: c.ids[1].clone(),
        cut: None,
        body: Body::Cut(CutMsg::VersionsStart { cut: CutId(1) }),
    });
    c.deliver_all_but(|_| false);
    assert_eq!(c.cut_outcome(), Some(false));
}
