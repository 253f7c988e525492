//! The shape of the cluster tree (seed 004): store vnodes as leaves, grouped `fanout` at a time
//! under manager vnodes (`managerL@<host of its first child>`, several vnodes per host), up to one
//! root. The root goes on a host none of its children runs on, when the tree has one, else on
//! another host than its first child's: the root and its children are the voters of the root's
//! term (`root.rs`, one per host over three hosts or more), and one host crash must not take two
//! of them — with three voters it left no majority, and no metadata change (no cut) could be made
//! until that host came back. Each vnode's parent queue is its primary parent, then the secondary parents its siblings'
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
    /// The longest a durable write is expected to take (an fsync, perhaps behind one already in
    /// flight). Every level of a branch writes and reads back its copy before it confirms, so a
    /// branch's deadline grows by this much a level.
    pub sync_us: u64,
    pub heartbeat_interval_us: u64,
    /// Silence from a parent or child for this long marks it unreachable. A multiple of the
    /// interval: a heartbeat leaves only after the appends before it are durable (the outbox), so
    /// a slow disk delays it.
    pub heartbeat_timeout_us: u64,
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
    let hosts: Vec<String> = leaves.iter().map(|l| l.host.clone()).collect();
    let mut levels: Vec<Vec<VnodeId>> = vec![leaves];
    while levels.last().expect("a level").len() > 1 {
        let below = levels.last().expect("a level");
        let level = levels.len();
        let mut above: Vec<VnodeId> =
            below.chunks(fanout).map(|c| VnodeId::new(format!("manager{level}"), c[0].host.clone())).collect();
        if above.len() == 1 {
            above[0].host = root_host(below, &hosts);
        }
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

/// The first host that runs none of the root's `children`; else the last child's host other than
/// the first child's (the first child is the first to stand in for the root: one host crash must
/// not take both); else the first child's (every child on one host).
fn root_host(children: &[VnodeId], hosts: &[String]) -> String {
    let taken = |h: &String| children.iter().any(|c| &c.host == h);
    let first = &children[0].host;
    let other = children.iter().rev().map(|c| &c.host).find(|h| *h != first);
    hosts.iter().find(|h| !taken(h)).or(other).unwrap_or(first).clone()
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
    // A branch's deadline covers the round trips of the subtree below it, each level's durable
    // write included (`--tree` seed 1002 with 12 vnodes and fan-out 2: a deadline of hops only
    // expired at a manager three levels up while its leaves were still syncing, and every phase
    // of a cut was ordered again and again).
    let subtree_levels = level as u64 + 1;
    AlterConfig {
        id: id.clone(),
        parents,
        siblings,
        failover,
        // Store vnodes keep what they need, unless they vote for the root (right under it).
        leaf_view: level == 0 && level + 2 < levels.len(),
        secondary_of: None,
        reports: true,
        height: level as u64,
        children,
        confirm_timeout_us: 10 * t.hop_us + (4 * t.hop_us + 2 * t.sync_us) * subtree_levels,
        // Proposals queue at the root behind one another: leave room for a queue, not one trip.
        propose_timeout_us: 40 * t.hop_us * (depth as u64 + 2),
        retries_max: 4,
        retry_backoff_us: 2 * t.hop_us,
        heartbeat_interval_us: t.heartbeat_interval_us,
        heartbeat_timeout_us: t.heartbeat_timeout_us,
        breaks: t.breaks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The root's voters (`root_voters`) by host, over leaves named `store<i>@node<j>`:
    /// `stores` store vnodes on each of `hosts` hosts.
    fn voters_per_host(hosts: usize, stores: usize, fanout: usize) -> BTreeMap<String, usize> {
        let shape = shape_of(hosts, stores, fanout);
        let root = shape.configs.iter().find(|c| c.parents.is_empty()).expect("a root");
        let mut per_host = BTreeMap::new();
        for v in crate::alter::root::root_voters(&root.id, &root.children) {
            *per_host.entry(v.host.clone()).or_insert(0) += 1;
        }
        per_host
    }

    fn shape_of(hosts: usize, stores: usize, fanout: usize) -> Shape {
        let (heartbeat_interval_us, heartbeat_timeout_us) = (20_000, 60_000);
        let t = Timing {
            hop_us: 1_000,
            sync_us: 0,
            heartbeat_interval_us,
            heartbeat_timeout_us,
            breaks: Default::default(),
        };
        let leaves = (0..hosts)
            .flat_map(|h| (0..stores).map(move |s| VnodeId::new(format!("store{s}"), format!("node{}", h + 1))))
            .collect();
        build_over(leaves, fanout, &t)
    }

    #[test]
    fn the_voters_of_root_terms_sit_on_distinct_hosts_from_three_hosts_on() {
        for fanout in 2..=6 {
            for hosts in 3..=24 {
                for stores in 1..=3 {
                    let per_host = voters_per_host(hosts, stores, fanout);
                    let voters: usize = per_host.values().sum();
                    assert!(per_host.values().all(|n| *n == 1), "{hosts}x{stores}, fan-out {fanout}: {per_host:?}");
                    // So that the crash of any one host leaves a majority of them.
                    assert!(voters >= 3, "{hosts}x{stores}, fan-out {fanout}: {per_host:?}");
                }
            }
        }
    }

    #[test]
    fn the_root_and_its_first_child_run_on_different_hosts_when_there_are_two_hosts() {
        for fanout in 2..=6 {
            for hosts in 2..=24 {
                for stores in 1..=3 {
                    let shape = shape_of(hosts, stores, fanout);
                    let root = shape.configs.iter().find(|c| c.parents.is_empty()).expect("a root");
                    assert_ne!(root.id.host, root.children[0].host, "{hosts}x{stores}, fan-out {fanout}");
                }
            }
        }
    }

    #[test]
    fn the_root_runs_on_a_host_none_of_its_children_runs_on_when_there_is_one() {
        for fanout in 2..=6 {
            for leaves in 2..=40 {
                let shape = shape_of(leaves, 1, fanout);
                let root = shape.configs.iter().find(|c| c.parents.is_empty()).expect("a root");
                let hosts_with_children =
                    root.children.iter().map(|c| &c.host).collect::<std::collections::BTreeSet<_>>();
                if hosts_with_children.len() < leaves {
                    assert!(!hosts_with_children.contains(&root.id.host), "{leaves} leaves, fan-out {fanout}");
                }
            }
        }
    }
}
