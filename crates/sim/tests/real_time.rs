//! Real-time safety: with replies held until STARTED, no successful cut restores a transaction
//! sent after another was acknowledged without that other; with the setting off, the simulator
//! finds exactly that anomaly (Ignite's open thin-client bug).

use waymark_sim::run::{run_many, Summary};
use waymark_sim::{SimConfig, WorkloadKind};

/// Many vnodes, one replica, two clients and a slow cut process: colour spreads slowly, so a
/// client can outrun it. Ten vnodes over eight partitions also keeps two vnodes that hold no
/// partition (regression: the cut process once skipped them, seed 2 of this config).
fn run(real_time_safety: bool) -> (Summary, Vec<&'static str>) {
    let mut base = SimConfig::new(0, WorkloadKind::Bank);
    base.vnodes = 10;
    base.replicas = 1;
    base.clients = 2;
    base.cuts = true;
    base.cut_start_spread_us = 100_000;
    base.real_time_safety = real_time_safety;
    let mut checkers = vec![];
    let summary = run_many(&base, 0, 200, |r, _| {
        for v in &r.violations {
            eprintln!("seed {}: {v}", r.seed);
            checkers.push(v.checker);
        }
    });
    (summary, checkers)
}

#[test]
fn without_held_replies_the_real_time_checker_finds_the_anomaly() {
    let (s, checkers) = run(false);
    assert!(s.failed > 0, "the real-time anomaly went unnoticed over {} seeds", s.seeds);
    assert!(checkers.iter().all(|c| *c == "real-time"), "only real-time order may break: {checkers:?}");
}

#[test]
fn with_held_replies_no_cut_breaks_real_time_order() {
    let (s, _) = run(true);
    assert_eq!(s.failed, 0, "first failure: {:?}", s.first_failure);
    assert!(s.cuts_verified > 0 && !s.metrics.held_replies_us.is_empty());
}
