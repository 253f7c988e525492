//! The cluster every host derives from the same config: store vnodes, their placement, the tree of
//! manager vnodes above them (`waymark_core::alter::shape`, the simulator's builder), the genesis
//! metadata, and each vnode's configuration. Deterministic: every host computes the same answer.

use crate::config::{ClusterConfig, NodeConfig};
use std::sync::Arc;
use waymark_core::alter::cluster::{self, Setting, VnodeEntry};
use waymark_core::alter::shape::{build_over, Timing};
use waymark_core::alter::{AlterConfig, Metadata};
use waymark_core::{Limits, PartitionId, Placement, Timeouts, VnodeConfig, VnodeId};

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error(
        "partition {partition} would keep two replicas on host {host}: give hosts equal `stores` or fewer replicas"
    )]
    SharedHost { partition: u32, host: String },
}

pub struct Topology {
    pub placement: Arc<Placement>,
    /// Every store vnode, in placement order.
    pub stores: Vec<VnodeId>,
    /// The tree: store vnodes' leaf configs, then the managers'.
    pub tree: Vec<AlterConfig>,
    pub genesis: Metadata,
    pub real_time_safety: bool,
    pub timeouts: Timeouts,
}

impl Topology {
    pub fn new(c: &ClusterConfig) -> Result<Topology, TopologyError> {
        let stores = store_vnodes(c);
        let placement = Placement::round_robin(&stores, c.partitions, c.replicas);
        check_hosts_apart(&placement)?;
        let hop_us = c.hop.as_micros() as u64;
        let timing = Timing {
            hop_us,
            // A quiet disk's fsync is a few ms (docs/BENCHMARKS.md measured 3.8 ms), a busy
            // shared one's tens: budget 50. A deadline only matters when something failed.
            sync_us: 50_000,
            heartbeat_interval_us: 20 * hop_us,
            // Ten intervals (etcd's ratio of election timeout to heartbeat): heartbeats wait for
            // the group commit before them, and a busy disk (`bench_cli` under CI's load) held
            // them past three, so vnodes that were up missed a cut's phase.
            heartbeat_timeout_us: 200 * hop_us,
            breaks: Default::default(),
        };
        let tree = build_over(stores.clone(), c.fanout, &timing).configs;
        let on_off = |on: bool| if on { "on" } else { "off" };
        let min_copies = c.min_copies.to_string();
        let mut settings = vec![
            Setting::new("real_time_safety", on_off(c.real_time_safety)),
            Setting::new("failover", on_off(c.failover)),
        ];
        // Only when set: the genesis of a cluster without it stays what it was.
        if c.min_copies > 1 {
            settings.push(Setting::new("min_copies", &min_copies));
        }
        let (replicas, replace_after_ms) = (c.replicas.to_string(), c.replace_after.as_millis().to_string());
        let copy_rate = c.copy_bytes_per_s.to_string();
        if c.catch_up {
            settings.push(Setting::new("catch_up", "on"));
            settings.push(Setting::new("replicas", &replicas));
            settings.push(Setting::new("replace_after_ms", &replace_after_ms));
            settings.push(Setting::new("copy_bytes_per_s", &copy_rate));
        }
        let genesis = cluster::genesis(&settings, tree.iter().map(VnodeEntry::of), Some(&placement));
        let timeouts = Timeouts {
            prepare_timeout_us: 2_000_000,
            in_doubt_timeout_us: 2_000_000,
            in_doubt_backoff_max_us: 10_000_000,
            read_timeout_us: 2_000_000,
            cut_phase_timeout_us: 5_000_000,
            held_reply_timeout_us: 5_000_000,
            pause_max_us: 5_000_000,
        };
        Ok(Topology {
            placement: Arc::new(placement),
            stores,
            tree,
            genesis,
            real_time_safety: c.real_time_safety,
            timeouts,
        })
    }

    /// The tree configuration of a vnode, if it is part of the tree.
    pub fn tree_config(&self, id: &VnodeId) -> Option<&AlterConfig> {
        self.tree.iter().find(|c| &c.id == id)
    }

    /// The store vnodes `host` runs.
    pub fn stores_on<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a VnodeId> + 'a {
        self.stores.iter().filter(move |v| v.host == host)
    }

    /// The manager vnodes (inner vnodes of the tree) `host` runs.
    pub fn managers_on<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a AlterConfig> + 'a {
        self.tree.iter().filter(move |c| c.id.host == host && !c.children.is_empty())
    }

    /// The store vnode that coordinates a cut process outside the tree (`versions`): the first.
    pub fn cut_coordinator(&self) -> &VnodeId {
        &self.stores[0]
    }

    /// A store vnode's whole configuration.
    pub fn store_config(&self, id: &VnodeId, node: &NodeConfig) -> VnodeConfig {
        let mut cfg = VnodeConfig::new(id.clone(), self.placement.clone(), self.cut_coordinator().clone());
        cfg.real_time_safety = self.real_time_safety;
        cfg.strategy = node.cluster.strategy;
        cfg.timeouts = self.timeouts;
        cfg.limits = Limits {
            txn_keys_max: node.limits.txn_keys_max,
            value_max_bytes: node.limits.value_max_bytes,
            ..Limits::default()
        };
        cfg.tree = self.tree_config(id).cloned();
        cfg.genesis = self.genesis.clone();
        cfg.breaks = node.breaks;
        cfg
    }
}

/// `store<i>@<host>` for each host's stores, interleaved by host (`store0@a, store0@b, …,
/// store1@a, …`) so that round-robin placement puts a partition's replicas on different hosts.
fn store_vnodes(c: &ClusterConfig) -> Vec<VnodeId> {
    let most = c.hosts.iter().map(|h| h.stores).max().unwrap_or(0);
    let mut out = vec![];
    for i in 0..most {
        for h in c.hosts.iter().filter(|h| i < h.stores) {
            out.push(VnodeId::new(format!("store{i}"), h.name.clone()));
        }
    }
    out
}

/// A host that fails must not take two replicas of a partition with it.
fn check_hosts_apart(p: &Placement) -> Result<(), TopologyError> {
    for partition in 0..p.partitions() {
        let chain = p.chain(PartitionId(partition));
        for (i, v) in chain.iter().enumerate() {
            if chain[..i].iter().any(|u| u.host == v.host) {
                return Err(TopologyError::SharedHost { partition, host: v.host.clone() });
            }
        }
    }
    Ok(())
}
