//! Alterations answered ok, judged at the moment of the answer (`--tree`).
//!
//! "Working" is the forwarder's view (`working_children`) at the moment it forwarded: a child it
//! no longer counted gets no copy, and the operator's cut process catches that through the
//! applied count instead (a first version took every vnode running at the proposal, and cried
//! wolf when the root had left a silent manager out: `--seed 1 --tree`, FINISH answered ok with 1
//! store vnode applied, then the cut ended failed as it should).
//!
//! Checked at the moment of the answer (`tree_mode::manager_output`), not at the end of a run,
//! when heartbeats have cloned every copy back into agreement. `--break confirm-before-children`
//! (a manager confirms without waiting for its children) fails it.

use super::{Checker, Violation};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use waymark_core::alter::{AlterRecord, AlterSeq, MetaVersion, ProposalId, Term};

pub const CHECKER: Checker = Checker {
    name: "tree-answered",
    property: "when an alteration is answered ok to its proposer, every tree vnode (store vnode or manager) it \
               was forwarded to as a working child, and that still runs as the incarnation it was forwarded to, has \
               applied it or a later alteration",
};

/// What the tree checkers at the moment of an answer or of a term need, recorded as the run goes.
#[derive(Debug, Default)]
pub struct Answers {
    /// `seq` → `term` → the record the root of that term ordered there (two roots of different
    /// terms may order the same place: a stale one is still at work while the new one orders).
    order: BTreeMap<AlterSeq, BTreeMap<Term, AlterRecord>>,
    /// The tree vnodes an `Alter` for each place was sent to, with their incarnation.
    forwarded: BTreeMap<MetaVersion, BTreeSet<Incarnation>>,
    /// Alterations answered ok so far.
    pub answered_ok: Vec<AnsweredOk>,
    /// Terms whose first `root` record was ordered: a term is won once (a root orders its own
    /// `root` proposal again when a retry of it comes, and a stale root keeps ordering in its
    /// old term where no voter confirms — neither is a win).
    terms_won: BTreeSet<Term>,
    pub violations: Vec<Violation>,
}

/// One run of a tree vnode: its index among the world's tree vnodes (store vnodes, then
/// managers) and which start of it this is (a restart is another incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Incarnation {
    pub tree_node: crate::slot::Slot,
    pub instance: u32,
}

/// An alteration answered ok: the seq it was ordered at, and what it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnsweredOk {
    pub seq: AlterSeq,
    pub record: AlterRecord,
}

impl AnsweredOk {
    /// `key=value`, as violations name it.
    pub fn what(&self) -> String {
        what(&self.record)
    }
}

fn what(record: &AlterRecord) -> String {
    format!("{}={}", record.key, String::from_utf8_lossy(&record.value))
}

impl Answers {
    pub fn ordered(&mut self, at: MetaVersion, record: &AlterRecord) {
        self.order.entry(at.seq).or_default().insert(at.term, record.clone());
    }

    /// Whether the `root` record ordered in `term` is the term's first: the moment it was won.
    pub fn wins(&mut self, term: Term) -> bool {
        self.terms_won.insert(term)
    }

    pub fn forwarded(&mut self, at: MetaVersion, to: Incarnation) {
        self.forwarded.entry(at).or_default().insert(to);
    }
}

/// Proposal `id` was answered ok, as ordered at `seq` (a retried proposal may have been ordered
/// more than once: a first version took the last place, and cried wolf on `--seed 271 --tree`
/// when the answer for seq 4 came while the retry at seq 5 was on its way). The root stamps the
/// proposal's id on the record it orders, so the answer is matched to the record by it. Two roots
/// of different terms may have ordered it at the same seq (seed 9679: the stale root of term 1
/// and, for the retry, the secondary root of term 2, both at seq 47); the answer does not say
/// which one gave it, so it passes if the branch of either is whole.
pub fn check(w: &mut World, id: &ProposalId, seq: AlterSeq) -> Vec<Violation> {
    let orderings: Vec<(Term, AlterRecord)> = w
        .answers
        .order
        .get(&seq)
        .into_iter()
        .flatten()
        .filter(|(_, r)| r.origin.as_ref() == Some(id))
        .map(|(term, r)| (*term, r.clone()))
        .collect();
    let Some((_, record)) = orderings.last() else {
        let evidence =
            format!("{id:?} was answered ok at {}us as ordered at seq {seq}, but no root ordered it there", w.now_us);
        return vec![CHECKER.violation(evidence)];
    };
    let what = what(record);
    w.answers.answered_ok.push(AnsweredOk { seq, record: record.clone() });
    let mut found: Vec<Vec<Violation>> =
        orderings.iter().map(|(term, _)| unapplied(w, &what, MetaVersion { term: *term, seq })).collect();
    if found.iter().any(|v| v.is_empty()) {
        return vec![];
    }
    let mut out = found.pop().unwrap_or_default();
    out.truncate(3);
    out
}

/// The working children the alteration ordered at `at` was forwarded to that have not applied it
/// (or a later one), each a violation.
fn unapplied(w: &World, what: &str, at: MetaVersion) -> Vec<Violation> {
    let MetaVersion { term, seq } = at;
    let sent = w.answers.forwarded.get(&at).cloned().unwrap_or_default();
    let mut out = vec![];
    for to in sent {
        let Some((id, metadata)) = w.tree_node_metadata(to) else { continue };
        if metadata.seq() < seq {
            let evidence = format!(
                "{what} (ordered at term {term} seq {seq}) was answered ok at {}us, but {id}, a working child it was forwarded to, has applied only up to seq {}",
                w.now_us,
                metadata.seq()
            );
            out.push(CHECKER.violation(evidence));
        }
    }
    out
}
