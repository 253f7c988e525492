//! The default simulation run: many short seeds with every kind of fault, and cuts; no checker may
//! find anything. Longer runs: `waymark-sim --seeds 10000` (see the README).

use waymark_sim::run::{reproduce, run_many, Summary};
use waymark_sim::{SimConfig, WorkloadKind};

fn run(workload: WorkloadKind, seeds: u64, cuts: bool) -> Summary {
    let mut base = SimConfig::new(0, workload);
    base.cuts = cuts;
    base.duration_us = 500_000;
    let summary = run_many(&base, 0, seeds, |r, cfg| {
        for v in &r.violations {
            eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    assert_eq!(summary.failed, 0, "{} of {seeds} seeds failed: {:?}", summary.failed, summary.first_failure);
    let f = &summary.faults;
    assert!(f.crashes > 0 && f.partitions > 0 && f.breaks > 0 && f.duplicates > 0 && f.long_delays > 0, "{f:?}");
    assert!(summary.committed > seeds, "too few commits to mean anything: {}", summary.committed);
    summary
}

#[test]
fn bank_seeds_with_faults_and_cuts_find_no_violation() {
    let s = run(WorkloadKind::Bank, 600, true);
    assert!(s.cuts_ok > 0 && s.cuts_failed > 0, "cuts ok {} failed {}", s.cuts_ok, s.cuts_failed);
    assert_eq!(s.cuts_verified, s.cuts_ok, "every successful cut is restored and verified");
}

#[test]
fn append_seeds_with_faults_find_no_violation() {
    run(WorkloadKind::Append, 300, false);
}

#[test]
fn append_seeds_with_faults_and_cuts_find_no_violation() {
    let s = run(WorkloadKind::Append, 300, true);
    assert!(s.cuts_ok > 0);
}

#[test]
fn bank_seeds_with_the_cut_process_on_the_tree_find_no_violation() {
    let mut base = SimConfig::new(0, WorkloadKind::Bank);
    base.cuts = true;
    base.tree = true;
    base.duration_us = 500_000;
    let s = run_many(&base, 0, 150, |r, cfg| {
        for v in &r.violations {
            eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    assert_eq!(s.failed, 0, "{:?}", s.first_failure);
    assert!(s.cuts_ok > 0 && s.cuts_verified == s.cuts_ok);
    let t = &s.tree;
    assert!(t.manager_crashes > 0 && t.md5_corruptions > 0);
    assert!(t.failovers > 0 && t.switch_backs > 0 && t.retried > 0, "{t:?}");
    assert!(t.secondaries_started > 0 && t.secondaries_stopped == t.secondaries_started, "{t:?}");
}

/// Store vnodes right under the root vote for it: their promises go through the WAL
/// (`Record::AlterTerm`) and must survive their crashes; secondary roots win terms.
#[test]
fn bank_seeds_with_store_vnodes_voting_for_the_root_find_no_violation() {
    let mut base = SimConfig::new(0, WorkloadKind::Bank);
    base.cuts = true;
    base.tree = true;
    base.vnodes = 4;
    base.fanout = 4;
    base.duration_us = 500_000;
    let s = run_many(&base, 0, 100, |r, cfg| {
        for v in &r.violations {
            eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    assert_eq!(s.failed, 0, "{:?}", s.first_failure);
    assert!(s.cuts_ok > 0 && s.cuts_verified == s.cuts_ok);
    assert!(s.tree.secondary_root_terms > 0, "{:?}", s.tree);
}

/// Regression (found by the simulator): a manager and the secondary parent standing in for it were
/// both counted, so FINISH looked applied everywhere while a store vnode had not finished its
/// local cut; the cut was declared successful without that vnode's `CutFinish`.
#[test]
fn a_cut_needs_every_store_vnode_not_just_enough_confirmations() {
    let mut cfg = SimConfig::new(131, WorkloadKind::Bank);
    cfg.net_faults = false;
    cfg.cuts = true;
    cfg.tree = true;
    let r = waymark_sim::run_seed(&cfg);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

/// The consistent cut holds no transaction back; the blocking strategy holds back every one that
/// arrives while it is paused, for up to about the cut's duration (same seeds, no faults).
#[test]
fn consistent_cuts_stall_no_commit_and_blocking_cuts_do() {
    let mut base = SimConfig::new(0, WorkloadKind::Bank);
    base.cuts = true;
    base.faults = false;
    base.duration_us = 500_000;
    let consistent = run_many(&base, 0, 30, |_, _| {});
    let blocking = run_many(&SimConfig { strategy: waymark_core::CutStrategy::Blocking, ..base }, 0, 30, |_, _| {});
    assert_eq!(consistent.failed + blocking.failed, 0);
    assert!(consistent.cuts_ok > 0 && blocking.cuts_ok > 0);
    assert!(consistent.metrics.commit_stalls_us.is_empty(), "{:?}", consistent.metrics.commit_stalls_us);
    let longest = blocking.metrics.commit_stalls_us.iter().max().copied().unwrap_or(0);
    assert!(longest > 1_000, "blocking cuts should hold transactions back, longest {longest} us");
}

/// The `versions` strategy (seed 002) with the mitigation of its problem 1 (the skip set), the
/// fix of its problem 2 (a near keeps a timed-out one-phase transaction until its first committer
/// answers) and our guard: no checker finds anything in the same runs as the consistent cut's.
#[test]
fn versions_seeds_with_faults_and_cuts_find_no_violation() {
    for (workload, seeds) in [(WorkloadKind::Bank, 200), (WorkloadKind::Append, 100)] {
        let mut base = SimConfig::new(0, workload);
        base.cuts = true;
        base.duration_us = 500_000;
        base.strategy = waymark_core::CutStrategy::Versions;
        let s = run_many(&base, 0, seeds, |r, cfg| {
            for v in &r.violations {
                eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
            }
        });
        assert_eq!(s.failed, 0, "{} of {seeds} seeds failed: {:?}", s.failed, s.first_failure);
        assert!(s.cuts_ok > 0 && s.cuts_failed > 0, "cuts ok {} failed {}", s.cuts_ok, s.cuts_failed);
        assert_eq!(s.cuts_verified, s.cuts_ok, "every successful cut is restored and verified");
    }
}

/// `versions` on a cluster that runs the tree (as a node does): the cut coordinator gathers the
/// versions (seed 002's distributed process), while the managers order alterations, fail over and
/// crash around it. No checker finds anything, and some cuts succeed and are verified.
#[test]
fn versions_beside_the_tree_runs_on_the_coordinator_and_finds_no_violation() {
    let mut base = SimConfig::new(0, WorkloadKind::Bank);
    (base.cuts, base.tree) = (true, true);
    base.strategy = waymark_core::CutStrategy::Versions;
    let s = run_many(&base, 0, 40, |r, cfg| {
        for v in &r.violations {
            eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    assert_eq!(s.failed, 0, "{} of 40 seeds failed: {:?}", s.failed, s.first_failure);
    assert!(s.cuts_ok > 0, "no versions cut succeeded beside the tree");
    assert_eq!(s.cuts_verified, s.cuts_ok, "every successful cut is restored and verified");
    assert!(s.tree.alterations_ok > 0, "the tree ran alterations meanwhile");
}

/// Seed 002 problem 2, found by the simulator (seed 518 of 2 000; with 4 vnodes and 3 replicas,
/// seeds 11, 106, 120, 146 of 200): a near timed out on a
/// one-phase transaction whose `Prepare` to the backup was held up, forgot it (as a primary-sync
/// near forgets what its backups have not committed) and ended phase 1; the backup logged its
/// map before the transaction reached it, the primary awaited it and logged after — restored on
/// one replica, not on the other. The fix: the near keeps such a transaction active until its
/// first committer answers (`cut::versions`).
#[test]
fn seed_002_problem_2_a_forgotten_one_phase_transaction_splits_a_cut_and_the_fix_keeps_it_whole() {
    // Re-found after the 2PC primary began preparing its backups while it syncs (the earlier
    // seeds 518, 11, 106 no longer reach the case), then after the near's `Prepare` began to
    // leave unheld (311, 51, 246 no longer did), then after read-only branches began to be logged
    // (793, 132, 146 no longer did), then after the workloads began to run through the
    // transaction client (28 of 3 vnodes, 128 and 132 of 4/3 no longer did; no seed of 400 with
    // 3 vnodes does): 33 and 170 of 4/3.
    for (seed, vnodes, replicas) in [(33, 4, 3), (170, 4, 3)] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.vnodes, cfg.replicas) = (vnodes, replicas);
        cfg.cuts = true;
        cfg.strategy = waymark_core::CutStrategy::Versions;
        assert_seed_passes(cfg.clone());
        // Both defences off: the second (a hop refusing it after the map) covers this case too.
        (cfg.breaks.versions_forget_one_phase, cfg.breaks.versions_late_one_phase) = (true, true);
        let r = waymark_sim::run_seed(&cfg);
        let split = r.violations.iter().any(|v| v.checker == "cut-restore" && v.evidence.contains("(atomicity)"));
        assert!(split, "{}: {:?}", reproduce(&cfg), r.violations);
    }
}

/// Regression (2 000 seeds of `--matrix --strategy versions --workload append`, found when the
/// near's `Prepare` began to leave before the near's own records are durable — the hole was
/// older): a near crashed with two one-phase transactions in flight and forgot them, so nothing
/// kept phase 1 of the next cut from ending. Their primary held them prepared and awaited them
/// before logging its map; their `Prepare` reached the first committer only after it had logged
/// its own, and it committed them there — restored on the primary, not on the backup. A hop of a
/// one-phase chain now refuses a transaction below the running cut's map that reaches it after
/// the map (`Vnode::versions_too_late`); break `versions-late-one-phase` takes the refusal out.
#[test]
fn versions_refuses_a_one_phase_transaction_that_reaches_a_hop_after_the_map() {
    // Seed 504 until read-only branches began to be logged; 5289 of 9 000 matrix seeds since (12
    // vnodes), until the workloads began to run through the transaction client; 2661 of the
    // matrix since (3 vnodes, 2 replicas).
    let mut cfg = SimConfig::new(2661, WorkloadKind::Append);
    waymark_sim::matrix::of_seed(&waymark_sim::matrix::store_shapes(), 2661).apply(&mut cfg);
    cfg.cuts = true;
    cfg.strategy = waymark_core::CutStrategy::Versions;
    assert_seed_passes(cfg.clone());
    cfg.breaks.versions_late_one_phase = true;
    let r = waymark_sim::run_seed(&cfg);
    assert!(r.faults.crashes > 0, "seed 2661 crashes the near");
    let split = r.violations.iter().any(|v| v.checker == "cut-restore" && v.evidence.contains("(atomicity)"));
    assert!(split, "{}: {:?}", reproduce(&cfg), r.violations);
}

/// Regression (append, 500 seeds): the guard first kept an older side off keys a newer side
/// had *written*, not off keys it had *read*. A transaction after the cut read a list, one before
/// it appended to that list later; the restore kept the append and dropped the read — an
/// anti-dependency cycle with the restore as reader (seeds 19, 86, 111, 153).
#[test]
fn versions_keeps_an_older_side_from_writing_what_a_newer_side_read() {
    for seed in [19, 86] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Append);
        cfg.cuts = true;
        cfg.strategy = waymark_core::CutStrategy::Versions;
        assert_seed_passes(cfg);
    }
}

/// Runs one seed twice: no violation, and the same trace both times (a kept seed keeps its scenario).
fn assert_seed_passes(cfg: SimConfig) {
    let r = waymark_sim::run_seed(&cfg);
    assert!(r.violations.is_empty(), "{}: {:?}", reproduce(&cfg), r.violations);
    assert_eq!(waymark_sim::run_seed(&cfg).trace_hash, r.trace_hash, "{} is not deterministic", reproduce(&cfg));
}

/// Regression (found with the checkers of issue 11): a vnode rebuilt from a checkpoint counted log
/// positions from the records after it, but the simulator reported durability in positions of the
/// whole log — so every held promise left at once, before its records were durable. Acknowledged
/// commits were lost (seed 183, 2 vnodes, 1 replica) and replicas diverged (seed 274; seed 33 with
/// 4 vnodes and 3 replicas).
#[test]
fn a_vnode_rebuilt_from_a_checkpoint_promises_nothing_before_it_is_durable() {
    for (seed, vnodes, replicas) in [(274, 3, 2), (183, 2, 1), (33, 4, 3)] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Append);
        (cfg.cuts, cfg.vnodes, cfg.replicas, cfg.net_faults) = (true, vnodes, replicas, false);
        assert_seed_passes(cfg);
    }
}

/// The same bug found independently on the bank workload: a crash after the restart lost a
/// decided 2PC commit that had been acknowledged (`--seed 1997 --cuts`). Positions now count from
/// the vnode's first record ever (`LogSummary::records`), and the outbox refuses durability beyond
/// what was appended.
#[test]
fn a_vnode_restarted_from_a_checkpoint_loses_no_acknowledged_commit() {
    let mut cfg = SimConfig::new(1997, WorkloadKind::Bank);
    cfg.net_faults = false;
    cfg.cuts = true;
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.crashes > 0);
}

/// Regression (a false alarm): the cut checkers took the writer of a version from any prepare, so
/// with 3 replicas a transaction that aborted after its primary resolved a version was blamed for
/// the version a later committed transaction wrote (seed 141, 6 vnodes, 3 replicas).
#[test]
fn a_version_belongs_to_the_transaction_that_committed_it() {
    let mut cfg = SimConfig::new(141, WorkloadKind::Bank);
    cfg.net_faults = false;
    (cfg.cuts, cfg.vnodes, cfg.replicas) = (true, 6, 3);
    assert_seed_passes(cfg);
}

/// Regression (found when the real-time checker learnt failed WATCHes and 1PC learnt to pipeline):
/// a WATCH checked against a pipelined predecessor's uncommitted write failed with `WatchFailed`,
/// whose reply is held only for committed writes, so the client learnt of a write a cut left out
/// before every vnode had started that cut. A version moved only by an undecided predecessor is
/// now a lock conflict, which reveals nothing (`--seed 93 --cuts --tree --fanout 2`).
#[test]
fn a_watch_fails_only_on_a_committed_write() {
    let mut cfg = SimConfig::new(93, WorkloadKind::Bank);
    cfg.net_faults = false;
    (cfg.cuts, cfg.tree, cfg.fanout, cfg.duration_us) = (true, true, 2, 500_000);
    assert_seed_passes(cfg);
}

/// Regression (found while measuring the liveness floors): the cut coordinator sent each phase
/// once, so a `Start` lost in a partition that healed 100 ms later kept the cut — and every cut
/// after it — waiting for the whole 1 s phase deadline: one cut, failed, in the whole of
/// `--seed 0 --cuts`. The coordinator now sends the phase again to the vnodes that have not
/// confirmed it. Seed 8 since the near's `Prepare` leaves unheld (seed 0's first cut now gets
/// past the partition the same way, then fails on a crash): cut 2 begins at 690 ms inside a
/// partition that heals at 776 ms, its second phase is sent again at 816 ms, and it succeeds.
#[test]
fn a_cut_phase_lost_in_a_partition_is_sent_again_once_it_heals() {
    let mut cfg = SimConfig::new(8, WorkloadKind::Bank);
    (cfg.cuts, cfg.net_faults) = (true, false);
    assert_seed_passes(cfg.clone());
    let mut world = waymark_sim::world::World::new(cfg);
    world.run();
    let f = waymark_sim::checkers::liveness::figures(&world);
    assert!(f.during.succeeded >= 1, "cuts begun and succeeded during the workload: {:?}", f.during);
    // A cut without a fault in its way takes about 30 ms here; one that waited out a partition
    // and still succeeded was sent its phase again.
    let waited = world.history.cuts.iter().any(|c| c.ok && c.ended_us - c.begun_us > 100_000);
    assert!(waited, "no successful cut waited out the partition: {:?}", world.history.cuts);
}

/// Regression (found by the liveness floor): with store vnodes voting for the root there is no
/// other manager, so a phase proposed while the root was down went nowhere, and the operator
/// waited out its 5 s timeout — longer than the settle — taking no cut for the rest of the seed
/// (`--seed 0 --tree --vnodes 4 --fanout 4 --duration-ms 500`: 0 cuts begun after healing). The
/// operator now proposes the phase again once a manager is up.
#[test]
fn a_phase_proposed_while_no_manager_was_up_is_proposed_again() {
    let mut cfg = SimConfig::new(0, WorkloadKind::Bank);
    (cfg.cuts, cfg.tree, cfg.vnodes, cfg.fanout, cfg.duration_us) = (true, true, 4, 4, 500_000);
    cfg.net_faults = false;
    assert_seed_passes(cfg);
}

/// Regression (found by the read-recency checker): read ids restarted from 0 with each
/// incarnation, so a reply to a GET of `list5` sent before a crash answered the restarted near's
/// first GET, of `list4` — the client got another key's value (`--seed 19 --workload append
/// --cuts --duration-ms 500`). Read ids now carry the incarnation.
#[test]
fn a_reply_to_a_read_from_before_a_crash_answers_no_read_after_it() {
    let mut cfg = SimConfig::new(19, WorkloadKind::Append);
    cfg.net_faults = false;
    (cfg.cuts, cfg.duration_us) = (true, 500_000);
    assert_seed_passes(cfg);
}

/// Regression (found by the duplicated deliveries of issue 11): a `Prepare` delivered again after
/// its branch had committed was evaluated again — a second `INCRBY` on the primary, prepared, then
/// committed on the first committer's word — so the bank's total grew (`--seed 81 --cuts
/// --duration-ms 500`: 819, not 800). A participant now remembers the branches it finished lately
/// and drops a late copy of their `Prepare`.
#[test]
fn a_prepare_delivered_twice_is_applied_once() {
    let mut cfg = SimConfig::new(81, WorkloadKind::Bank);
    (cfg.cuts, cfg.duration_us) = (true, 500_000);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.duplicates > 0);
}

/// Regression (found by the duplicated deliveries of issue 11): a primary that refused a 1PC
/// `Prepare` (a lock conflict) kept nothing of it, so a copy delivered 35 ms later was evaluated
/// again, succeeded and went on to the first committer, which committed it — a transaction the
/// client had been told was aborted, read by a later one (G1a, `--seed 15 --workload append
/// --duration-ms 500`). A refused branch is now remembered like a finished one.
#[test]
fn a_refused_prepare_delivered_again_is_not_evaluated_again() {
    let mut cfg = SimConfig::new(15, WorkloadKind::Append);
    cfg.duration_us = 500_000;
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.duplicates > 0);
}

/// Regression (found by the 10 000-seed `--tree` sweep): a retried or duplicated proposal of an
/// earlier cut phase, ordered again after the END, set `cut/2` back to STARTED and erased the
/// cut's `END:ok` from the catalog (seeds 2495, 5367). A cut's phase in the metadata now only
/// moves forward (`alter/metadata.rs`). The root still orders a proposal more than once.
#[test]
fn a_cut_phase_in_the_metadata_never_moves_back() {
    for seed in [2495, 5367] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.tree, cfg.fanout) = (true, true, 2);
        assert_seed_passes(cfg);
    }
}

/// Regression (the 10 000-seed `--tree` sweep, with duplicated and long-delayed deliveries):
/// `tree-root-term` saw a secondary root win a term on a copy lacking an alteration already
/// answered ok (seeds 2323, 4452). It was a false alarm: the stale root of term 2, cut off from
/// the voters that had promised term 3, ordered a retry of its own `root` proposal in term 2
/// again, and the checker took every ordered `root` record for a term won. A term is now won at
/// its first `root` record. The root still ordered a retried proposal twice: every copy now
/// skips a proposal it applied before (`Metadata::apply`).
#[test]
fn an_alteration_answered_ok_survives_a_secondary_roots_term() {
    for seed in [2323, 4452] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.tree, cfg.fanout) = (true, true, 2);
        assert_seed_passes(cfg);
    }
}

/// Regression (found when the `--tree` world began to drive the core's `ManagerVnode` and its
/// cut operator, issue 11): the root crashed mid-cut; the next operator, on a manager whose copy
/// had not yet seen `cut/1`, started cut 1 again. Every phase it proposed was skipped as moving
/// the cut back, yet answered ok, so it reported cut 1 successful while the catalog said
/// `END:failed` (seed 536, `cut-restore`). A refused phase is now answered failed, and a cut's
/// phase is entered once.
#[test]
fn an_operator_on_a_stale_copy_cannot_report_a_cut_the_catalog_failed() {
    let mut cfg = SimConfig::new(536, WorkloadKind::Bank);
    (cfg.cuts, cfg.tree) = (true, true);
    assert_seed_passes(cfg);
}

/// Regression (found 2026-12-01 by a 2 000-seed `--cuts --strategy blocking` sweep, `cut-restore`
/// atomicity): the `blocking` strategy lost its pause in a crash. In seed 160, node001 answered
/// DRAINED for cut 3, crashed and restarted while node000 and node002 were still draining, and — no
/// longer paused — started a transaction that prepared on node000 before its marker and on node002
/// after it; the coordinator declared the cut ok. A CHECK round after the last DRAINED now fails a
/// cut in which some vnode is no longer paused (`cut/blocking.rs`).
#[test]
fn a_blocking_cut_fails_when_a_vnode_restarts_while_others_drain() {
    for seed in [160, 721, 915, 1011, 1622, 1666, 1781] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.strategy) = (true, waymark_core::CutStrategy::Blocking);
        assert_seed_passes(cfg);
    }
}

/// Regression (the same sweep, after the CHECK fix; open until the tree's blocking cut): seeds
/// 542, 753, 994 and 1499 of `--cuts --strategy blocking` restored a transaction on one replica and
/// not another. The `--tree` sweep of the same strategy found the cause (seeds 277 and 313, below):
/// a near that timed out on a one-phase transaction forgot it and looked quiet while its chain was
/// still in flight. The near now keeps it unresolved until its first committer answers, and pauses
/// only without one; these four pass since (each failed before the change; not each traced).
#[test]
fn a_blocking_cut_keeps_every_transaction_whole() {
    for seed in [542, 753, 994, 1499] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.strategy) = (true, waymark_core::CutStrategy::Blocking);
        assert_seed_passes(cfg);
    }
}

/// Regression: seed 15 of `--cuts --strategy blocking`, once a vnode that wrote its marker refused
/// prepares (`cut/blocking.rs`; the other fix of seeds 542…, for a near that restarted): in 2PC a
/// backup's refusal was taken as a yes by its primary, and the transaction was acknowledged and
/// lost on that backup. Seeds 190, 311 and 589 split a cut under `blocking-prepare-after-marker`
/// before the near kept its timed-out transactions (above); with it no seed of 3 000 reaches the
/// refusal, which `crates/core/tests/blocking_story.rs` shows with a near that restarts.
#[test]
fn a_blocking_cut_refuses_prepares_after_its_marker_so_no_transaction_straddles_it() {
    for seed in [15, 190, 311, 589] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.strategy) = (true, waymark_core::CutStrategy::Blocking);
        assert_seed_passes(cfg);
    }
}

/// Regression (found by the first 500-seed sweep of `--cuts --tree --strategy blocking`, the
/// blocking strategy on the tree's cut process): in seed 313 node000's near timed out on one-phase
/// tx 0.4 at 260 ms and forgot it; the primary node002 had it prepared, its `Prepare` to the last
/// backup node000 long-delayed. Cut 2 paused every leaf (node000's near looked quiet), node000 had
/// nothing prepared and wrote its marker; the `Prepare` arrived at 1 000 ms and committed on
/// node000 after its marker, and on node002 before its own. The near now keeps such a transaction
/// unresolved until its first committer answers (`cut/blocking.rs`, `blocking_quiet`).
#[test]
fn a_blocking_tree_cut_waits_for_a_one_phase_transaction_its_near_timed_out_on() {
    for seed in [277, 313] {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        (cfg.cuts, cfg.tree, cfg.strategy) = (true, true, waymark_core::CutStrategy::Blocking);
        assert_seed_passes(cfg);
    }
}

/// Regression (found by the 10 000-seed `--cuts --tree` sweep of 2026-12-01, after
/// `tree-answered` began checking every answered alteration, not only the operator's): seed 9679,
/// `host/node002=dead` was ordered at seq 47 twice — by the stale primary root in term 1, and, for
/// the initiator's retry, by the secondary root of term 2 — and the term-2 root answered it ok.
/// The checker took the term-1 ordering, whose branch a child had left for the term-2 root, and
/// cried wolf. It now passes an answer if the branch of either ordering is whole.
#[test]
fn an_answer_is_judged_against_the_ordering_that_can_have_given_it() {
    let mut cfg = SimConfig::new(9679, WorkloadKind::Bank);
    (cfg.cuts, cfg.tree) = (true, true);
    assert_seed_passes(cfg);
}

/// Regression (the topology matrix's 10 000-seed sweep, 2026-12-02): a first committer that
/// crashed and restarted after its `CutFinish{C}` but before END{C} came back with no running cut
/// (END is not logged), so it stamped the next commit it made `None` — *before* C — while in its
/// own log that commit came after C. The primary, which had that transaction in its waiting set,
/// included it; the backups did not (atomicity and serial replay both caught it). A restarted vnode
/// now goes on colouring and stamping with the newest cut its log started
/// (`Vnode::resume_cut_after_restart`). All three with 3 replicas, where the first committer is a
/// second backup.
#[test]
fn a_first_committer_restarted_during_a_cut_stamps_its_commits_after_it() {
    for (seed, workload, vnodes) in
        [(7544, WorkloadKind::Bank, 12), (2638, WorkloadKind::Append, 10), (3839, WorkloadKind::Append, 12)]
    {
        let mut cfg = SimConfig::new(seed, workload);
        (cfg.cuts, cfg.vnodes, cfg.replicas) = (true, vnodes, 3);
        assert_seed_passes(cfg.clone());
        assert!(waymark_sim::run_seed(&cfg).faults.crashes > 0, "seed {seed} crashes a vnode");
    }
}

/// Regression (`--seed 8958 --workload append --vnodes 5 --replicas 2 --cuts --tree --fanout 5`):
/// a root queued its `root` record behind the proposals queued during its campaign, so it was not
/// the first record of its term; the term-10 secondary root, cut off once the term-11 one won,
/// ordered its `root` record only at seq 36 — after term 11 had answered seq 36 ok — and
/// `tree-root-term` took that for term 10 being won on a copy missing it. A root now orders its
/// `root` record first in its term (and gives the term up if its own copy of it reads back
/// damaged). Since the operator's `StartedEverywhere` notice and `StartVnodes` by id (2026-12-02)
/// this seed's trace no longer has two secondary roots win terms, and 6 000 seeds of this shape
/// with break `root-record-queued` found no violation: the rule itself is pinned by
/// `tests/alter_story.rs` (`a_root_orders_its_root_record_first_…`), which fails under the break;
/// the seed stays as a tree run with failovers that must pass.
#[test]
fn a_roots_first_record_in_its_term_is_its_root_record() {
    let mut cfg = SimConfig::new(8958, WorkloadKind::Append);
    (cfg.cuts, cfg.tree, cfg.vnodes, cfg.replicas, cfg.fanout) = (true, true, 5, 2, 5);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).tree.secondary_root_terms >= 1, "a secondary root wins a term");
}

/// `--tree --failover` on the bank workload, as `waymark-sim --seed <seed> --tree --failover
/// --no-aimed-faults` runs it (the command line's default fan-out, 16, stands for 2): the seeds
/// kept before the aimed faults existed keep their scenario.
fn failover_seed(seed: u64) -> SimConfig {
    let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
    (cfg.cuts, cfg.tree, cfg.fanout, cfg.failover, cfg.aimed_faults) = (true, true, 2, true, false);
    cfg
}

/// `--tree --fanout 2 --failover` with the aimed faults (a host cut off while it runs, the near's
/// host struck right after its decision), as `waymark-sim --seed <seed> --workload <w> --tree
/// --fanout 2 --failover` runs it.
fn aimed_failover_seed(seed: u64, workload: WorkloadKind) -> SimConfig {
    let mut cfg = SimConfig::new(seed, workload);
    (cfg.cuts, cfg.tree, cfg.fanout, cfg.failover) = (true, true, 2, true);
    cfg
}

/// Regression (`--seed 253 --tree --failover`, atomicity): a 1PC branch in doubt decided for
/// itself once a promotion dropped its first committer from the chain of the first key it wrote,
/// but the transaction also wrote a key of another partition on the same chain whose promotion had
/// not been ordered: the first committer still held that partition and served the commit it had
/// made. `in_doubt_authority` now looks at the chain of every partition the branch wrote (pinned by
/// the unit tests in `txn/promotion.rs`). The seed also had a promotion, queued while the host was
/// dead, ordered after it came back; every copy of the metadata now refuses a chain that drops a
/// replica of a live host. Either fix alone makes this seed pass; without both it fails.
#[test]
fn a_branch_decides_alone_only_once_no_chain_it_wrote_holds_its_first_committer() {
    let cfg = failover_seed(253);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.host_crashes > 0, "seed 253 crashes a host");
}

/// Regression (`--seed 214 --tree --failover`, liveness): a 2PC participant fenced by another's
/// recovery without the near (`txn::orphan`) took no `Finish` any more and waited for its own
/// in-doubt timer, backed off to seconds, so every cut after healing failed on its locked keys. A
/// branch fenced by a `Recover` now starts its own recovery at once.
#[test]
fn a_branch_fenced_by_a_recovery_recovers_at_once() {
    assert_seed_passes(failover_seed(214));
}

/// Regression (`--seed 232 --tree --failover --workload append --fanout 2`, liveness): a vnode held
/// two branches of one transaction; one aborted on its primary's `Finish`, which tombstones the
/// transaction, so the other counted as fenced and ignored the near's abort, holding its locks
/// until its own backed-off recovery. A fenced branch now takes an abort from anyone (only a
/// commit must come from its recovery).
#[test]
fn a_fenced_branch_takes_an_abort_from_anyone() {
    let mut cfg = failover_seed(232);
    (cfg.workload, cfg.fanout) = (WorkloadKind::Append, 2);
    assert_seed_passes(cfg);
}

/// Regression (`--seed 200 --tree --failover`, atomicity): a vnode recovering its backup branch
/// of a transaction whose near's host was recorded dead asked every other live vnode, none of which
/// had committed, and aborted — but its own primary branch of the same transaction had committed.
/// A recovery now looks at this vnode's own commits first.
#[test]
fn a_recovery_counts_the_commit_of_its_own_other_branch() {
    assert_seed_passes(failover_seed(200));
}

/// Regression (`--seed 356 --tree --failover`, bank total): a near committed its own branch as soon
/// as it decided; the participant on another host lost its `Finish` in a crash, a later
/// transaction read the near's commit and committed on both hosts, and then a recovery without the
/// near (its host recorded dead behind a partition) aborted the first transaction: money vanished.
/// The near's host now commits only once another host holds the commit (`txn::orphan`).
#[test]
fn a_near_commits_on_its_own_host_only_once_another_host_holds_the_commit() {
    assert_seed_passes(failover_seed(356));
}

/// Regression (`--seed 219 --tree --failover`, a stale read; found when the promotions of a dead
/// host were first put in one alteration): a parent cut off from a child reported it down, so its
/// host was recorded dead, while the child, through a secondary parent, was in the tree and
/// serving; the root promoted at once and a replica served beside its old primary. The root now
/// promotes only once the host has been recorded dead for as long as one of its vnodes may still
/// serve (half a heartbeat timeout per level of the tree, and an interval).
#[test]
fn a_root_promotes_only_once_the_dead_hosts_leases_ran_out() {
    assert_seed_passes(failover_seed(219));
}

/// Regression (`--seed 154 --tree --failover --workload append`, liveness): a near's backup branch
/// of another host's primary heard "pending" from its own near while that near waited for a second
/// host, lost its primary's `Finish`, and held its keys past healing on a backed-off timer. When
/// the second host answers, the near's branches ask again at once.
#[test]
fn a_nears_branches_ask_again_once_another_host_holds_the_commit() {
    let mut cfg = failover_seed(154);
    cfg.workload = WorkloadKind::Append;
    assert_seed_passes(cfg);
}

/// Regression (`--seed 268 --vnodes 5 --fanout 5 --failover`, bank total): two of five hosts cut off
/// at once, both recorded dead; a recovery without the near aborted a transaction its client had
/// been told was committed — the commit was on the near's host and one other, both dead. A branch
/// now recovers without its near only while one host is recorded dead (`txn::orphan`).
#[test]
fn a_recovery_without_the_near_waits_while_two_hosts_are_recorded_dead() {
    let mut cfg = failover_seed(268);
    (cfg.vnodes, cfg.fanout) = (5, 5);
    assert_seed_passes(cfg);
}

/// `--seed 16 --tree --failover`, cut-restore: a cut over the live hosts counted its leaves, and a
/// host recorded alive between START's proposal and its order stood in for one that died meanwhile,
/// so the cut was declared without the latter's `CutFinish`. Each phase now names the view its
/// vnodes were chosen from, and a vnode that sees another refuses it (break `cut-counts-any-vnode`).
#[test]
fn a_cut_over_the_live_hosts_is_declared_only_with_every_one_of_them() {
    assert_seed_passes(failover_seed(16));
}

/// Issue 30, item 7: cuts go on while a host is down — `--seed 391 --tree --failover
/// --no-aimed-faults` takes four that its dead host's vnodes had no part in, and each restores
/// and passes every cut checker. (Seed 41 did until the promotion's wait and the fail-fast on a
/// dead host changed its schedule, 2026-12-06.)
#[test]
fn cuts_go_on_with_a_host_down_and_restore() {
    let cfg = failover_seed(391);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).cuts_verified_without_a_host >= 3, "cuts went on without a dead host");
}

/// `--seed 272 --vnodes 12 --fanout 2 --failover`, liveness: after healing, the failure detector's
/// late observations were still being ordered (hosts recorded dead and alive again, promotions), so
/// the first asks were refused (TRYAGAIN) and the first cut begun failed across a change of hosts;
/// the operator now asks again (`AFTER_HEAL_ASKS_MAX`), and a later cut succeeds.
#[test]
fn cuts_after_healing_succeed_once_the_host_records_settle() {
    let mut cfg = failover_seed(272);
    cfg.vnodes = 12;
    assert_seed_passes(cfg);
}

/// Regression (`--seed 1067 --vnodes 12 --fanout 4 --failover`, liveness): a backup branch whose
/// near's host and another were recorded dead waited to recover without the near, and backed off
/// as if waiting for an answer; by the time the hosts were recorded alive again its next look was
/// 1.5 s away, it held its keys past healing and every cut after it failed. A branch waiting for
/// the metadata now looks again at the first in-doubt timeout.
#[test]
fn a_branch_waiting_for_the_metadata_looks_again_without_backing_off() {
    let mut cfg = failover_seed(1067);
    (cfg.vnodes, cfg.fanout) = (12, 4);
    assert_seed_passes(cfg);
}

/// Regression (`--seed 158 --workload append --tree --fanout 2 --failover`, cut-restore and
/// cut-replay; found by the aimed fault that cuts a running host off): a 1PC primary held a branch
/// in doubt whose first committer, on the host cut off, had committed it and then a transaction
/// pipelined after it, whose commit reached the primary and its client. Once the promotion dropped
/// the first committer the primary presumed the first branch aborted, under the second. A branch a
/// later transaction was committed after no longer presumes: it asks the first committer.
#[test]
fn a_branch_with_a_successor_committed_does_not_presume_abort() {
    let cfg = aimed_failover_seed(158, WorkloadKind::Append);
    assert_seed_passes(cfg.clone());
    assert_eq!(waymark_sim::run_seed(&cfg).faults.isolated_hosts, 1, "seed 158 cuts a running host off");
}

/// Regression (`--seed 1238 --workload append --vnodes 5 --replicas 2 --cuts --tree --fanout 5
/// --failover`, cut-restore and cut-replay; found by the 2 000-seed matrix sweep): three 1PC
/// transactions pipelined on one key at its primary, T0 ← T1 ← T2, the first committer committed
/// all three and died; T2's acknowledgement reached the primary, T0's and T1's were delayed for a
/// second. T1 knew its successor committed and asked the first committer; T0 did not (it was not
/// T2's direct predecessor), presumed itself aborted, and when the first committer came back it
/// answered T1 committed — over T0's value. A successor's commit now marks every transaction it
/// was evaluated after, transitively.
#[test]
fn a_successors_commit_forbids_presuming_any_transaction_it_was_pipelined_after() {
    let mut cfg = SimConfig::new(1238, WorkloadKind::Append);
    (cfg.cuts, cfg.tree, cfg.failover) = (true, true, true);
    (cfg.vnodes, cfg.replicas, cfg.fanout) = (5, 2, 5);
    assert_seed_passes(cfg.clone());
    assert_eq!(waymark_sim::run_seed(&cfg).faults.host_crashes, 2, "seed 1238 kills two hosts");
}

/// Regression (`--seed 20 --workload append --fanout 2 --failover --clients 12 --duration-ms 2000`,
/// liveness): a host cut off for a second kept asking for its branches in doubt, in vain, backing
/// off; once back, its next asks were 1.6 s away, and every cut after healing failed on the keys
/// those branches held. A vnode back in touch with a fresh parent now asks again at once.
#[test]
fn a_vnode_back_from_a_partition_asks_again_at_once_for_its_branches_in_doubt() {
    let mut cfg = aimed_failover_seed(20, WorkloadKind::Append);
    (cfg.clients, cfg.duration_us) = (12, 2_000_000);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.isolated_hosts >= 1, "seed 20 cuts a running host off");
}

/// Regression (`--seed 53 --tree --failover`, atomicity and liveness): a host cut off right after
/// its near decided a 2PC commit; the other hosts, recording it dead, recovered the transaction
/// without the near and rolled it back. Back, the near told its commit again, the fenced
/// participants ignored it, and the near's own host's branches heard "pending" for ever and held
/// their keys. A participant rolled back by a recovery now says so (`RolledBack`), and the near
/// takes its unacknowledged decision back and rolls its own host's branches back.
#[test]
fn a_near_whose_commit_a_recovery_rolled_back_rolls_its_own_branches_back() {
    let cfg = aimed_failover_seed(53, WorkloadKind::Bank);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).faults.isolated_hosts >= 1, "seed 53 cuts a running host off");
}

/// `--seed 389 --workload append --tree --failover` (atomicity; found while building the above):
/// a near's host died right after the decision and came back, and the near's own vnode recovered
/// its backup branch without the near — fencing the transaction with a tombstone — and committed
/// it. A near that counted its own tombstone as the decision taken back then told another
/// participant "aborted". Decisions taken back are kept apart from tombstones.
#[test]
fn a_near_fenced_by_its_own_recovery_still_answers_its_commit() {
    assert_seed_passes(aimed_failover_seed(389, WorkloadKind::Append));
}

/// Regression (`--seed 145 --workload append --fanout 2 --failover --clients 12 --duration-ms 2000`,
/// liveness): a host cut off twice came back with a commit its near had not had acknowledged by
/// another host; its own host's branches waited on it while the near's next telling was 1.9 s
/// away, and cuts after healing failed. A near back in touch with the tree tells again at once.
///
/// Since the workloads run through the transaction client the seed's schedule is another. It
/// showed a liveness gap, since fixed: a manager that crashed while its parent, the root, was cut
/// off stayed down until the root's host came back (its host asked the primary parent alone),
/// and without it the secondary root had no majority — every store vnode answered "TRYAGAIN vnode
/// is starting" until then (`tree_scenarios`, `a_child_of_a_cut_off_root_is_booted_…`). What is
/// left is the liveness checker's whole-run floor: two of the three hosts are cut off together
/// for 0.9 s of the 2 s (no majority anywhere), and 19 of 40 alterations are answered ok against
/// the floor of 20.
#[test]
#[ignore = "two of three hosts cut off for 45% of the run: the alterations floor cannot be met"]
fn a_near_back_from_a_partition_tells_its_unacknowledged_commits_again_at_once() {
    let mut cfg = aimed_failover_seed(145, WorkloadKind::Append);
    (cfg.clients, cfg.duration_us) = (12, 2_000_000);
    assert_seed_passes(cfg);
}

/// Regression (`--seed 335 --vnodes 4 --fanout 4 --failover`, bank; found by the sweep after leases
/// were dated by echoed stamps): a root counted a voter as heard only within half a timeout of its
/// own stamp the voter echoed — but the echo comes back a heartbeat interval later, so between
/// every two echoes the root was not fresh, with four voters seldom fresh at all, its store vnodes
/// never caught up and not one transaction committed. The window is now half a timeout and an
/// interval (`alter/lease.rs`).
#[test]
fn a_root_of_four_voters_stays_fresh_between_their_echoes() {
    let mut cfg = aimed_failover_seed(335, WorkloadKind::Bank);
    (cfg.vnodes, cfg.fanout) = (4, 4);
    assert_seed_passes(cfg.clone());
    assert!(waymark_sim::run_seed(&cfg).committed > 0, "transactions commit");
}

/// `--scans`: clients scan the whole keyspace a page at a time among the transfers, under faults,
/// failovers and cuts; every key present throughout a scan is in one of its pages.
#[test]
fn scans_under_faults_and_failovers_miss_no_key_present_throughout() {
    for workload in [WorkloadKind::Bank, WorkloadKind::Append] {
        for seed in 0..20 {
            let mut cfg = aimed_failover_seed(seed, workload);
            cfg.scans = true;
            assert_seed_passes(cfg);
        }
    }
}
