//! Property: once faults heal and the tree settles, the metadata records every vnode as working and
//! every host as alive — the changes the parents saw were reported through alterations — and,
//! where the world has one, the placement it records is the one in use.

use waymark_core::alter::{cluster, Metadata, View};
use waymark_core::{PartitionId, Placement, VnodeId};

pub fn check(metadata: &[(VnodeId, Metadata)], placement: Option<&Placement>) -> Vec<String> {
    // A whole copy: store vnodes keep only what they need, not the states.
    let Some((v, m)) = metadata.iter().find(|(_, m)| m.view() == View::Full) else { return vec![] };
    let mut out = vec![];
    for (vnode, state) in cluster::states(m) {
        if state != cluster::WORKING {
            out.push(format!("{v}'s metadata still records {vnode} as {}", String::from_utf8_lossy(&state)));
        }
    }
    for (host, alive) in cluster::hosts(m) {
        if !alive {
            out.push(format!("{v}'s metadata still records host {host} as dead"));
        }
    }
    if let Some(p) = placement {
        let recorded = cluster::placement_chains(m);
        let used: Vec<Vec<VnodeId>> = (0..p.partitions()).map(|i| p.chain(PartitionId(i)).to_vec()).collect();
        if recorded != used {
            out.push(format!("{v}'s metadata records placement {recorded:?}, the cluster uses {used:?}"));
        }
    }
    out.truncate(3);
    out
}
