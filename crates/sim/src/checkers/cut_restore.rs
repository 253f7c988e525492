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
use std::collections::{BTreeMap, BTreeSet};
use waymark_core::cut::restore::{find_finish, restore_to_cut_with, Checkpoint, Restored};
use waymark_core::cut::versions_restore::{find_versions_records, restore_to_versions_cut};
use waymark_core::{Breaks, CutId, CutStrategy, Key, PartitionId, Record, TxId};

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
    let holders = holders_at(c, cut);
    let mut restored: Vec<Restored> = vec![];
    for (i, partitions) in holders.iter().enumerate() {
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
            Ok(r) => restored.push(held(c, r, partitions)),
            Err(e) => return Err(v(format!("{cut} on {}: {e}", names(c, [i])))),
        }
    }
    Ok(restored)
}

/// Per store vnode, the partitions it held as a copy at `cut`: by the placement its own metadata
/// recorded where the strategy fixed what the cut covers there — its `CutFinish` on the tree, its
/// `VersionsMap` under `versions` — which names copies that rejoined (their restore holds what the
/// pages copied in, `RecordView::Copied`), not learners. Off the tree, and for a vnode without
/// that record, the partitions it holds since the start by the placement at the end
/// (`holds_from_start`).
///
/// Of the vnodes that recorded a placement, a partition counts only on those that held it by the
/// newest chain any of them held it by, as the export reads it (`cut::holdings::newest_holders`).
/// A consistent cut across a change of placement fails, so there all agree; a `versions` cut does
/// not, and a vnode recorded dead while it took part still routes by the chain it was dropped
/// from (seed 10 of the versions catch-up sweep): what it holds of it is stale.
///
/// Why a `CutFinish` may stand for the cut: no alteration after FINISH is applied before the
/// vnode confirms FINISH, which it does once its local cut is over. One before START may be
/// missing (a coloured message started the local cut early): the vnode then counts as holding
/// less — it is judged less, never wrongly.
pub fn holders_at(c: &impl Cluster, cut: CutId) -> Vec<BTreeSet<u32>> {
    let counted: Vec<bool> = (0..c.vnodes()).map(|node| counted_in(c, node, cut) != Some(false)).collect();
    let recorded: Vec<Option<BTreeMap<u32, u64>>> =
        (0..c.vnodes()).map(|node| recorded_epochs(c, node, cut).filter(|_| counted[node])).collect();
    let with_epochs: Vec<&BTreeMap<u32, u64>> = recorded.iter().flatten().collect();
    let mut newest = waymark_core::cut::holdings::newest_holders(&with_epochs).into_iter();
    (0..c.vnodes())
        .map(|node| {
            if !counted[node] {
                return BTreeSet::new();
            }
            if recorded[node].is_some() {
                return newest.next().map(|kept| kept.into_keys().collect()).unwrap_or_default();
            }
            let rejoined = super::rejoined(c.log(node));
            let p = c.placement();
            (0..p.partitions()).filter(|part| super::holds_from_start(c, &rejoined, node, PartitionId(*part))).collect()
        })
        .collect()
}

/// The partitions vnode `node` was a copy of, with their chains' epochs, by the placement its
/// metadata recorded where the strategy fixed what `cut` covers there (as `Vnode::note_holdings`).
fn recorded_epochs(c: &impl Cluster, node: usize, cut: CutId) -> Option<BTreeMap<u32, u64>> {
    let at = fixed_at(c.log(node), cut)?;
    let p = super::placement_at(c, node, at + 1)?;
    Some(p.copies_of(c.id(node)).map(|part| (part.0, p.epoch(part))).collect())
}

/// Where in a vnode's log the strategy fixed what `cut` covers there: its `CutFinish`, or its
/// `VersionsMap` under `versions` (as `Vnode::note_holdings`).
fn fixed_at(log: &[Record], cut: CutId) -> Option<usize> {
    log.iter().position(|r| match r {
        Record::CutFinish(f) => f.cut == cut,
        Record::VersionsMap { cut: c, .. } => *c == cut,
        _ => false,
    })
}

/// On the tree (`None` off it, or for a cut it did not run): whether vnode `node` is among those
/// the cut process counted for `cut` — it applied one of the cut's STARTs as one of them
/// (`tree_process::counts`). A vnode the cut left out (its host recorded dead at START) may still
/// log an empty local cut when a message coloured by the cut reaches it after its return, over
/// data its catch-up copied in since: no snapshot reads it (seed 708 of the catch-up sweep, bank,
/// 5 vnodes). A START applied while the view had changed is not counted; the operator proposes it
/// again (seed 20, 3 vnodes).
pub(crate) fn counted_in(c: &impl Cluster, node: usize, cut: CutId) -> Option<bool> {
    use waymark_core::cut::operator::Phase;
    c.genesis()?;
    let key = format!("cut/{}", cut.0);
    // Each record of phase `phase` the vnode applied (the operator proposes START again until
    // enough leaves took it).
    let applied = |log: &[Record], phase: Phase| -> Vec<(usize, Vec<u8>)> {
        let of_phase = |r: &Record| match r {
            Record::AlterApplied { record, .. } if record.key == key && Phase::parse(&record.value) == Some(phase) => {
                Some(record.value.clone())
            }
            _ => None,
        };
        log.iter().enumerate().filter_map(|(at, r)| Some((at, of_phase(r)?))).collect()
    };
    let starts = |log: &[Record]| applied(log, Phase::Start);
    // The views the process reached FINISH in. A cut id may be used twice: a root cut off with a
    // minority starts cut N, which fails; the majority's next root starts its own cut N in
    // another view (bugs/2026-12-07-cut-id-reuse, seed 95). Only a START of a view that reached
    // FINISH is the declared process's.
    let finish_views: BTreeSet<String> = (0..c.vnodes())
        .flat_map(|n| applied(c.log(n), Phase::Finish))
        .filter_map(|(_, v)| Phase::view_of(&v).map(str::to_string))
        .collect();
    let of_finished_view =
        |value: &[u8]| finish_views.is_empty() || Phase::view_of(value).is_none_or(|v| finish_views.contains(v));
    // A cut the tree did not run (`--strategy versions`: the coordinator's) names no members.
    if (0..c.vnodes()).all(|n| starts(c.log(n)).is_empty()) {
        return None;
    }
    let host = &c.id(node).host;
    let counted = |(at, value): &(usize, Vec<u8>)| {
        of_finished_view(value)
            && super::metadata_at(c, node, *at)
                .is_some_and(|m| waymark_core::cut::tree_process::counts(&m, host, value))
    };
    Some(starts(c.log(node)).iter().any(counted))
}

/// The vnode whose restore of partition `p` the checkers that read one copy read: the first
/// that held it at the cut and whose commits of it the facts count (`holds_from_start`), else —
/// unless `facts_needed` — the first that held it at the cut.
fn reader_of(
    c: &impl Cluster,
    holders: &[BTreeSet<u32>],
    facts: &LogFacts,
    p: PartitionId,
    facts_needed: bool,
) -> Option<usize> {
    let held = |n: &usize| holders[*n].contains(&p.0);
    let counted = |n: &usize| super::holds_from_start(c, &facts.rejoined[*n], *n, p);
    let mut nodes = (0..c.vnodes()).filter(held);
    match nodes.clone().find(counted) {
        Some(n) => Some(n),
        None if facts_needed => None,
        None => nodes.next(),
    }
}

/// Whether vnode `node` holds no partition by the placement in force at the end. Chains only
/// shrink (a host that comes back gets nothing back yet), so it held nothing the cut had to cover
/// from the moment it was dropped.
fn holds_nothing(c: &impl Cluster, node: usize) -> bool {
    let rejoined = super::rejoined(c.log(node));
    let p = c.placement();
    (0..p.partitions()).map(PartitionId).all(|part| !super::holds_from_start(c, &rejoined, node, part))
}

/// What a vnode's restore stands for: the keys of the partitions it held as a copy at the cut
/// (`holders_at`) — nothing of those a promotion had dropped it from (its host recorded dead;
/// what it holds is stale and no restore reads it) nor of those it was still learning.
fn held(c: &impl Cluster, r: Restored, partitions: &BTreeSet<u32>) -> Restored {
    let p = c.placement();
    if partitions.is_empty() {
        return Restored::default();
    }
    let holds = |k: &Key| partitions.contains(&p.partition_of(k).0);
    Restored { store: r.store.filtered(holds), digests: r.digests.filtered(holds), ..r }
}

/// `restore_all` for the `versions` strategy: its own records and filter (seed 002).
fn restore_all_versions(c: &impl Cluster, cut: CutId) -> Result<Vec<Restored>, Violation> {
    let holders = holders_at(c, cut);
    let mut restored: Vec<Restored> = vec![];
    for (i, partitions) in holders.iter().enumerate() {
        let Some(records) = find_versions_records(c.log(i), cut) else {
            return Err(v(format!(
                "{cut} declared successful but {} has no VersionsMap and VersionsSkip",
                names(c, [i])
            )));
        };
        match restore_to_versions_cut(Checkpoint::default(), c.log(i), &records) {
            Ok(r) => restored.push(held(c, r, partitions)),
            Err(e) => return Err(v(format!("{cut} on {}: {e}", names(c, [i])))),
        }
    }
    Ok(restored)
}

/// What the restores of `cut` must show that the logs alone can tell: (a), (b)'s prefixes and (e).
pub fn check_restores(c: &impl Cluster, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let holders = holders_at(c, cut);
    let mut out = atomic(c, facts, cut, restored, &holders);
    out.extend(prefixes(c, facts, cut, restored, &holders));
    out.extend(replicas_agree(c, cut, restored, &holders));
    out
}

fn check_cut(w: &World, facts: &LogFacts, cut: CutId) -> Vec<Violation> {
    let mut restored = match restore_all(w, cut, w.cfg.strategy, &w.cfg.breaks) {
        Ok(r) => r,
        Err(violation) => return vec![violation],
    };
    let holders = holders_at(w, cut);
    for (n, r) in restored.iter_mut().enumerate() {
        // A transaction counts as included where it committed a write of a partition held — as
        // the facts count it (`LogFacts::gather`: not where only a stale copy committed it) and
        // at the cut (`holders_at`: not where a learner took it).
        // A commit that wrote nothing here includes only a transaction that wrote nowhere: a
        // read-only branch's, or one whose writes a learner's reset stripped, says nothing of the
        // writes the transaction made elsewhere.
        let p = &w.placement;
        let writes_nowhere = |tx: &TxId| facts.writes.get(tx).is_none_or(|ws| ws.is_empty());
        let held = |tx: &TxId, keys: &BTreeSet<Key>| match keys.is_empty() {
            true => writes_nowhere(tx),
            false => keys.iter().any(|k| holders[n].contains(&p.partition_of(k).0)),
        };
        r.included.retain(|tx| facts.committed[n].get(tx).is_some_and(|keys| held(tx, keys)));
        included_by_version(w, facts, cut, n, r);
    }
    let mut out = check_restores(w, facts, cut, &restored);
    out.extend(reads_closed(w, facts, cut, &restored, &holders));
    out.extend(bank_total(w, facts, cut, &restored, &holders));
    let included: BTreeSet<&TxId> = restored.iter().flat_map(|r| r.included.iter()).collect();
    out.extend(super::cut_bounds::check_cut(w, cut, &included));
    out.extend(super::real_time::check_cut(w, facts, cut, &included));
    out.extend(super::cut_replay::check_cut(w, facts, cut, &restored));
    let reader = |key: &Key| reader_of(w, &holders, facts, w.placement.partition_of(key), false);
    out.extend(super::serializable_history::check_restored(w, cut, &restored, reader));
    out
}

/// A copy that rejoined a partition holds what pages copied in, which no record of its log names:
/// it includes, for each key of such a partition it restores at version `v`, the transactions
/// that committed versions `1..=v` (versions of a key are consecutive, and its restore is checked
/// against the other copies' by `replicas_agree`).
fn included_by_version(w: &World, facts: &LogFacts, cut: CutId, node: usize, r: &mut Restored) {
    if facts.rejoined[node].is_empty() {
        return;
    }
    // Only partitions reset before this cut's finish: their data came from pages. Before its reset
    // the vnode held what it had committed itself, which may be a history the live copies do not
    // share (why a learner resets), and which the facts do not count.
    let log = w.log(node);
    let Some(finish) = fixed_at(log, cut) else { return };
    let copied_in = super::rejoined(&log[..finish]);
    let copied = |k: &Key| copied_in.contains(&w.placement.partition_of(k).0);
    for (key, entry) in r.store.iter().filter(|(k, _)| copied(k)) {
        for version in 1..=entry.version {
            if let Some(tx) = facts.writer(key, version) {
                r.included.insert(tx.clone());
            }
        }
    }
}

/// (a) Every replica a transaction wrote includes it, or none does.
///
/// Among the vnodes that held, at the cut, a partition the transaction wrote (`holders_at`): one
/// dropped by then (its host recorded dead, back by the end) restores nothing of it.
fn atomic(
    c: &impl Cluster,
    facts: &LogFacts,
    cut: CutId,
    restored: &[Restored],
    at_cut: &[BTreeSet<u32>],
) -> Vec<Violation> {
    let all: BTreeSet<&TxId> = restored.iter().flat_map(|r| r.included.iter()).collect();
    let p = c.placement();
    let mut out = vec![];
    for tx in all {
        let copies = facts.copies_of(c, tx);
        let holders: BTreeSet<usize> =
            copies.iter().filter(|(n, k)| at_cut[*n].contains(&p.partition_of(k).0)).map(|(n, _)| *n).collect();
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
///
/// Only for the keys of partitions whose commits on this vnode the facts count
/// (`holds_from_start`): not one it rejoined as a learner at some time in the run — the versions
/// its pages copied in are named by no record of its log — nor one it left by the end. Its
/// restore of those is judged against the other copies' (`replicas_agree`).
fn prefixes(
    c: &impl Cluster,
    facts: &LogFacts,
    cut: CutId,
    restored: &[Restored],
    holders: &[BTreeSet<u32>],
) -> Vec<Violation> {
    let mut out = vec![];
    let p = c.placement();
    for (node, r) in restored.iter().enumerate() {
        let counted = |key: &Key| super::holds_from_start(c, &facts.rejoined[node], node, p.partition_of(key));
        for (key, entry) in r.store.iter().filter(|(k, _)| counted(k)) {
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
            let held_at_cut = |k: &Key| holders[node].contains(&p.partition_of(k).0);
            for wr in writes.filter(|wr| facts.committed_on(node, tx, &wr.key) && held_at_cut(&wr.key)) {
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
///
/// A copy that rejoined the partition as a learner and became a copy before the cut is among
/// them: its restore, pages copied in and all, equals the others' (issue 33: a moved partition
/// equals its source).
fn replicas_agree(c: &impl Cluster, cut: CutId, restored: &[Restored], holders: &[BTreeSet<u32>]) -> Vec<Violation> {
    let p = c.placement();
    let mut out = vec![];
    for partition in (0..p.partitions()).map(PartitionId) {
        let chain: Vec<usize> = (0..c.vnodes()).filter(|n| holders[*n].contains(&partition.0)).collect();
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
fn reads_closed(
    w: &World,
    facts: &LogFacts,
    cut: CutId,
    restored: &[Restored],
    at_cut: &[BTreeSet<u32>],
) -> Vec<Violation> {
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
            let Some(reader) = reader_of(w, at_cut, facts, w.placement.partition_of(key), true) else { continue };
            if !restored[reader].included.contains(writer) {
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
fn bank_total(
    w: &World,
    facts: &LogFacts,
    cut: CutId,
    restored: &[Restored],
    holders: &[BTreeSet<u32>],
) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Bank {
        return vec![];
    }
    let read = |key: &Key| {
        let reader = reader_of(w, holders, facts, w.placement.partition_of(key), false)?;
        restored[reader].store.get(key).value
    };
    let balances = super::bank::balances_of(read);
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
