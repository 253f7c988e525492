//! The topology matrix: some broken builds are caught only with 1 or 3 replicas, other vnode
//! counts, or an even number of voters for the root. The default runs take a handful of seeds per
//! shape; the long run (`cargo test --profile sim -p waymark-sim --test topology -- --ignored`)
//! takes many more.

use waymark_sim::run::{reproduce, run_many};
use waymark_sim::{SimConfig, WorkloadKind};

/// Replicas × store vnodes for the cut process run by a coordinator vnode.
const STORE_SHAPES: [(usize, &[usize]); 3] = [(1, &[2, 3, 5, 8, 12]), (2, &[2, 3, 6, 9, 12]), (3, &[3, 4, 7, 10, 12])];
/// Fan-out × store vnodes for the cut process on the tree: fan-outs 2 and 4 give even voter counts
/// under the root in some shapes, 3 and 5 odd ones.
const TREE_SHAPES: [(usize, &[usize]); 4] = [(2, &[3, 6, 12]), (3, &[4, 9]), (4, &[4, 8, 12]), (5, &[5, 10])];

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
        for (replicas, vnode_counts) in STORE_SHAPES {
            for &vnodes in vnode_counts {
                let mut base = SimConfig::new(0, workload);
                (base.cuts, base.vnodes, base.replicas, base.duration_us) = (true, vnodes, replicas, duration_us);
                assert!(sweep(&base, seeds) > 0, "no cut succeeded with {vnodes} vnodes, {replicas} replicas");
            }
        }
    }
}

fn tree_matrix(seeds: u64, duration_us: u64) {
    for (fanout, vnode_counts) in TREE_SHAPES {
        for &vnodes in vnode_counts {
            let mut base = SimConfig::new(0, WorkloadKind::Bank);
            (base.cuts, base.tree, base.vnodes, base.fanout, base.duration_us) =
                (true, true, vnodes, fanout, duration_us);
            assert!(sweep(&base, seeds) > 0, "no cut succeeded on the tree with {vnodes} vnodes, fan-out {fanout}");
        }
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
