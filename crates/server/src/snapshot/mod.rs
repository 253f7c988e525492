//! Snapshot files (DESIGN §5): a full snapshot of cut C0 and increments of later cuts, as files an
//! operator can copy, check and restore without a running cluster.
//!
//! - `manifest`: the JSON manifest of a snapshot and the directory layout;
//! - (`storage::export`: a vnode's sealed segments and base checkpoint linked into a snapshot, by
//!   the vnode's log writer, which owns the log; `create` writes the manifest last);
//! - `chain`: a full snapshot and its increments read back, and their consistency;
//! - `replay`: a vnode's base and log read from a chain and replayed to the target cut;
//! - `check`: every problem of a chain, each naming its file;
//! - `restore`: per-partition data at the cut, written as a new cluster's checkpoints;
//! - `catalog`: the snapshots under a root; `expire`: removing whole chains;
//! - `create`: a snapshot of the live cluster — a cut, every host's export, the manifest;
//! - `schedule`: snapshots taken by the root's host on the configured schedule.

pub mod catalog;
pub mod chain;
pub mod check;
pub mod create;
pub mod expire;
pub mod manifest;
pub mod replay;
pub mod restore;
pub mod schedule;
