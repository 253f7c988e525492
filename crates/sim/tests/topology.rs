//! The topology matrix: some broken builds are caught only with 1 or 3 replicas, other vnode
//! counts, or an even number of voters for the root. The default runs take a handful of seeds per
//! shape; the long run (`cargo test --profile sim -p waymark-sim --test topology -- --ignored`)
//! takes many more.

use waymark_sim::matrix;
use waymark_sim::run::{reproduce, run_many};
use waymark_sim::{SimConfig, WorkloadKind};

fn sweep(base: &SimConfig, seeds: u64) -> u64 {
    let s = run_many(base, 0, seeds, |r, cfg| {
        for v in &r.violations {
            eprintln!("seed {} {v}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    assert_eq!(s.failed, 0, "{} of {seeds} seeds failed; first: {:?}", s.failed, s.first_failure);
    assert_eq!(s.cuts_verified, s.cuts_ok, "every successful cut is restored and verified");
    s.cuts_ok
}

fn store_matrix(seeds: u64, duration_us: u64) {
    for workload in [WorkloadKind::Bank, WorkloadKind::Append] {
        for shape in matrix::store_shapes() {
            let mut base = SimConfig::new(0, workload);
            (base.cuts, base.duration_us) = (true, duration_us);
            shape.apply(&mut base);
            assert!(sweep(&base, seeds) > 0, "no cut succeeded in {shape:?}");
        }
    }
}

fn tree_matrix(seeds: u64, duration_us: u64) {
    for shape in matrix::tree_shapes() {
        let mut base = SimConfig::new(0, WorkloadKind::Bank);
        (base.cuts, base.tree, base.duration_us) = (true, true, duration_us);
        shape.apply(&mut base);
        assert!(sweep(&base, seeds) > 0, "no cut succeeded on the tree in {shape:?}");
    }
}

#[test]
fn every_shape_of_store_cluster_passes_every_checker() {
    store_matrix(6, 500_000);
}

#[test]
fn every_shape_of_tree_passes_every_checker() {
    tree_matrix(4, 500_000);
}

#[test]
#[ignore = "long: run with --ignored under the sim profile"]
fn every_shape_of_store_cluster_passes_every_checker_over_many_seeds() {
    store_matrix(300, 1_000_000);
}

#[test]
#[ignore = "long: run with --ignored under the sim profile"]
fn every_shape_of_tree_passes_every_checker_over_many_seeds() {
    tree_matrix(100, 1_000_000);
}
