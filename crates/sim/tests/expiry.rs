//! The expiry workload (issue 34) under the simulator's faults: values set with deadlines, read,
//! expired by their primaries lazily and actively, across cuts, failovers and returning hosts —
//! no read returns a value past its deadline (checker `expiry`), and every other checker holds.

use waymark_sim::config::{SimConfig, WorkloadKind};
use waymark_sim::run::run_seed;

#[test]
fn values_expire_under_faults_cuts_and_failovers_and_no_read_sees_one_past_its_deadline() {
    let mut expired = 0;
    for seed in 0..24 {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Expiry);
        cfg.cuts = true;
        if seed % 2 == 1 {
            (cfg.tree, cfg.fanout, cfg.failover, cfg.catch_up) = (true, 2, true, true);
        }
        let r = run_seed(&cfg);
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        assert!(r.committed > 0, "seed {seed} committed nothing");
        expired += r.keys_expired;
    }
    assert!(expired > 0, "no primary expired a key in 24 seeds");
}

/// Matrix seed 128 (`--matrix --cuts --workload expiry`): a read reached a primary restarted but
/// not yet booted, found its key expired, and the expiry transaction it started tripped the near's
/// "a transaction before the vnode booted" assertion. An expiry now waits for the vnode to serve.
#[test]
fn an_expiry_waits_for_its_vnode_to_boot() {
    let mut cfg = SimConfig::new(128, WorkloadKind::Expiry);
    waymark_sim::matrix::of_seed(&waymark_sim::matrix::store_shapes(), 128).apply(&mut cfg);
    cfg.cuts = true;
    let r = run_seed(&cfg);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}
