//! The order of alterations: the term of the root that ordered one, its sequence number, and the
//! place the two make together (`MetaVersion`). Seed 004 point 6 has one root order every
//! alteration; `root.rs` adds the terms, so that a root that failed over never orders at a place
//! another root answered for.
//!
//! Each is a `u64` in messages, logs, checkpoints and md5 sums (`serde(transparent)`), and hashes
//! as one (a derived `Hash` of a one-field struct hashes the field): the bytes and the simulator's
//! trace hashes are what they were before these had types. `Debug` prints the bare number too, so
//! a trace reads as it did.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The term of a root: a root orders alterations only in a term a majority of the voters promised
/// it (`root.rs`), and every vnode promises itself to at most one root per term. `Term::ZERO` is no
/// term: the genesis metadata's, a vnode's before it promised any, a root's that has won none.
///
/// Invariant: the term a vnode promised never decreases (`RootState::promise`), and the term of
/// the metadata's last alteration never decreases along `Metadata::apply`.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Term(pub u64);

impl Term {
    pub const ZERO: Term = Term(0);

    /// The term a root claims after this one.
    pub fn next(self) -> Term {
        Term(self.0 + 1)
    }
}

/// The sequence number of an alteration: its place in the one order the roots give them, counted
/// from 1. `AlterSeq::ZERO` is the genesis metadata's (no alteration applied), and where a proposal
/// that was never ordered is said to be (a failed `Outcome`, `Done`).
///
/// Invariant: a copy of the metadata applies alterations `1, 2, 3, …` with no gap, so its sequence
/// number is the count of alterations it applied (`Metadata::apply`).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AlterSeq(pub u64);

impl AlterSeq {
    pub const ZERO: AlterSeq = AlterSeq(0);

    /// The alteration ordered after this one.
    pub fn next(self) -> AlterSeq {
        AlterSeq(self.0 + 1)
    }

    /// The alteration this one was ordered after (`ZERO` for the first). `ZERO` has none: it
    /// underflows (a panic where overflow is checked, as in the simulator).
    pub fn prev(self) -> AlterSeq {
        AlterSeq(self.0 - 1)
    }

    /// `prev`, and `ZERO` for `ZERO`.
    pub fn saturating_prev(self) -> AlterSeq {
        AlterSeq(self.0.saturating_sub(1))
    }
}

/// A place in the order of alterations: the term of the root that ordered it, then its sequence
/// number. Where metadata stands is the place of the last alteration applied (`Metadata::version`).
/// Alterations are ordered by it, term first, like Raft's (last term, last index): the derived
/// order compares `term`, then `seq`. Two copies with equal versions are equal (one root orders a
/// term, and every vnode applies an alteration only on top of the version it was ordered after).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MetaVersion {
    pub term: Term,
    pub seq: AlterSeq,
}

impl MetaVersion {
    pub fn new(term: Term, seq: AlterSeq) -> Self {
        MetaVersion { term, seq }
    }
}

macro_rules! bare_number {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        /// The bare number, as traces and violations printed it before it had a type.
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    )*};
}

bare_number!(Term, AlterSeq);

/// `(term, seq)`, as logs and violations printed the place before it had a type.
impl fmt::Display for MetaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.term, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{DefaultHasher, Hash, Hasher};

    fn hash(h: impl Hash) -> u64 {
        let mut s = DefaultHasher::new();
        h.hash(&mut s);
        s.finish()
    }

    /// Logs, checkpoints, messages, md5 sums and trace hashes read as they did with bare `u64`s.
    #[test]
    fn terms_and_sequence_numbers_encode_hash_and_print_as_the_numbers_they_replaced() {
        for n in [0u64, 1, 300, u64::MAX] {
            assert_eq!(postcard::to_stdvec(&Term(n)).unwrap(), postcard::to_stdvec(&n).unwrap());
            assert_eq!(postcard::to_stdvec(&AlterSeq(n)).unwrap(), postcard::to_stdvec(&n).unwrap());
            assert_eq!(postcard::from_bytes::<AlterSeq>(&postcard::to_stdvec(&n).unwrap()).unwrap(), AlterSeq(n));
            assert_eq!(hash(Term(n)), hash(n));
            assert_eq!(hash(AlterSeq(n)), hash(n));
            assert_eq!(format!("{:?} {}", Term(n), AlterSeq(n)), format!("{n:?} {n}"));
        }
        let at = MetaVersion::new(Term(2), AlterSeq(7));
        assert_eq!(postcard::to_stdvec(&at).unwrap(), postcard::to_stdvec(&(2u64, 7u64)).unwrap());
        assert_eq!(hash(at), hash((2u64, 7u64)));
        assert_eq!(format!("{at:?}"), "MetaVersion { term: 2, seq: 7 }");
        assert_eq!(at.to_string(), "(2, 7)");
    }

    #[test]
    fn places_are_ordered_by_term_then_sequence_number() {
        let v = |t, s| MetaVersion::new(Term(t), AlterSeq(s));
        assert!(v(1, 9) < v(2, 0) && v(2, 0) < v(2, 1));
        assert_eq!(AlterSeq(4).next().prev(), AlterSeq(4));
        assert_eq!(AlterSeq::ZERO.saturating_prev(), AlterSeq::ZERO);
        assert_eq!(Term::ZERO.next(), Term(1));
    }
}
