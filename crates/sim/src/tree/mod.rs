//! The cluster tree of seed 004 in simulation: manager vnodes over store vnodes, alterations with
//! md5 read-back and branch confirmation, parent queues, manager crashes, partitions that split
//! the tree, md5 corruption — and the cut process run as four alterations. Also the scale run
//! that compares the tree with a ring (Ignite's discovery) at 1 000 and 10 000 vnodes.
//!
//! Two worlds drive the tree: the bank world's `--tree` mode (`crate::tree_mode`) and the tree
//! world here (`--tree-only`, scenarios, scale). What they share is written once: the host agents
//! (`host`), the parents followed (`followed`), the timing (`timing`), the genesis (`genesis`) and
//! the counters (`stats`); the cut's phases are the core's (`cut::operator::Phase`).

pub mod build;
pub mod followed;
pub mod genesis;
pub mod host;
pub mod manager;
pub mod scale;
pub mod stats;
pub mod timing;
pub mod vnode;
pub mod world;

pub use world::{ProposalOutcome, Scripted, TreeConfig, TreeReport, TreeWorld};
