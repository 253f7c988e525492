//! Promotion (issue 30): once the metadata has recorded a host dead for as long as one of its
//! vnodes may still serve (`promotion_wait_us`), the root gives every partition that has a
//! replica on it a new chain without that replica, one epoch later — all in one alteration, like
//! any other (seed 004 bullet 8: "topology is modified by failover"). Decided by the core's root
//! alone, never by a driver or the simulator.
//!
//! Which replica serves next: the first live one in the old order (the old primary when it is
//! alive). Why any live one is safe: a 1PC hop answers up its chain only once it committed, and a
//! 2PC backup holds the branch prepared before its primary answers, so a live replica not in doubt
//! holds every acknowledged commit of the partition; a live replica in doubt keeps the branch's
//! keys locked until the furthest live replica downstream of it answers
//! (`txn::participant::participant_in_doubt`).
//!
//! Only when the cluster setting `failover` is `on`: the simulator's `--failover`, a node's
//! `cluster.failover` (on unless a cluster's config turns it off).
//!
//! The last replica of a partition is never dropped: with none alive the partition waits for one
//! to come back (unavailable), rather than lose what only it holds. A learner is never made to
//! lead: it is dropped with its host like a copy, but a chain whose copies are all gone waits.
//!
//! With the cluster setting `catch_up` on, the same alteration names *learners* (issue 33): a
//! partition whose chain has fewer members than the setting `replicas` gets a live store vnode
//! that holds none of it — the vnodes of a host that came back first, since they hold the
//! fewest partitions — at the end of its chain, `since` the new epoch. The learner copies the
//! partition and then proposes itself a copy (`crate::catch_up`); nothing here ever makes a
//! learner a copy.

use super::cluster;
use super::metadata::Metadata;
use super::node::AlterNode;
use crate::ids::{PartitionId, VnodeId};
use crate::placement::{ChainRecord, Learner};

/// The promotions this root has proposed and not yet seen end: one alteration carrying the next
/// chain of every partition that needs one (`cluster::chains_record`), and those chains.
/// Invariant: at most one in flight. One alteration, not one per partition: they are ordered one
/// after another, and a dead host's 42 partitions of 64 took most of the failover window one by
/// one (docs/BENCHMARKS.md, 2026-12-06).
#[derive(Debug, Default)]
pub(super) struct Promotions {
    in_flight: Option<(u64, Vec<(PartitionId, ChainRecord)>)>,
    /// Hosts the metadata records dead, and since when (this root's clock).
    dead_since: std::collections::BTreeMap<String, u64>,
    /// Partitions with fewer members than `replicas`, and since when (this root's clock).
    short_since: std::collections::BTreeMap<usize, u64>,
}

impl AlterNode {
    /// On every heartbeat tick of a root that orders: propose the next chain of every partition
    /// with a replica on a host recorded dead, all in one alteration (one in flight; withdrawn
    /// when the chains it carries are no longer the next ones).
    pub(super) fn promote(&mut self) {
        if !cluster::failover_on(&self.metadata) || !self.is_root() || self.lead_term().is_none() {
            return;
        }
        let gone = self.hosts_gone_for_good();
        let chains = cluster::placement_chains(&self.metadata);
        let mut spare = Spare::of(&self.metadata, &chains);
        let (now, replace_after_us) = (self.now_us, cluster::replace_after_us(&self.metadata));
        let short = &mut self.promotions.short_since;
        short.retain(|p, _| spare.replicas.is_some_and(|r| chains.get(*p).is_some_and(|c| c.members().len() < r)));
        let next: Vec<(PartitionId, ChainRecord)> = chains
            .iter()
            .enumerate()
            .filter_map(|(p, old)| {
                let dropped = next_chain(old, |h| gone.contains(h));
                let chain = dropped.as_ref().unwrap_or(old);
                let since = *short.entry(p).or_insert(now);
                let any_host = now >= since.saturating_add(replace_after_us);
                let next = spare.add_learners(chain, p, dropped.is_some(), any_host);
                Some((PartitionId(p as u32), next.or(dropped)?))
            })
            .collect();
        short.retain(|p, _| spare.replicas.is_some_and(|r| chains.get(*p).is_some_and(|c| c.members().len() < r)));
        if let Some((n, proposed)) = self.promotions.in_flight.clone() {
            if proposed == next {
                return; // still the next chains: its outcome is awaited
            }
            // Applied, refused, or no longer needed (a host came back before it was ordered).
            self.withdraw_own(n);
            self.promotions.in_flight = None;
        }
        if next.is_empty() {
            return;
        }
        let n = self.propose_own(cluster::chains_record(&next));
        self.promotions.in_flight = Some((n, next));
    }

    /// The hosts recorded dead for `promotion_wait_us` at least. A vnode of such a host has
    /// stopped serving by then even if it is alive and in the tree: it serves only while its copy
    /// caught up with a fresh parent lately (`AlterNode::fresh`), and its copy has its host dead,
    /// or stopped catching up, since the root ordered that record. Promoting at once let a replica
    /// serve beside its old primary: a parent cut off from a child reported it down while the
    /// child, through a secondary parent, was in the tree and serving (`--tree --failover` seed
    /// 219, a stale read).
    fn hosts_gone_for_good(&mut self) -> std::collections::BTreeSet<String> {
        let dead = cluster::dead_hosts(&self.metadata);
        let now = self.now_us;
        self.promotions.dead_since.retain(|h, _| dead.contains(h));
        for h in dead {
            self.promotions.dead_since.entry(h).or_insert(now);
        }
        let wait_us = self.promotion_wait_us();
        self.promotions
            .dead_since
            .iter()
            .filter(|(_, since)| now >= **since + wait_us)
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// How long after its host is recorded dead a vnode may still serve, and a margin. The last
    /// heartbeat carrying the copy from before the record left this root no later than the
    /// record; each level below adds at most half a heartbeat timeout of staleness (a vnode is
    /// `synced` for half a timeout after it caught up with a parent that was fresh), so a store
    /// vnode `height` levels down stops within `height` half-timeouts of it. The margin, one
    /// heartbeat interval, covers the messages' delay and this root's tick. With 3 hosts (height
    /// 1) this is 0.6 s on a node, where a whole timeout (the wait until 2026-12-06) was 1 s.
    fn promotion_wait_us(&self) -> u64 {
        self.cfg.height * self.cfg.heartbeat_timeout_us / 2 + self.cfg.heartbeat_interval_us
    }

    /// An own proposal ended: the promotions may be proposed again.
    pub(super) fn promotion_done(&mut self, n: u64) {
        if self.promotions.in_flight.as_ref().is_some_and(|(m, _)| *m == n) {
            self.promotions.in_flight = None;
        }
    }
}

/// The chain that follows `old` once the hosts `gone` are dropped, or `None`
/// when it needs no change (or no live replica is left to serve).
///
/// Invariant: the result is a non-empty subsequence of `old.chain`, one epoch later.
pub fn next_chain(old: &ChainRecord, gone: impl Fn(&str) -> bool) -> Option<ChainRecord> {
    let chain: Vec<VnodeId> = old.chain.iter().filter(|v| !gone(&v.host)).cloned().collect();
    let learners: Vec<Learner> = old.learners.iter().filter(|l| !gone(&l.vnode.host)).cloned().collect();
    if (chain.len() == old.chain.len() && learners.len() == old.learners.len()) || chain.is_empty() {
        return None;
    }
    assert!(!chain.is_empty() && chain.iter().all(|v| old.chain.contains(v)));
    Some(ChainRecord { epoch: old.epoch + 1, chain, learners })
}

/// The live store vnodes a root may name learners, and how many partitions each is a member of.
struct Spare {
    /// `None`: catch-up is off, or the cluster records no `replicas`.
    replicas: Option<usize>,
    /// Invariant: only vnodes whose host is recorded alive and who are not recorded down.
    load: Vec<(VnodeId, usize)>,
    /// How many partitions each of `load` was a member of before this round named any learner.
    held_at_start: Vec<usize>,
}

impl Spare {
    fn of(m: &Metadata, chains: &[ChainRecord]) -> Spare {
        let replicas = cluster::replicas(m).filter(|_| cluster::catch_up_on(m));
        let members = cluster::placement(m).map(|p| p.vnodes()).unwrap_or_default();
        let live = |v: &VnodeId| !cluster::host_dead(m, &v.host) && !cluster::vnode_down(m, v);
        let load = members
            .into_iter()
            .filter(live)
            .map(|v| {
                let n = chains.iter().filter(|c| c.members().contains(&v)).count();
                (v, n)
            })
            .collect::<Vec<_>>();
        let held_at_start = load.iter().map(|(_, n)| *n).collect();
        Spare { replicas, load, held_at_start }
    }

    /// `chain` (the next epoch's when `raised`, else the one in force) with learners added until it
    /// has `replicas` members: each the least loaded live vnode on a host the chain does not use
    /// (ties broken by a rotation on the partition, to spread them) — one that holds no partition
    /// (its host came back, or is new) at once, any other only once `any_host` (the partition has
    /// been short of members for `replace_after_ms`). `None` when none is added.
    fn add_learners(
        &mut self,
        chain: &ChainRecord,
        partition: usize,
        raised: bool,
        any_host: bool,
    ) -> Option<ChainRecord> {
        let want = self.replicas?;
        let mut next = chain.clone();
        next.epoch = if raised { chain.epoch } else { chain.epoch + 1 };
        let n = self.load.len().max(1);
        while next.members().len() < want {
            let hosts: Vec<String> = next.members().iter().map(|v| v.host.clone()).collect();
            let free = |i: &usize| any_host || self.held_at_start[*i] == 0;
            let candidates = (0..self.load.len()).filter(|i| !hosts.contains(&self.load[*i].0.host)).filter(free);
            let Some(pick) = candidates.min_by_key(|i| (self.load[*i].1, (*i + n - partition % n) % n)) else {
                break;
            };
            self.load[pick].1 += 1;
            next.learners.push(Learner { vnode: self.load[pick].0.clone(), since: next.epoch });
        }
        (next.members().len() > chain.members().len()).then_some(next)
    }
}
