//! The shape of the cluster tree (seed 004): store vnodes as leaves, grouped `fanout` at a time
//! under manager vnodes (`managerL@<host of its first child>`, several vnodes per host), up to one
//! root. Each vnode's parent queue is its primary parent, then the secondary parents its siblings'
//! hosts would start. The simulator and the server build their trees here, so both run one shape.

use super::AlterConfig;
use crate::ids::VnodeId;

pub struct Shape {
    pub configs: Vec<AlterConfig>,
    /// Index of the first manager; leaves are `0..first_manager`.
    pub first_manager: usize,
    pub depth: usize,
}

pub struct Timing {
    pub hop_us: u64,
    pub heartbeat_interval_us: u64,
    pub breaks: crate::Breaks,
}

/// The tree over `leaves` store vnodes named `store0@node00000`, … (the simulator's hosts).
pub fn build(leaves: usize, fanout: usize, t: &Timing) -> Shape {
    build_over((0..leaves).map(|i| VnodeId::new("store0", format!("node{i:05}"))).collect(), fanout, t)
}

/// The tree over the given store vnodes (the leaves, in this order).
pub fn build_over(leaves: Vec<VnodeId>, fanout: usize, t: &Timing) -> Shape {
    assert!(!leaves.is_empty() && fanout >= 2);
    let first_manager = leaves.len();
    let mut levels: Vec<Vec<VnodeId>> = vec![leaves];
    while levels.last().expect("a level").len() > 1 {
        let below = levels.last().expect("a level");
        let level = levels.len();
        let above = below.chunks(fanout).map(|c| VnodeId::new(format!("manager{level}"), c[0].host.clone())).collect();
        levels.push(above);
    }
    let depth = levels.len() - 1;
    let mut configs = vec![];
    for (level, ids) in levels.iter().enumerate() {
        for (i, id) in ids.iter().enumerate() {
            configs.push(config(id, level, i, &levels, fanout, depth, t));
        }
    }
    Shape { configs, first_manager, depth }
}

fn config(
    id: &VnodeId,
    level: usize,
    i: usize,
    levels: &[Vec<VnodeId>],
    fanout: usize,
    depth: usize,
    t: &Timing,
) -> AlterConfig {
    let parent = levels.get(level + 1).map(|up| up[i / fanout].clone());
    let parents: Vec<VnodeId> = parent.into_iter().collect();
    // The primary parent's children, in election priority order.
    let siblings = match levels.get(level + 1) {
        Some(_) => levels[level].iter().skip(i / fanout * fanout).take(fanout).cloned().collect(),
        None => vec![],
    };
    // Every vnode with a parent fails over; under the root, a secondary root must win a term.
    let failover = level + 1 < levels.len();
    let children = match level.checked_sub(1) {
        Some(down) => levels[down].iter().skip(i * fanout).take(fanout).cloned().collect(),
        None => vec![],
    };
    // A branch's deadline covers the round trips of the subtree below it.
    let height = level as u64 + 1;
    AlterConfig {
        id: id.clone(),
        parents,
        siblings,
        failover,
        // Store vnodes keep what they need, unless they vote for the root (right under it).
        leaf_view: level == 0 && level + 2 < levels.len(),
        secondary_of: None,
        reports: true,
        children,
        confirm_timeout_us: 10 * t.hop_us + 4 * t.hop_us * height,
        // Proposals queue at the root behind one another: leave room for a queue, not one trip.
        propose_timeout_us: 40 * t.hop_us * (depth as u64 + 2),
        retries_max: 4,
        retry_backoff_us: 2 * t.hop_us,
        heartbeat_interval_us: t.heartbeat_interval_us,
        heartbeat_timeout_us: 3 * t.heartbeat_interval_us,
        breaks: t.breaks,
    }
}
