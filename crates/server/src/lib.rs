//! Waymark's real runtime (DESIGN §7): one process per host drives `waymark-core`'s state machines
//! — the very ones the simulator drives — over real threads, files and sockets.
//!
//! ```text
//!  redis clients ─▶ resp/ ─▶ store vnode (driver thread: step, append, sync) ─▶ disk
//!                              │  ▲
//!                              ▼  │
//!                         router ◀┴──── peer links (net/) ◀─▶ other hosts
//! ```
//! - `config`: the host's TOML file; `topology`: the tree, placement and genesis every host derives.
//! - `driver`: a vnode's thread — carries out its outputs, syncs its log once per batch of inputs,
//!   feeds it durability, timers, messages.
//! - `storage`: the vnode's log writer (group commit, read-back, checkpoints) and checkpoint files.
//! - `net`: authenticated, framed peer links; `router`: local queue or peer link.
//! - `resp`: the Redis front end; `admin`: the HTTP API and status page; `node`: the process that
//!   runs them all; `telemetry`: the metrics `/metrics` renders.
//!
//! The server adds no protocol logic: transactions, cuts and alterations are decided by the core.

pub mod admin;
pub mod clock;
pub mod config;
pub mod driver;
pub mod net;
pub mod node;
pub mod resp;
pub mod router;
pub mod snapshot;
pub mod status;
pub mod storage;
pub mod telemetry;
pub mod topology;
