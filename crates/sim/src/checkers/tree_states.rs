//! The states the tree's metadata records once it settles: the changes the parents saw were
//! reported through alterations.

use super::{Checker, Violation};
use waymark_core::alter::{cluster, Metadata, View};
use waymark_core::{PartitionId, Placement, VnodeId};

pub const CHECKER: Checker = Checker {
    name: "tree-states",
    property: "once faults heal and the tree settles, the metadata records every vnode as working and every host \
               as alive, and, where the world has one, the placement it records is the one in use",
};

pub fn check(metadata: &[(VnodeId, Metadata)], placement: Option<&Placement>) -> Vec<Violation> {
    // A whole copy: store vnodes keep only what they need, not the states.
    let Some((v, m)) = metadata.iter().find(|(_, m)| m.view() == View::Full) else { return vec![] };
    let mut out = vec![];
    for cluster::RecordedState { vnode, state } in cluster::states(m) {
        if state != cluster::WORKING {
            let state = String::from_utf8_lossy(&state);
            out.push(CHECKER.violation(format!("{v}'s metadata still records {vnode} as {state}")));
        }
    }
    for cluster::RecordedHost { host, alive } in cluster::hosts(m) {
        if !alive {
            out.push(CHECKER.violation(format!("{v}'s metadata still records host {host} as dead")));
        }
    }
    if let Some(p) = placement {
        let recorded = cluster::placement_chains(m);
        let used: Vec<_> = (0..p.partitions()).map(|i| p.record(PartitionId(i))).collect();
        if recorded != used {
            out.push(
                CHECKER.violation(format!("{v}'s metadata records placement {recorded:?}, the cluster uses {used:?}")),
            );
        }
    }
    out.truncate(3);
    out
}
