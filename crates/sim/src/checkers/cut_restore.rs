//! Restoring every declared cut on every vnode, and what the restores must show: (a) atomicity
//! across replicas, (b) version prefixes and read-from closure, (c) the bank total (or all zero:
//! the setup is left out), (d) `CutFinish` everywhere (a failed local cut is never declared
//! successful), (e) replicas of a partition restore the same entries. (a), (b)'s prefixes, (d)
//! and (e) need only the logs (`restore_all`, `check_restores`): the explorer checks its terminal
//! states with them too. The same restores feed the other cut checkers: `cut_bounds`, the
//! real-time order of `real_time`, `cut_replay` and the serializability of the restored lists.
//!
//! A cut counts as *verified* only when it was restored on every vnode and no cut checker found
//! anything in it.

use super::{names, Checker, Cluster, LogFacts, Violation};
use crate::config::WorkloadKind;
use crate::history::{ClientRead, DeclaredCut};
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::cut::restore::{find_finish, restore_to_cut_with, Checkpoint, Restored};
use waymark_core::cut::versions_restore::{find_versions_records, restore_to_versions_cut};
use waymark_core::{Breaks, CutId, CutStrategy, Key, PartitionId, TxId};

pub const CHECKER: Checker = Checker {
    name: "cut-restore",
    property: "every cut the process declared successful restores, on every vnode, to a state in which each \
               transaction is included by all the replicas it wrote or by none, per key the included versions \
               are a prefix of the key's committed history, every transaction an included one read from is \
               included, the replicas of a partition agree, and the bank balances sum to the total",
};

/// What checking every declared cut found.
#[derive(Debug, Default)]
pub struct CutsChecked {
    pub violations: Vec<Violation>,
    /// Cuts declared successful that were restored on every vnode and passed every cut checker.
    pub verified: usize,
    /// Of those, the cuts taken while a host was recorded dead: a vnode dropped from every chain
    /// had no part in them (issue 30, item 7).
    pub verified_without_a_host: usize,
}

pub fn check(w: &World, facts: &LogFacts) -> CutsChecked {
    let mut out = CutsChecked::default();
    for DeclaredCut { cut, ok } in w.declared_cuts() {
        if ok {
            let found = check_cut(w, facts, cut);
            out.verified += found.is_empty() as usize;
            let without_a_host = (0..w.vnodes()).any(|i| find_finish(w.log(i), cut).is_none());
            out.verified_without_a_host += (found.is_empty() && without_a_host) as usize;
            out.violations.extend(found);
        }
    }
    for run in &w.history.cuts {
        if run.ok && !w.declared_cuts().contains(&DeclaredCut { cut: run.cut, ok: true }) {
            let message = format!("{} was reported successful to the operator but not logged so", run.cut);
            out.violations.push(v(message));
        }
    }
    out
}

fn v(evidence: String) -> Violation {
    CHECKER.violation(evidence)
}

/// Restores `cut` on every vnode (from the start of its log), through the restore filter of
/// `strategy` (`breaks` may break the filter on purpose).
pub fn restore_all(
    c: &impl Cluster,
    cut: CutId,
    strategy: CutStrategy,
    breaks: &Breaks,
) -> Result<Vec<Restored>, Violation> {
    if strategy == CutStrategy::Versions {
        return restore_all_versions(c, cut);
    }
    let mut restored: Vec<Restored> = vec![];
    for i in 0..c.vnodes() {
        let Some(finish) = find_finish(c.log(i), cut) else {
            if holds_nothing(c, i) {
                // Dropped from every chain (its host recorded dead): a cut after that covers its
                // partitions by their live replicas and need not reach it (`cut_members`).
                restored.push(Restored::default());
                continue;
            }
            return Err(v(format!("{cut} declared successful but {} has no CutFinish", names(c, [i]))));
        };
        match restore_to_cut_with(Checkpoint::default(), c.log(i), finish, breaks) {
            Ok(r) => restored.push(held(c, i, r)),
            Err(e) => return Err(v(format!("{cut} on {}: {e}", names(c, [i])))),
        }
    }
    Ok(restored)
}

/// Whether vnode `node` holds no partition by the placement in force at the end. Chains only
/// shrink (a host that comes back gets nothing back yet), so it held nothing the cut had to cover
/// from the moment it was dropped.
fn holds_nothing(c: &impl Cluster, node: usize) -> bool {
    let rejoined = super::rejoined(c.log(node));
    let p = c.placement();
    (0..p.partitions()).map(PartitionId).all(|part| !super::holds_from_start(c, &rejoined, node, part))
}

/// What a vnode's restore stands for: nothing when a promotion dropped it from every chain (its
/// host was recorded dead; what it holds is stale and no restore reads it), else all of it.
/// Judged by the placement in force at the end, a subset of every earlier one's replicas.
fn held(c: &impl Cluster, node: usize, r: Restored) -> Restored {
    let p = c.placement();
    let rejoined = super::rejoined(c.log(node));
    let holds = |k: &Key| super::holds_from_start(c, &rejoined, node, p.partition_of(k));
    match holds_nothing(c, node) {
        // Its keys of partitions it was dropped from are stale too (`LogFacts::gather`).
        false => Restored { store: r.store.filtered(holds), digests: r.digests.filtered(holds), ..r },
        true => Restored::default(),
    }
}

/// `restore_all` for the `versions` strategy: its own records and filter (seed 002).
fn restore_all_versions(c: &impl Cluster, cut: CutId) -> Result<Vec<Restored>, Violation> {
    let mut restored: Vec<Restored> = vec![];
    for i in 0..c.vnodes() {
        let Some(records) = find_versions_records(c.log(i), cut) else {
            return Err(v(format!(
                "{cut} declared successful but {} has no VersionsMap and VersionsSkip",
                names(c, [i])
            )));
        };
        match restore_to_versions_cut(Checkpoint::default(), c.log(i), &records) {
            Ok(r) => restored.push(held(c, i, r)),
            Err(e) => return Err(v(format!("{cut} on {}: {e}", names(c, [i])))),
        }
    }
    Ok(restored)
}

/// What the restores of `cut` must show that the logs alone can tell: (a), (b)'s prefixes and (e).
pub fn check_restores(c: &impl Cluster, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let mut out = atomic(c, facts, cut, restored);
    out.extend(prefixes(c, facts, cut, restored));
    out.extend(replicas_agree(c, cut, restored));
    out
}

fn check_cut(w: &World, facts: &LogFacts, cut: CutId) -> Vec<Violation> {
    let mut restored = match restore_all(w, cut, w.cfg.strategy, &w.cfg.breaks) {
        Ok(r) => r,
        Err(violation) => return vec![violation],
    };
    for (n, r) in restored.iter_mut().enumerate() {
        // A transaction counts as included where it committed a write of a partition held
        // (`held`, `LogFacts::gather`): not where only a stale copy committed it.
        r.included.retain(|tx| facts.committed[n].contains_key(tx));
    }
    let mut out = check_restores(w, facts, cut, &restored);
    out.extend(reads_closed(w, facts, cut, &restored));
    out.extend(bank_total(w, cut, &restored));
    let included: BTreeSet<&TxId> = restored.iter().flat_map(|r| r.included.iter()).collect();
    out.extend(super::cut_bounds::check_cut(w, cut, &included));
    out.extend(super::real_time::check_cut(w, facts, cut, &included));
    out.extend(super::cut_replay::check_cut(w, facts, cut, &restored));
    out.extend(super::serializable_history::check_restored(w, cut, &restored));
    out
}

/// (a) Every replica a transaction wrote includes it, or none does.
fn atomic(c: &impl Cluster, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let all: BTreeSet<&TxId> = restored.iter().flat_map(|r| r.included.iter()).collect();
    let mut out = vec![];
    for tx in all {
        let holders = facts.replicas_of(c, tx);
        let missing: Vec<usize> = holders.iter().copied().filter(|n| !restored[*n].included.contains(tx)).collect();
        if !missing.is_empty() {
            let with: Vec<usize> = holders.iter().copied().filter(|n| restored[*n].included.contains(tx)).collect();
            out.push(v(format!(
                "{cut}: {tx} restored on {} but not on {} (atomicity)",
                names(c, with),
                names(c, missing)
            )));
        }
    }
    out
}

/// (b) Versions form a prefix per key: every version up to the one restored was written by an
/// included transaction, and no write an included transaction committed on that vnode is beyond it.
fn prefixes(c: &impl Cluster, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let mut out = vec![];
    for (node, r) in restored.iter().enumerate() {
        for (key, entry) in r.store.iter() {
            for version in 1..=entry.version {
                match facts.writer(key, version) {
                    Some(tx) if r.included.contains(tx) => {}
                    writer => out.push(v(format!(
                        "{cut} on {}: key {} restored at version {} but version {version} (by {writer:?}) is not included",
                        names(c, [node]),
                        String::from_utf8_lossy(key),
                        entry.version
                    ))),
                }
            }
        }
        for tx in &r.included {
            let writes = facts.committed_writes.get(tx).into_iter().flatten();
            for wr in writes.filter(|wr| facts.committed_on(node, tx, &wr.key)) {
                let restored_version = r.store.get(&wr.key).version;
                if wr.version > restored_version {
                    out.push(v(format!(
                        "{cut} on {}: {tx} is included but key {} is restored at version {restored_version}, before \
                         its write (version {})",
                        names(c, [node]),
                        String::from_utf8_lossy(&wr.key),
                        wr.version
                    )));
                }
            }
        }
    }
    out
}

/// (e) The replicas of every partition restore the same entries.
fn replicas_agree(c: &impl Cluster, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let p = c.placement();
    let mut out = vec![];
    for partition in (0..p.partitions()).map(PartitionId) {
        let held = |n: &usize| super::holds_from_start(c, &super::rejoined(c.log(*n)), *n, partition);
        let chain: Vec<usize> = p.copies(partition).iter().map(|v| c.node_of(v)).filter(held).collect();
        let stores: Vec<_> =
            chain.iter().map(|n| restored[*n].store.filtered(|k| p.partition_of(k) == partition)).collect();
        if let Some(i) = (1..stores.len()).find(|i| stores[*i] != stores[0]) {
            out.push(v(format!(
                "{cut}: partition {} is restored differently on {} and {}: {:?} vs {:?}",
                partition.0,
                names(c, [chain[0]]),
                names(c, [chain[i]]),
                stores[0],
                stores[i]
            )));
        }
    }
    out
}

/// (b) Read-from dependencies of included transactions are included.
fn reads_closed(w: &World, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let mut out = vec![];
    for t in w.history.committed() {
        let Some(tx) = &t.tx else { continue };
        let holders = facts.replicas_of(w, tx);
        let Some(&holder) = holders.iter().next() else { continue };
        if !restored[holder].included.contains(tx) {
            continue;
        }
        for ClientRead { key, version, .. } in t.reads.iter().filter(|r| r.version > 0) {
            let Some(writer) = facts.writer(key, *version) else { continue };
            let primary = w.store_index(w.placement.primary_of(key));
            if !restored[primary].included.contains(writer) {
                out.push(v(format!(
                    "{cut}: {tx} is restored but {writer}, whose write of {} it read, is not (closure)",
                    String::from_utf8_lossy(key)
                )));
            }
        }
    }
    out
}

/// (c) The restored accounts sum to the total.
fn bank_total(w: &World, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Bank {
        return vec![];
    }
    let balances = super::bank::balances_from(w, |node, key| restored[node].store.get(key).value);
    if balances.iter().all(|b| *b == 0) {
        // The setup is not included: nothing else can be (closure), and `cut_bounds` makes sure
        // this only happens to a cut that began before the setup was acknowledged.
        return vec![];
    }
    match super::bank::judge(&balances) {
        Some(msg) => vec![v(format!("{cut}: restored {msg}"))],
        None => vec![],
    }
}
