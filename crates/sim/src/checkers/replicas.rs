//! Agreement of a partition's replicas, once the run has settled.

use super::{Checker, Violation};
use crate::world::World;
use waymark_core::PartitionId;

pub const CHECKER: Checker = Checker {
    name: "replicas",
    property: "when quiescent, the primary and the backups of every partition hold identical data (a learner that \
               caught up and became a copy too)",
};

pub fn check(w: &World) -> Vec<Violation> {
    let mut out = vec![];
    for p in (0..w.placement.partitions()).map(PartitionId) {
        let chain = w.placement.copies(p);
        let mut stores = vec![];
        for v in chain {
            let Some(vnode) = &w.nodes[w.store_index(v)].vnode else { return out };
            stores.push(vnode.store().filtered(|k| w.placement.partition_of(k) == p));
        }
        for (i, s) in stores.iter().enumerate().skip(1) {
            if s != &stores[0] {
                out.push(CHECKER.violation(format!(
                    "partition {} differs between {} and {}: {:?} vs {:?}",
                    p.0, chain[0], chain[i], stores[0], s
                )));
            }
        }
    }
    out
}
