//! Checkers, one property per file. Each states its property at the top and, on violation, says
//! which seed, which transactions and what it saw.

pub mod atomicity;
pub mod bank;
pub mod checkpoints;
pub mod collections;
pub mod cut_bounds;
pub mod cut_exports;
pub mod cut_replay;
pub mod cut_restore;
pub mod durability;
pub mod expiry;
pub mod liveness;
pub mod placement_epochs;
pub mod read_monotonic;
pub mod read_recency;
pub mod real_time;
pub mod replicas;
pub mod replies;
pub mod scans;
pub mod serializability;
pub mod serializable_history;
pub mod tallies;
pub mod tree_alterations;
pub mod tree_answered;
pub mod tree_applied;
pub mod tree_convergence;
pub mod tree_parents;
pub mod tree_root_term;
pub mod tree_states;

use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use waymark_core::{Branch, Key, PartitionId, Placement, Record, ResolvedWrite, TxId, VnodeId};

/// A checker: its name, and the property it checks in one sentence. Each checker's file opens
/// with its `CHECKER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checker {
    pub name: &'static str,
    pub property: &'static str,
}

impl Checker {
    /// The property broken, shown by `evidence`.
    pub fn violation(&self, evidence: impl Into<String>) -> Violation {
        Violation { checker: self.name, property: self.property, evidence: evidence.into() }
    }
}

/// What every checker (and the explorer) returns: which checker, the property it found broken,
/// and the evidence — the transactions and vnodes involved and what was seen of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub checker: &'static str,
    /// The property, in one sentence (the checker's `CHECKER.property`).
    pub property: &'static str,
    pub evidence: String,
}

/// `[checker] evidence`; the alternate form (`{:#}`) adds the property on a line of its own.
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.evidence)?;
        if f.alternate() {
            write!(f, "\n  property: {}", self.property)?;
        }
        Ok(())
    }
}

/// What the checkers found in one run.
#[derive(Debug, Default)]
pub struct Checked {
    pub violations: Vec<Violation>,
    /// Cuts declared successful that were restored on every vnode and passed every cut checker.
    pub cuts_verified: usize,
    /// Of those, the cuts a dead host's vnodes had no part in.
    pub cuts_verified_without_a_host: usize,
}

/// Runs every checker that applies to the world's workload.
pub fn check_all(w: &World) -> Checked {
    let facts = LogFacts::gather(w);
    let cuts = cut_restore::check(w, &facts);
    let mut out = vec![];
    out.extend(bank::check(w));
    out.extend(checkpoints::check(w));
    out.extend(durability::check(w, &facts));
    out.extend(atomicity::check(w, &facts));
    out.extend(replicas::check(w));
    out.extend(tallies::check(w));
    out.extend(scans::check(w));
    out.extend(serializable_history::check(w));
    out.extend(cuts.violations);
    out.extend(cut_exports::check(w));
    out.extend(liveness::check(w));
    out.extend(expiry::check(w));
    out.extend(collections::check(w));
    out.extend(read_recency::check(w));
    out.extend(read_monotonic::check(w));
    if w.cfg.tree {
        out.extend(w.answers.violations.iter().cloned());
        let metadata = w.tree_metadata();
        out.extend(tree_convergence::check(&metadata));
        out.extend(tree_states::check(&metadata, Some(&w.placement)));
        out.extend(w.epochs.violations.iter().cloned());
        out.extend(w.epochs.check_final(&w.placement));
        out.extend(tree_parents::secondaries_given_up(&w.running_secondaries()));
    }
    let cuts_verified_without_a_host = cuts.verified_without_a_host;
    Checked { violations: out, cuts_verified: cuts.verified, cuts_verified_without_a_host }
}

/// What the checkers that judge logs read of a cluster: its store vnodes (`0..vnodes()`), their
/// logs, and the placement. The simulated world is one; the explorer's terminal states are others.
pub trait Cluster {
    fn vnodes(&self) -> usize;
    fn id(&self, node: usize) -> &VnodeId;
    fn log(&self, node: usize) -> &[Record];
    fn placement(&self) -> &Placement;
    /// The store vnode `id` names.
    fn node_of(&self, id: &VnodeId) -> usize;
    /// The cluster's genesis metadata, when its store vnodes are of the tree (their logs then
    /// tell which placement each routed by at any record: `placement_at`).
    fn genesis(&self) -> Option<&waymark_core::alter::Metadata> {
        None
    }
    /// The transactions a client was told committed.
    fn acknowledged(&self) -> BTreeSet<TxId> {
        BTreeSet::new()
    }
}

/// The placement `node`'s copy of the metadata recorded once the first `upto` records of its log
/// were applied (`None` off the tree, or if it records none).
pub fn placement_at(c: &impl Cluster, node: usize, upto: usize) -> Option<Placement> {
    waymark_core::alter::cluster::placement(&metadata_at(c, node, upto)?)
}

/// `node`'s copy of the metadata once the first `upto` records of its log were applied (`None`
/// off the tree).
pub fn metadata_at(c: &impl Cluster, node: usize, upto: usize) -> Option<waymark_core::alter::Metadata> {
    let mut summary = waymark_core::VnodeImage::empty(Some(c.genesis()?)).summary;
    for r in &c.log(node)[..upto.min(c.log(node).len())] {
        summary.apply(r);
    }
    Some(summary.tree?.metadata)
}

/// The partitions `log` dropped to join them anew as a learner (`PartitionReset`, catch-up).
///
/// The checkers that judge a replica by the transactions its log commits (atomicity per copy, the
/// cut checkers) judge only the partitions a vnode held from the start: one it rejoined holds
/// what pages copied in as well, which no transaction's record names. A rejoined copy is judged
/// by `replicas` (its data equals the other copies' once quiet) and by the read checkers.
/// Not checked yet: its restore at a cut it covered (the cut checkers skip it).
pub fn rejoined(log: &[Record]) -> BTreeSet<u32> {
    resets(log).map(|(_, p)| p).collect()
}

/// Each `PartitionReset` of `log`: its position and the partition it reset.
fn resets(log: &[Record]) -> impl Iterator<Item = (usize, u32)> + '_ {
    log.iter().enumerate().filter_map(|(at, r)| match r {
        Record::PartitionReset { partition, .. } => Some((at, partition.0)),
        _ => None,
    })
}

/// Partition → the position in `log` of its last `PartitionReset`.
fn last_resets(log: &[Record]) -> BTreeMap<u32, usize> {
    resets(log).map(|(at, p)| (p, at)).collect()
}

/// Whether `node` holds partition `p` whole since the start, by the placement at the end: a copy
/// (not a learner), never rejoined (`rejoined`).
pub fn holds_from_start(c: &impl Cluster, rejoined: &BTreeSet<u32>, node: usize, p: PartitionId) -> bool {
    c.placement().copies(p).contains(c.id(node)) && !rejoined.contains(&p.0)
}

impl Cluster for World {
    fn vnodes(&self) -> usize {
        self.nodes.len()
    }

    fn id(&self, node: usize) -> &VnodeId {
        &self.nodes[node].cfg.id
    }

    fn log(&self, node: usize) -> &[Record] {
        &self.nodes[node].log
    }

    fn placement(&self) -> &Placement {
        &self.placement
    }

    fn node_of(&self, id: &VnodeId) -> usize {
        self.store_index(id)
    }

    fn genesis(&self) -> Option<&waymark_core::alter::Metadata> {
        self.nodes.first().filter(|n| n.cfg.tree.is_some()).map(|n| &n.cfg.genesis)
    }

    fn acknowledged(&self) -> BTreeSet<TxId> {
        self.history.committed().filter_map(|t| t.tx.clone()).collect()
    }
}

/// A version of a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct KeyVersion {
    key: Key,
    version: u64,
}

/// What the durable logs say, gathered once for all checkers.
#[derive(Default)]
pub struct LogFacts {
    /// Per node: transactions committed there (participant records), with the keys each committed
    /// there (a node may hold several branches of one transaction).
    pub committed: Vec<BTreeMap<TxId, BTreeSet<Key>>>,
    /// Per transaction: every write any log knows of (prepared or committed).
    pub writes: BTreeMap<TxId, Vec<ResolvedWrite>>,
    /// (key, version) → the transaction whose *committed* write gave the key that version. A
    /// prepare alone says nothing: a transaction that aborted after its primary resolved a version
    /// leaves that version to the next committed writer.
    writer: BTreeMap<KeyVersion, TxId>,
    /// Per transaction: its committed writes (from the commit record, or the prepare it commits).
    pub committed_writes: BTreeMap<TxId, Vec<ResolvedWrite>>,
    /// Per node: the partitions it rejoined as a learner (`rejoined`).
    pub rejoined: Vec<BTreeSet<u32>>,
}

impl LogFacts {
    pub fn gather(c: &impl Cluster) -> LogFacts {
        let mut f = LogFacts::default();
        let acknowledged = c.acknowledged();
        let rejoined: Vec<BTreeSet<u32>> = (0..c.vnodes()).map(|n| self::rejoined(c.log(n))).collect();
        let placement = c.placement();
        // Transactions some vnode rolled back: a commit of one of those elsewhere may be stale.
        let rolled_back: BTreeSet<&TxId> = (0..c.vnodes())
            .flat_map(|n| c.log(n))
            .filter_map(|r| match r {
                Record::TxRolledBack { tx, .. } => Some(tx),
                _ => None,
            })
            .collect();
        let orphaned: BTreeSet<u32> = (0..placement.partitions())
            .filter(|q| (0..c.vnodes()).all(|n| !holds_from_start(c, &rejoined[n], n, PartitionId(*q))))
            .collect();
        for (node, node_rejoined) in rejoined.iter().enumerate() {
            // Only keys of partitions the vnode still holds: promotions drop a vnode of a host
            // recorded dead from chains (from some only, when the host came back meanwhile), and
            // what it commits for the others is stale or undone — a 1PC first committer cut off
            // may have committed what the replica that took over presumed aborted — and nothing
            // reads it (`--tree --failover` seed 95; `--matrix` seed 824, 9 vnodes).
            //
            // With catch-up, a partition a vnode rejoined as a learner and holds as a copy at the
            // end counts from its last `PartitionReset` of it (it has been a member since). And a
            // partition no copy at the end has held since the start (its copies were replaced
            // one by one) counts, on any vnode, the commits of transactions a client was told
            // committed, or that no vnode rolled back: those committed everywhere with the same
            // writes — no stale commit (a stale one was rolled back or presumed aborted by the
            // replica that took over, which logs it).
            let p = c.placement();
            let last_reset = last_resets(c.log(node));
            let copy_at_end = |q: PartitionId| p.copies(q).contains(c.id(node));
            let counts = |at: usize, tx: &TxId, w: &ResolvedWrite| {
                let q = p.partition_of(&w.key);
                let member_since_reset = last_reset.get(&q.0).is_some_and(|reset| at > *reset && copy_at_end(q));
                let known_committed =
                    orphaned.contains(&q.0) && (acknowledged.contains(tx) || !rolled_back.contains(tx));
                holds_from_start(c, node_rejoined, node, q) || member_since_reset || known_committed
            };
            let mut committed: BTreeMap<TxId, BTreeSet<Key>> = BTreeMap::new();
            let mut prepared: BTreeMap<Branch, Vec<ResolvedWrite>> = BTreeMap::new();
            // Branches whose every write a reset stripped: their commits write nothing here.
            let mut stripped: BTreeSet<Branch> = BTreeSet::new();
            for (at, r) in c.log(node).iter().enumerate() {
                let holds = |w: &&ResolvedWrite| match r {
                    Record::TxCommitted { branch, .. } => counts(at, &branch.tx, w),
                    _ => false,
                };
                match r {
                    Record::TxPrepared(p) => {
                        f.note_writes(&p.tx, &p.writes);
                        prepared.insert(p.branch(), p.writes.clone());
                    }
                    Record::TxRolledBack { branch: Some(b), .. } => drop(prepared.remove(b)),
                    // As the vnode does: a learner's reset strips the partition's writes from the
                    // branches it holds prepared (`catch_up`), so their commits do not write it.
                    Record::PartitionReset { partition, partitions, .. } => {
                        let of = |k: &Key| waymark_core::placement::partition_of(k, *partitions) == *partition;
                        for (branch, writes) in prepared.iter_mut() {
                            let had = !writes.is_empty();
                            writes.retain(|w| !of(&w.key));
                            if had && writes.is_empty() {
                                stripped.insert(branch.clone());
                            }
                        }
                    }
                    Record::TxCommitted { branch, writes, .. } => {
                        f.note_writes(&branch.tx, writes);
                        let was_prepared = prepared.remove(branch).unwrap_or_default();
                        let done = if writes.is_empty() { was_prepared } else { writes.clone() };
                        let all_stale = !done.is_empty() && !done.iter().any(|w| holds(&w));
                        if all_stale || done.is_empty() && stripped.remove(branch) {
                            continue;
                        }
                        let done: Vec<ResolvedWrite> = done.iter().filter(holds).cloned().collect();
                        let keys = committed.entry(branch.tx.clone()).or_default();
                        keys.extend(done.iter().map(|w| w.key.clone()));
                        f.note_committed(&branch.tx, &done);
                    }
                    _ => {}
                }
            }
            f.committed.push(committed);
            f.rejoined.push(node_rejoined.clone());
        }
        f
    }

    fn note_writes(&mut self, tx: &TxId, writes: &[ResolvedWrite]) {
        let known = self.writes.entry(tx.clone()).or_default();
        for wr in writes {
            if !known.iter().any(|k| k.key == wr.key) {
                known.push(wr.clone());
            }
        }
    }

    fn note_committed(&mut self, tx: &TxId, writes: &[ResolvedWrite]) {
        let known = self.committed_writes.entry(tx.clone()).or_default();
        for wr in writes {
            if !known.iter().any(|k| k.key == wr.key) {
                known.push(wr.clone());
            }
            self.writer.insert(KeyVersion { key: wr.key.clone(), version: wr.version }, tx.clone());
        }
    }

    /// The transaction whose committed write gave `key` version `version`.
    pub fn writer(&self, key: &Key, version: u64) -> Option<&TxId> {
        self.writer.get(&KeyVersion { key: key.clone(), version })
    }

    /// The nodes that must hold `tx`'s writes: every replica of every partition it wrote.
    pub fn replicas_of(&self, c: &impl Cluster, tx: &TxId) -> BTreeSet<usize> {
        self.copies_of(c, tx).into_iter().map(|(node, _)| node).collect()
    }

    /// Every copy `tx` writes: each key it wrote on each replica of the key's partition.
    pub fn copies_of<'k>(&'k self, c: &impl Cluster, tx: &TxId) -> BTreeSet<(usize, &'k Key)> {
        let mut out = BTreeSet::new();
        for wr in self.writes.get(tx).into_iter().flatten() {
            let p = c.placement();
            let part = p.partition_of(&wr.key);
            let held = p.chain(part).iter().map(|v| c.node_of(v));
            out.extend(held.filter(|n| holds_from_start(c, &self.rejoined[*n], *n, part)).map(|n| (n, &wr.key)));
        }
        out
    }

    /// Whether `node`'s log commits `tx`'s write of `key`.
    pub fn committed_on(&self, node: usize, tx: &TxId, key: &Key) -> bool {
        self.committed[node].get(tx).is_some_and(|keys| keys.contains(key))
    }
}

/// Names the nodes in a message.
pub fn names(c: &impl Cluster, nodes: impl IntoIterator<Item = usize>) -> String {
    let v: Vec<String> = nodes.into_iter().map(|n| c.id(n).to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// Names copies (vnode and key) in a message.
pub fn copies<'k>(c: &impl Cluster, copies: impl IntoIterator<Item = &'k (usize, &'k Key)>) -> String {
    let v: Vec<String> =
        copies.into_iter().map(|(n, k)| format!("{}/{}", c.id(*n), String::from_utf8_lossy(k))).collect();
    format!("[{}]", v.join(", "))
}
