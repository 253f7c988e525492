//! The cut process at scale: four branch-confirmed alterations (START, STARTED, FINISH, END) over
//! a tree of fan-out F, against a ring in which each phase travels vnode to vnode (how Ignite's
//! discovery ring carries a distributed process). Same per-hop network latency and per-vnode
//! write-and-read-back time in both; no transactions, no faults.

use super::world::{TreeConfig, TreeWorld};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug)]
pub struct ScaleRow {
    pub vnodes: usize,
    pub tree_latency_us: u64,
    pub tree_messages: u64,
    pub ring_latency_us: u64,
    pub ring_messages: u64,
}

/// What one cut process cost: how long it took and how many messages it sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutCost {
    pub latency_us: u64,
    pub messages: u64,
}

pub fn tree(leaves: usize, fanout: usize, seed: u64) -> CutCost {
    let cfg = TreeConfig {
        leaves,
        fanout,
        faults: false,
        proposals: 0,
        cut_processes: 1,
        duration_us: 60_000_000,
        heartbeats: false,
        // The root wins its first term and orders its `root` record before the cut begins.
        first_proposal_us: 1_000_000,
        ..TreeConfig::new(seed)
    };
    let r = TreeWorld::new(cfg).run();
    assert_eq!(r.cuts_ok, 1, "the cut process must succeed without faults: {:?}", r.violations);
    CutCost { latency_us: r.cut_latencies_us[0], messages: r.cut_messages[0] }
}

/// Each phase goes once around the ring: every vnode writes and reads back the record, then
/// forwards it; the last one answers the initiator.
pub fn ring(vnodes: usize, seed: u64) -> CutCost {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0u64;
    let mut messages = 0u64;
    for _phase in 0..4 {
        for _hop in 0..vnodes {
            t += rng.gen_range(100..1_000) + rng.gen_range(200..2_000);
            messages += 1;
        }
        t += rng.gen_range(100..1_000);
        messages += 1;
    }
    CutCost { latency_us: t, messages }
}

pub fn run(sizes: &[usize], fanout: usize, seed: u64) -> Vec<ScaleRow> {
    sizes
        .iter()
        .map(|&n| {
            let (tree, ring) = (tree(n, fanout, seed), ring(n, seed));
            ScaleRow {
                vnodes: n,
                tree_latency_us: tree.latency_us,
                tree_messages: tree.messages,
                ring_latency_us: ring.latency_us,
                ring_messages: ring.messages,
            }
        })
        .collect()
}
