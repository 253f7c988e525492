//! The copy a new root adopts (`--tree`).
//!
//! Checked at the moment the new root orders its `root` record (the first of its term, right after
//! the copy it adopted). `--break root-without-quorum` (a root wins a term, and answers ok, without
//! a majority of the voters) fails it.

use super::tree_answered::Answers;
use super::{Checker, Violation};
use waymark_core::alter::AlterSeq;
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-root-term",
    property: "when a root wins a term, the copy of the metadata it adopted holds every alteration already \
               answered ok (its `seq` is at least the place each of them was ordered at)",
};

/// `root` ordered its term's `root` record at `seq`: it adopted a copy ending at `seq.prev()`.
pub fn check(answers: &Answers, root: &VnodeId, seq: AlterSeq) -> Vec<Violation> {
    let adopted = seq.saturating_prev();
    answers
        .answered_ok
        .iter()
        .filter(|a| a.seq > adopted)
        .take(3)
        .map(|a| {
            CHECKER.violation(format!(
                "{root} won a term on a copy ending at seq {adopted}, but {} had been answered ok at seq {}",
                a.what(),
                a.seq
            ))
        })
        .collect()
}
