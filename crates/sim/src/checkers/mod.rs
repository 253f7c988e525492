//! Checkers, one property per file. Each states its property at the top and, on violation, says
//! which seed, which transactions and what it saw.

pub mod atomicity;
pub mod bank;
pub mod checkpoints;
pub mod cut_bounds;
pub mod cut_replay;
pub mod cut_restore;
pub mod durability;
pub mod liveness;
pub mod read_recency;
pub mod real_time;
pub mod replicas;
pub mod serializability;
pub mod serializable_history;
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
use waymark_core::{Branch, Key, Record, ResolvedWrite, TxId};

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
    out.extend(serializable_history::check(w));
    out.extend(cuts.violations);
    out.extend(liveness::check(w));
    out.extend(read_recency::check(w));
    if w.cfg.tree {
        out.extend(w.answers.violations.iter().cloned());
        let metadata = w.tree_metadata();
        out.extend(tree_convergence::check(&metadata));
        out.extend(tree_states::check(&metadata, Some(&w.placement)));
        out.extend(tree_parents::secondaries_given_up(&w.running_secondaries()));
    }
    Checked { violations: out, cuts_verified: cuts.verified }
}

/// What the durable logs say, gathered once for all checkers.
#[derive(Default)]
pub struct LogFacts {
    /// Per node: transactions committed there (participant records).
    pub committed: Vec<BTreeSet<TxId>>,
    /// Per transaction: every write any log knows of (prepared or committed).
    pub writes: BTreeMap<TxId, Vec<ResolvedWrite>>,
    /// (key, version) → the transaction whose *committed* write gave the key that version. A
    /// prepare alone says nothing: a transaction that aborted after its primary resolved a version
    /// leaves that version to the next committed writer.
    pub writer: BTreeMap<(Key, u64), TxId>,
    /// Per transaction: its committed writes (from the commit record, or the prepare it commits).
    pub committed_writes: BTreeMap<TxId, Vec<ResolvedWrite>>,
}

impl LogFacts {
    pub fn gather(w: &World) -> LogFacts {
        let mut f = LogFacts::default();
        for node in &w.nodes {
            let mut committed = BTreeSet::new();
            let mut prepared: BTreeMap<Branch, Vec<ResolvedWrite>> = BTreeMap::new();
            for r in &node.log {
                match r {
                    Record::TxPrepared(p) => {
                        f.note_writes(&p.tx, &p.writes);
                        prepared.insert(p.branch(), p.writes.clone());
                    }
                    Record::TxRolledBack { branch: Some(b), .. } => drop(prepared.remove(b)),
                    Record::TxCommitted { branch, writes, .. } => {
                        f.note_writes(&branch.tx, writes);
                        let done = if writes.is_empty() {
                            prepared.remove(branch).unwrap_or_default()
                        } else {
                            writes.clone()
                        };
                        f.note_committed(&branch.tx, &done);
                        committed.insert(branch.tx.clone());
                    }
                    _ => {}
                }
            }
            f.committed.push(committed);
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
            self.writer.insert((wr.key.clone(), wr.version), tx.clone());
        }
    }

    /// The nodes that must hold `tx`'s writes: every replica of every partition it wrote.
    pub fn replicas_of(&self, w: &World, tx: &TxId) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        for wr in self.writes.get(tx).into_iter().flatten() {
            for v in w.placement.chain(w.placement.partition_of(&wr.key)) {
                out.insert(w.index[v]);
            }
        }
        out
    }
}

/// Names the nodes in a message.
pub fn names(w: &World, nodes: impl IntoIterator<Item = usize>) -> String {
    let v: Vec<String> = nodes.into_iter().map(|n| w.nodes[n].cfg.id.to_string()).collect();
    format!("[{}]", v.join(", "))
}
