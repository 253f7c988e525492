//! Alterations (seed 004 points 4–8; DESIGN §6): the one way cluster metadata changes.
//!
//! The initiator sends a record up its parent chain; the root orders it (a sequence number) and
//! sends `Alter{term, prev_term, seq, record, md5}` down. Each vnode writes it, reads it back and compares the md5
//! (a mismatch fails the alteration), applies it, forwards it to its working children and confirms
//! to its parent only once all of them confirmed (a branch transaction). The root answers the
//! initiator, which retries a failed alteration with back-off, a bounded number of times.
//!
//! The root orders in a *term* it won from a majority of its children (`root.rs`); metadata is
//! ordered by version `(term, seq)` (`order.rs`: `Term`, `AlterSeq`, `MetaVersion`).
//!
//! `node.rs` holds the `AlterNode` and the dispatch of its inputs (`io.rs`); each protocol step
//! is in its own file with the state it owns (the table in `node.rs`).
//!
//! Invariant: alterations are applied in `seq` order on every vnode, each on top of the version it
//! was ordered after; one is in flight at a time.
//! Invariant: a vnode confirms `ok` only after its own copy was read back intact and applied, and
//! every working child confirmed `ok`.
//! Invariant: a vnode that misses an alteration (a gap, a bad md5, a crash) never applies a later
//! one before it has cloned its parent's metadata (compared by md5 on every heartbeat).

pub mod boot;
pub mod branch;
pub mod cluster;
pub mod failover;
pub mod initiator;
pub mod io;
pub mod lease;
pub mod manager;
pub mod metadata;
pub mod node;
pub mod order;
pub mod promote;
pub mod reach;
pub mod report;
pub mod root;
pub mod shape;

pub use io::{AlterConfig, AlterInput, AlterMsg, AlterOutput, AlterTimer, Relayed};
pub use manager::{Answered, ManagerVnode};
pub use metadata::{md5_of, AlterRecord, Applied, Md5Sum, Metadata, OrderedRecord, ProposalId, View};
pub use node::AlterNode;
pub use order::{AlterSeq, MetaVersion, Term};
