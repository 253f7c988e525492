//! Every deliberate protocol bug is caught by some checker within 200 seeds: proof that the
//! checkers can fail.

use waymark_core::Breaks;
use waymark_sim::{run_seed, SimConfig, WorkloadKind};

/// The first seed below 200 on which a checker reports a violation.
fn first_caught(name: &str, workload: WorkloadKind, cuts: bool) -> Option<(u64, String)> {
    let mut breaks = Breaks::default();
    assert!(breaks.enable(name), "unknown break {name}");
    (0..200).find_map(|seed| {
        let mut cfg = SimConfig::new(seed, workload);
        cfg.breaks = breaks;
        cfg.cuts = cuts;
        cfg.duration_us = 500_000;
        let r = run_seed(&cfg);
        r.violations.first().map(|v| (seed, v.to_string()))
    })
}

fn assert_caught(name: &str, workload: WorkloadKind, cuts: bool) {
    match first_caught(name, workload, cuts) {
        Some((seed, v)) => eprintln!("--break {name}: caught at seed {seed}: {v}"),
        None => panic!("--break {name} went unnoticed for 200 seeds"),
    }
}

#[test]
fn commit_before_all_prepared_is_caught() {
    assert_caught("commit-before-all-prepared", WorkloadKind::Bank, false);
}

#[test]
fn skip_lock_is_caught() {
    assert_caught("skip-lock", WorkloadKind::Bank, false);
}

#[test]
fn ack_before_durable_is_caught() {
    assert_caught("ack-before-durable", WorkloadKind::Bank, false);
}

#[test]
fn color_after_handle_is_caught() {
    assert_caught("color-after-handle", WorkloadKind::Bank, true);
}

#[test]
fn no_tx_cut_is_caught() {
    assert_caught("no-tx-cut", WorkloadKind::Bank, true);
}

#[test]
fn uncoloured_responses_is_caught() {
    assert_caught("uncoloured-responses", WorkloadKind::Bank, true);
}

#[test]
fn finish_early_is_caught() {
    assert_caught("finish-early", WorkloadKind::Append, true);
}

#[test]
fn checkpoint_without_tombstones_is_caught() {
    assert_caught("checkpoint-without-tombstones", WorkloadKind::Bank, false);
}

/// Needs a prepare lost on a broken link in the middle of a pipeline on a hot key: rarer, so the
/// runs are the simulator's default length.
#[test]
fn no_dependency_check_is_caught() {
    let mut breaks = Breaks::default();
    breaks.enable("no-dependency-check");
    let caught = (0..200).find_map(|seed| {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        cfg.breaks = breaks;
        let r = run_seed(&cfg);
        r.violations.first().map(|v| (seed, v.to_string()))
    });
    let (seed, v) = caught.expect("--break no-dependency-check went unnoticed for 200 seeds");
    eprintln!("--break no-dependency-check: caught at seed {seed}: {v}");
}
