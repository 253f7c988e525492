//! Seed 004 on real processes: a host that starts is told by its parent which vnodes to start.
//! On 3 hosts the root's host is SIGKILLed; once a secondary root leads, another host is killed
//! and restarted: with its vnodes' primary parent (the root) dead, the secondary that stands in
//! for it names them, and the host serves. Then the root's host comes back: its root manager,
//! with no parent, starts from its log, and its store vnode is named by a parent.

mod common;

use common::{poll, Cluster, Spec};
use std::time::Duration;

/// How long the survivors may take to elect a secondary root.
const SECONDARY_ROOT_WITHIN: Duration = Duration::from_secs(30);

/// The host of the root (the tree's vnode with no parent).
fn root_host(cluster: &Cluster) -> String {
    let topology = cluster.topology();
    let root = topology.tree.iter().find(|c| c.parents.is_empty()).expect("a root");
    root.id.host.clone()
}

/// The lines of `name`'s log that say a vnode was started because a parent named it.
fn started_by_parent(cluster: &Cluster, name: &str) -> Vec<String> {
    let log = std::fs::read_to_string(cluster.host(name).log_file()).unwrap_or_default();
    log.lines().filter(|l| l.contains("starting: its parent named it")).map(String::from).collect()
}

#[test]
fn a_host_restarted_while_the_root_is_dead_is_booted_by_the_secondary_root() {
    let mut cluster = Cluster::start(&Spec::new(3, 2));
    let root = root_host(&cluster);
    let survivors: Vec<String> =
        ["node1", "node2", "node3"].iter().filter(|h| **h != root).map(|h| h.to_string()).collect();
    for host in &survivors {
        let named = started_by_parent(&cluster, host);
        let by_root = format!("parent=manager1@{root}");
        assert!(
            named.iter().any(|l| l.contains(&by_root)),
            "at the start, the root named {host}'s store vnode: {named:?}"
        );
    }

    cluster.kill(&root);
    // The host whose vnode the survivors elected runs the secondary root; the other is restarted.
    let secondary_on = poll("a secondary root leads", SECONDARY_ROOT_WITHIN, || {
        let secondary_leads = |v: &serde_json::Value| {
            v["id"].as_str().is_some_and(|id| id.contains("secondary")) && v["leading_term"].as_u64().unwrap_or(0) > 0
        };
        for host in &survivors {
            let status = cluster.status(host)?;
            if status["vnodes"].as_array().into_iter().flatten().any(secondary_leads) {
                return Ok(host.clone());
            }
        }
        Err(format!("no secondary root leads on {survivors:?} yet"))
    });
    let other = survivors.iter().find(|h| **h != secondary_on).expect("the other survivor").clone();

    let before = started_by_parent(&cluster, &other).len();
    cluster.kill(&other);
    cluster.spawn(&other);
    cluster.wait_serving(&other);
    let lines = started_by_parent(&cluster, &other);
    let now = &lines[before..];
    assert!(
        now.iter().any(|l| l.contains(&format!("store0@{other}")) && l.contains("-secondary@")),
        "{other}'s store vnode was named by the secondary on {secondary_on} standing in for the dead root:\n{now:?}"
    );

    cluster.spawn(&root);
    cluster.wait_serving(&root);
    let log = std::fs::read_to_string(cluster.host(&root).log_file()).unwrap_or_default();
    let back = log.rsplit("starting from its log (no parent to ask)").next().expect("the root's log");
    assert!(log.contains("starting from its log (no parent to ask)"), "the root manager started from its log");
    assert!(back.contains("starting: its parent named it"), "the root's host's store vnode was named by a parent");
}
