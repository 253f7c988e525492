//! Waymark's real runtime (DESIGN §7): one process per host drives `waymark-core`'s state machines
//! — the very ones the simulator drives — over real threads, files and sockets.
//!
//! ```text
//!  redis clients ─▶ resp/ ─▶ store vnode (driver thread: step, append, sync) ─▶ disk
//!                              │  ▲
//!                              ▼  │
//!                         router ◀┴──── peer links (net/) ◀─▶ other hosts
//! ```
//! - `config`: the host's TOML file; `tls`: the TLS settings built from its `[tls]` files;
//!   `topology`: the tree, placement and genesis every host derives.
//! - `driver`: a vnode's thread — carries out its outputs, syncs its log once per batch of inputs,
//!   feeds it durability, timers, messages; `vnode`: the commands of its queue, its host events.
//! - `storage`: the vnode's log writer (group commit, read-back, checkpoints, a cut's export) and
//!   checkpoint files.
//! - `net`: authenticated, framed peer links; `router`: local queue or peer link.
//! - `host`: the host's vnodes and what the front ends share; `resp`: the Redis front end;
//!   `admin`: the HTTP API and status page; `node`: the process that runs them all; `status`:
//!   what is shown of a vnode and a cut; `telemetry`: the metrics `/metrics` renders.
//!
//! Imports point down the layers drawn in docs/ARCHITECTURE.md ("The server's layers");
//! `tests/layers.rs` keeps it so.
//!
//! The server adds no protocol logic: transactions, cuts and alterations are decided by the core.

pub mod acl;
pub mod admin;
pub mod blocked;
pub mod boot;
pub mod clients;
pub mod clock;
pub mod command_stats;
pub mod config;
pub mod cpu;
pub mod driver;
pub mod encoding_hints;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod memory;
pub mod net;
pub mod node;
pub mod resp;
pub mod router;
pub mod snapshot;
pub mod status;
pub mod storage;
pub mod telemetry;
pub mod tls;
pub mod topology;
pub mod vnode;
