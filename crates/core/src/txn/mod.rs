//! Transactions (DESIGN §3): the near vnode coordinates, primaries lock and validate, backups
//! follow; 2PC when several primaries are involved, a 1PC chain when one is.
//!
//! Invariant (atomicity): a transaction commits on a participant only on the word of its first
//! committer — a `Finish`, a `PrepareAck` down a 1PC chain, or a `StatusReply` — and the first
//! committer decides once, in a durable record, before anyone hears of the decision.

pub mod fail_fast;
pub mod locks;
pub mod near;
pub mod orphan;
pub mod participant;
pub mod promotion;
pub mod read_wait;
pub mod recovery;
pub mod scan;
