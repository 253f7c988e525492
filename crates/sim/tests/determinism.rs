//! Same seed, same trace hash; another seed, another trace.

use waymark_sim::{run_seed, SimConfig, WorkloadKind};

fn hash(seed: u64, workload: WorkloadKind, cuts: bool) -> u64 {
    let mut cfg = SimConfig::new(seed, workload);
    cfg.cuts = cuts;
    cfg.duration_us = 300_000;
    run_seed(&cfg).trace_hash
}

#[test]
fn the_same_seed_gives_the_same_trace_hash() {
    for (seed, workload, cuts) in [(7, WorkloadKind::Bank, true), (11, WorkloadKind::Append, false)] {
        assert_eq!(hash(seed, workload, cuts), hash(seed, workload, cuts), "seed {seed} is not deterministic");
    }
}

#[test]
fn different_seeds_give_different_traces() {
    assert_ne!(hash(1, WorkloadKind::Bank, true), hash(2, WorkloadKind::Bank, true));
}
