//! A store vnode under a changing placement (issue 30): it routes, chains and checks epochs by
//! the placement its copy of the metadata records, and when a promotion changes it:
//! - keys of branches it holds in doubt, in partitions it now leads, are locked as its own, so no
//!   read or write is served around a transaction its old primary may have acknowledged;
//! - every branch in doubt asks again at once, of the replica that can answer now.
//!
//! Who answers a 1PC branch in doubt (`in_doubt_authority`): its first committer while the
//! partition's chain still holds it; once a promotion dropped it, the furthest replica down the
//! branch's chain that the chain still holds — or, if none is left, the branch itself decides.
//! Why deciding abort there is safe: each hop answers up only once it has the outcome, so a hop
//! in doubt never passed a commit up and no client heard of one; the replicas below it that may
//! have committed are out of every chain and serve nothing. A branch rebuilt from the log after a
//! crash does not decide so: it may have passed a commit up before its outcome record was durable
//! (`pass_on`). Nor does a branch a transaction pipelined after it committed at this vnode: that
//! one committed at the first committer only after this one did (`predecessors_committed`), and a
//! client may have read it (`--tree --failover` seed 158: the first committer, cut off from the
//! others but running, committed both; the primary left alone presumed the first aborted under
//! the second, which it had committed). Such a branch asks the first committer, dropped from the
//! chain or not, and takes its word (the first committer presumes abort durably for what it never
//! saw): while that host stays away the branch stays in doubt — blocked, never wrong. Only this
//! branch decides for the chain above it, so no other replica can hear another answer.
//! A successor's commit marks, transitively, every branch it was evaluated after; and a branch
//! presumed aborted takes along every branch held here that was evaluated after it (their values
//! hold its writes), so it presumes only when each of those may too (`--tree --failover
//! --workload append --vnodes 5 --fanout 5` seed 1238: the first of three pipelined branches
//! presumed itself aborted under the second, which the returning first committer answered
//! committed).
//!
//! A 2PC branch whose near is on a host recorded dead recovers with the other live vnodes
//! (`txn::orphan`).

use crate::alter::{cluster, MetaVersion};
use crate::ids::{Branch, Key, VnodeId};
use crate::io::Timer;
use crate::message::AbortReason;
use crate::placement::Placement;
use crate::record::Prepared;
use crate::txn::participant::Decision;
use crate::vnode::Vnode;
use std::sync::Arc;

/// How a store vnode follows the placement its copy of the metadata records: only once a majority
/// of the root's voters is known to hold it (`AlterNode::committed`) — an alteration applied here
/// but not so held can be undone by a change of root, and a promotion acted on and then undone
/// would let a stale replica serve. Until then the vnode serves nothing.
#[derive(Debug, Default)]
pub(crate) struct PlacementFollower {
    /// The metadata version last looked at.
    seen: Option<MetaVersion>,
    /// A placement the metadata records that differs from the one in use, and the version it
    /// was first seen at.
    next: Option<(Arc<Placement>, MetaVersion)>,
    /// Set on a restart: the placement in use came from the log, and is not known to be held by
    /// a majority until `committed` reaches this version.
    pub(crate) unconfirmed: Option<MetaVersion>,
    /// Whether the vnode's copy was `synced` when last looked at (`ask_again_once_back`).
    was_synced: bool,
}

impl PlacementFollower {
    /// Whether the placement in use is known to be the cluster's.
    fn settled(&self) -> bool {
        self.next.is_none() && self.unconfirmed.is_none()
    }
}

impl Vnode {
    /// After the tree role stepped: adopt the placement the metadata records, once committed.
    pub(crate) fn follow_placement(&mut self) {
        let adopt_early = self.cfg.breaks.adopt_uncommitted;
        let Some(tree) = self.tree.as_mut().filter(|t| t.started) else { return };
        let (version, committed) = (tree.alter.metadata().version(), tree.alter.committed());
        if tree.placement.seen != Some(version) {
            tree.placement.seen = Some(version);
            let recorded = crate::alter::cluster::placement(tree.alter.metadata()).map(Arc::new);
            tree.placement.next = match recorded {
                Some(p) if *p != *self.cfg.placement => {
                    let since = tree.placement.next.as_ref().filter(|(n, _)| *n == p).map_or(version, |(_, v)| *v);
                    Some((p, since))
                }
                _ => None,
            };
        }
        // A version is known held by a majority only within the term of the root that said so:
        // one root orders a term, so an earlier seq of that term is on the same history. A copy of
        // an older term may hold alterations the next root never had (`--tree --failover
        // --matrix` seed 1118, 5 vnodes: a leaf at (term 1, seq 50) counted as below a committed
        // (term 2, seq 10) and routed by a promotion that term 2 gave another chain).
        let held = |v: MetaVersion| adopt_early || v.term == committed.term && v.seq <= committed.seq;
        if tree.placement.unconfirmed.is_some_and(|v| held(v) || held(version)) {
            tree.placement.unconfirmed = None;
            if tree.placement.next.is_none() {
                self.catch_up_follow(); // the placement from the log is the cluster's: learn on
                return;
            }
        }
        let Some((next, since)) = tree.placement.next.clone() else { return };
        if !held(since) && !held(version) {
            return; // not yet known to be held by a majority of the root's voters
        }
        tree.placement.next = None;
        let old = std::mem::replace(&mut self.cfg.placement, next);
        self.placement_changed(&old);
    }

    /// After the tree role stepped: a vnode back in touch with a fresh parent after a spell
    /// without one (cut off, or restarted) asks again at once for every branch in doubt that has
    /// asked before. What it asked meanwhile was lost with its links, and its timers, backed off
    /// towards `in_doubt_backoff_max_us`, kept the branches' keys locked and every cut failing
    /// long after it was back (`--seed 20 --workload append --fanout 2 --failover --clients 12
    /// --duration-ms 2000`, liveness: a host cut off for a second, its next asks 1.6 s after it
    /// rejoined).
    pub(crate) fn ask_again_once_back(&mut self) {
        let initial_us = self.cfg.timeouts.in_doubt_timeout_us;
        let Some(tree) = self.tree.as_mut().filter(|t| t.started) else { return };
        let synced = tree.alter.synced() && cluster::failover_on(tree.alter.metadata());
        let back = synced && !tree.placement.was_synced;
        tree.placement.was_synced = synced;
        if !back {
            return;
        }
        let asked: Vec<Branch> =
            self.part.prepared.iter().filter(|(_, p)| p.backoff_us > initial_us).map(|(b, _)| b.clone()).collect();
        for branch in asked {
            if let Some(p) = self.part.prepared.get_mut(&branch) {
                p.backoff_us = initial_us;
            }
            self.set_timer(Timer::InDoubt(branch), 0);
        }
        self.tell_unacked_again_now();
    }

    fn placement_changed(&mut self, old: &Placement) {
        self.catch_up.generation += 1;
        let me = self.cfg.id.clone();
        let branches: Vec<Branch> = self.part.prepared.keys().cloned().collect();
        for branch in branches {
            if !self.cfg.breaks.promoted_unlocked {
                let p = &self.part.prepared[&branch];
                let now_mine = |k: &&Key| self.cfg.placement.primary_of(k) == &me && old.primary_of(k) != &me;
                let keys: Vec<Key> = p.rec.writes.iter().map(|w| &w.key).filter(now_mine).cloned().collect();
                for k in &keys {
                    self.locks.acquire(k, &branch);
                }
                self.part.prepared.get_mut(&branch).expect("listed above").locked.extend(keys);
            }
            self.set_timer(Timer::InDoubt(branch), 0);
        }
        self.catch_up_follow();
        self.expiry_follow();
    }

    /// Whom a branch in doubt asks for its outcome (this vnode itself: it decides).
    pub(crate) fn in_doubt_authority(&self, rec: &Prepared) -> VnodeId {
        if !rec.one_phase {
            return rec.first_committer.clone();
        }
        if rec.writes.is_empty() {
            return rec.first_committer.clone();
        }
        // Every partition the branch wrote: one chain may carry several partitions, and their
        // promotions are separate alterations (`--tree --failover` seed 253: acct3's partition
        // dropped the first committer, acct7's — same chain — still held it and served its commit).
        let p = &self.cfg.placement;
        let held = |v: &VnodeId| rec.writes.iter().any(|w| p.chain(p.partition_of(&w.key)).contains(v));
        if held(&rec.first_committer) {
            return rec.first_committer.clone();
        }
        let below = rec.downstream.iter().rev().find(|v| held(v));
        below.cloned().unwrap_or_else(|| self.cfg.id.clone())
    }

    /// A 1PC branch in doubt whose chain below it was dropped by promotions: presumed aborted,
    /// durably, unless it was rebuilt from the log (see the module's note) — together with every
    /// branch held here that was evaluated after it (pipelined on its writes, `txn::locks`),
    /// whose values hold its writes. If any of those may not be presumed aborted here (another
    /// replica still answers for it, or a successor committed), none is: the branch asks instead.
    pub(crate) fn decide_if_authority(&mut self, branch: &Branch) {
        if !self.part.prepared.get(branch).is_some_and(|p| p.rec.one_phase) {
            return;
        }
        let group = self.pipelined_after(branch);
        let decides = |b: &Branch| {
            let p = &self.part.prepared[b];
            p.may_presume() && p.rec.first_committer != self.cfg.id && self.in_doubt_authority(&p.rec) == self.cfg.id
        };
        if !group.iter().all(decides) {
            return;
        }
        for b in group.iter().rev() {
            if self.part.prepared.contains_key(b) {
                self.finish_prepared(b, Decision::Abort(AbortReason::PresumedAbort));
            }
        }
    }

    /// `branch` and the 1PC branches held here evaluated after it, transitively, in the order
    /// found (a successor after what it was evaluated after).
    fn pipelined_after(&self, branch: &Branch) -> Vec<Branch> {
        let mut group = vec![branch.clone()];
        let mut next = 0;
        while let Some(b) = group.get(next) {
            let tx = b.tx.clone();
            next += 1;
            let successors: Vec<Branch> = self
                .part
                .prepared
                .iter()
                .filter(|(s, p)| p.rec.one_phase && p.rec.after.contains(&tx) && !group.contains(s))
                .map(|(s, _)| s.clone())
                .collect();
            group.extend(successors);
        }
        group
    }

    /// Whether this vnode's copy of the metadata caught up with its parent's lately
    /// (`AlterNode::synced`); always outside the tree, and where placement never changes (the
    /// cluster setting `failover` off).
    pub(crate) fn tree_synced(&self) -> bool {
        self.tree
            .as_ref()
            .is_none_or(|t| !cluster::failover_on(t.alter.metadata()) || t.alter.synced() && t.placement.settled())
    }

    /// Whether this vnode may take part in transactions: caught up since it started, and its own
    /// host not recorded dead — a host recorded dead was dropped, or is being dropped, from every
    /// chain, and what it holds may be stale.
    pub(crate) fn may_serve(&self) -> bool {
        self.tree_synced() && !self.failing_over(&self.cfg.id)
    }

    /// Whether this vnode serves partition `p` as its primary now: booted, the placement it routes
    /// by names it, and it may serve. The simulator's availability figure counts these.
    pub fn serves_primary_of(&self, p: crate::PartitionId) -> bool {
        self.booted && self.cfg.placement.primary(p) == &self.cfg.id && self.may_serve()
    }

    /// Whether this vnode may answer a read of `key` as its primary.
    pub(crate) fn leads(&self, key: &Key) -> bool {
        self.cfg.placement.primary_of(key) == &self.cfg.id && self.may_serve()
    }

    /// The cluster setting `failover` as this vnode's metadata records it (never outside the tree).
    pub(crate) fn failover_on(&self) -> bool {
        self.tree.as_ref().is_some_and(|t| cluster::failover_on(t.alter.metadata()))
    }

    /// Whether `primary` is on a host the metadata records dead: its partitions wait for the root
    /// to promote a replica, and clients hear so at once instead of after a timeout.
    pub(crate) fn failing_over(&self, primary: &VnodeId) -> bool {
        let Some(tree) = self.tree.as_ref() else { return false };
        let m = tree.alter.metadata();
        cluster::failover_on(m) && cluster::host_dead(m, &primary.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::VnodeConfig;
    use crate::ids::{PartitionId, Role, TxId};
    use crate::placement::ChainRecord;
    use crate::store::ResolvedWrite;

    fn key_in(p: &Placement, partition: u32) -> Key {
        (0..1000u32)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| p.partition_of(k) == PartitionId(partition))
            .unwrap()
    }

    /// A 1PC branch on `a` whose chain `a → b` carries partitions 0 and 1; a promotion dropped `b`
    /// from partition 0 only.
    fn branch_on_a(wrote: &[u32]) -> (Vnode, Prepared) {
        let (a, b) = (VnodeId::new("store0", "h1"), VnodeId::new("store0", "h2"));
        let chains = vec![
            ChainRecord { epoch: 1, chain: vec![a.clone()], learners: vec![] },
            ChainRecord { epoch: 0, chain: vec![a.clone(), b.clone()], learners: vec![] },
        ];
        let placement = Placement::from_chains(chains, vec![a.clone(), b.clone()]).expect("valid chains");
        let writes = wrote
            .iter()
            .map(|p| ResolvedWrite {
                key: key_in(&placement, *p),
                value: Some(b"1".to_vec()),
                version: 1,
                deadline_ms: None,
            })
            .collect();
        let rec = Prepared {
            tx: TxId { near: a.clone(), incarnation: 0, seq: 1 },
            writes,
            first_committer: b.clone(),
            upstream: a.clone(),
            downstream: vec![b],
            one_phase: true,
            role: Role::Primary,
            after: vec![],
            read_locks: vec![],
        };
        (Vnode::new(VnodeConfig::new(a.clone(), Arc::new(placement), a)), rec)
    }

    #[test]
    fn a_branch_asks_its_first_committer_while_any_partition_it_wrote_keeps_it() {
        let (v, rec) = branch_on_a(&[0, 1]);
        assert_eq!(v.in_doubt_authority(&rec), rec.first_committer);
    }

    #[test]
    fn a_branch_decides_alone_once_every_partition_it_wrote_dropped_its_first_committer() {
        let (v, rec) = branch_on_a(&[0]);
        assert_eq!(v.in_doubt_authority(&rec), v.cfg.id);
    }

    /// Holds `rec` in doubt at `v` as seq `seq`, evaluated after the transactions `after`.
    fn hold(v: &mut Vnode, rec: &Prepared, seq: u32, after: &[TxId]) -> Branch {
        let mut rec = rec.clone();
        rec.tx.seq = seq;
        rec.after = after.to_vec();
        let branch = Branch { tx: rec.tx.clone(), upstream: rec.upstream.clone(), role: Role::Primary };
        let p = crate::txn::participant::PreparedTx {
            rec,
            read_only: false,
            locked: vec![],
            pending: Default::default(),
            recovered: false,
            successor_committed: false,
            prepared_at: crate::ids::Lsn(0),
            generation: 1,
            backoff_us: 0,
        };
        v.part.prepared.insert(branch.clone(), p);
        branch
    }

    #[test]
    fn a_branch_presumed_aborted_takes_the_branches_pipelined_after_it_along() {
        let (mut v, rec) = branch_on_a(&[0]);
        let t0 = hold(&mut v, &rec, 1, &[]);
        let t1 = hold(&mut v, &rec, 2, std::slice::from_ref(&t0.tx));
        let t2 = hold(&mut v, &rec, 3, std::slice::from_ref(&t1.tx));
        v.decide_if_authority(&t0);
        assert!(v.part.prepared.is_empty(), "T0, T1 and T2 are all presumed aborted");
        assert!([t0, t1, t2].iter().all(|b| v.part.tombstones.contains(&b.tx)));
    }

    /// A successor that also wrote a partition whose chain still holds the first committer may
    /// have committed there, over its predecessor's writes: the predecessor may not presume.
    #[test]
    fn a_branch_does_not_presume_while_a_branch_pipelined_after_it_must_ask() {
        let (mut v, rec) = branch_on_a(&[0]);
        let (_, wider) = branch_on_a(&[0, 1]);
        let t0 = hold(&mut v, &rec, 1, &[]);
        let t1 = hold(&mut v, &wider, 2, std::slice::from_ref(&t0.tx));
        v.decide_if_authority(&t0);
        assert!(v.part.prepared.contains_key(&t0) && v.part.prepared.contains_key(&t1));
    }

    #[test]
    fn a_successors_commit_marks_every_branch_it_was_pipelined_after() {
        let (mut v, rec) = branch_on_a(&[0]);
        let t0 = hold(&mut v, &rec, 1, &[]);
        let t1 = hold(&mut v, &rec, 2, std::slice::from_ref(&t0.tx));
        v.part.note_successor_committed(std::slice::from_ref(&t1.tx));
        assert!(!v.part.prepared[&t0].may_presume() && !v.part.prepared[&t1].may_presume());
        v.decide_if_authority(&t0);
        assert_eq!(v.part.prepared.len(), 2, "neither presumes");
    }
}
