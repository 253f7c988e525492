//! The cluster tree of seed 004 in simulation: manager vnodes over store vnodes, alterations with
//! md5 read-back and branch confirmation, parent queues, manager crashes, partitions that split
//! the tree, md5 corruption — and the cut process run as four alterations. Also the scale run
//! that compares the tree with a ring (Ignite's discovery) at 1 000 and 10 000 vnodes.

pub mod build;
pub mod manager;
pub mod scale;
pub mod vnode;
pub mod world;

pub use world::{ProposalOutcome, Scripted, TreeConfig, TreeReport, TreeWorld};
