//! Checkers, one property per file. Each states its property at the top and, on violation, says
//! which seed, which transactions and what it saw.

pub mod atomicity;
pub mod bank;
pub mod checkpoints;
pub mod cut_restore;
pub mod durability;
pub mod real_time;
pub mod replicas;
pub mod serializability;
pub mod serializable_history;
pub mod tree_alterations;
pub mod tree_applied;
pub mod tree_convergence;
pub mod tree_parents;
pub mod tree_states;

use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use waymark_core::{Key, Record, ResolvedWrite, TxId};

#[derive(Clone, Debug)]
pub struct Violation {
    pub checker: &'static str,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.message)
    }
}

/// Runs every checker that applies to the world's workload.
pub fn check_all(w: &World) -> Vec<Violation> {
    let facts = LogFacts::gather(w);
    let mut out = vec![];
    out.extend(bank::check(w));
    out.extend(checkpoints::check(w));
    out.extend(durability::check(w, &facts));
    out.extend(atomicity::check(w, &facts));
    out.extend(replicas::check(w));
    out.extend(serializable_history::check(w));
    out.extend(cut_restore::check(w, &facts));
    if w.cfg.tree {
        let metadata = w.tree_metadata();
        out.extend(
            tree_convergence::check(&metadata)
                .into_iter()
                .map(|message| Violation { checker: "tree-convergence", message }),
        );
        for message in tree_states::check(&metadata, Some(&w.placement)) {
            out.push(Violation { checker: "tree-states", message });
        }
        for s in w.running_secondaries() {
            out.push(Violation {
                checker: "tree-parents",
                message: format!("secondary parent {s} still runs at the end"),
            });
        }
    }
    out
}

/// What the durable logs say, gathered once for all checkers.
#[derive(Default)]
pub struct LogFacts {
    /// Per node: transactions committed there (participant records).
    pub committed: Vec<BTreeSet<TxId>>,
    /// Per transaction: every write any log knows of.
    pub writes: BTreeMap<TxId, Vec<ResolvedWrite>>,
    /// (key, version) → the transaction that wrote that version.
    pub writer: BTreeMap<(Key, u64), TxId>,
}

impl LogFacts {
    pub fn gather(w: &World) -> LogFacts {
        let mut f = LogFacts::default();
        for node in &w.nodes {
            let mut committed = BTreeSet::new();
            for r in &node.log {
                match r {
                    Record::TxPrepared(p) => f.note_writes(&p.tx, &p.writes),
                    Record::TxCommitted { branch, writes, .. } => {
                        f.note_writes(&branch.tx, writes);
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
