//! Waymark's protocols as pure state machines (DESIGN §2, the sans-IO rule).
//!
//! Nothing here touches an async runtime, a socket, a file, a clock, a thread or a global RNG:
//! a [`Vnode`] is driven by [`Vnode::step`] with the time and an [`Input`], and answers with
//! [`Output`]s for its driver to carry out. The simulator (`waymark-sim`) and the server drive the
//! very same code.
//!
//! - [`txn`]: transactions — near vnode, primaries and backups, 2PC and 1PC, recovery (DESIGN §3).
//! - [`cut`]: the consistent cut of seed 000 — local cut, cut process, restore filter (DESIGN §4).
//! - [`client`]: the transaction client — a client's Redis commands as reads, evaluation and
//!   commits, retried on conflict (DESIGN §3).
//! - [`outbox`]: the write-ahead contract — promises leave only after their records are durable.

pub mod acl;
pub mod alter;
pub mod breaks;
mod bytes;
pub mod catch_up;
pub mod client;
pub mod collection;
pub mod config;
pub mod cut;
pub mod database;
pub mod expiry;
#[doc(hidden)]
pub mod fuzzing;
pub mod ids;
pub mod image;
pub mod io;
pub mod message;
pub mod outbox;
pub mod placement;
pub mod record;
pub mod record_view;
pub mod store;
pub mod tally;
pub mod txn;
pub mod vnode;

pub use breaks::Breaks;
pub use config::{CutStrategy, Limits, Timeouts, UnknownStrategy, VnodeConfig};
pub use ids::{Branch, ClientId, ClientRequest, CutId, Key, Lsn, PartitionId, Role, TxId, Value, Version, VnodeId};
pub use image::{LogSummary, TreeImage, VnodeImage};
pub use io::{Input, Output, Request, Response, ScanCursor, Timer};
pub use message::{AbortReason, Body, CutMsg, Envelope, TxnMsg};
pub use placement::Placement;
pub use record::{CutFinish, Record};
pub use record_view::{RecordView, WriteRef};
pub use store::{Entry, ReadCheck, ResolvedWrite, Store, Write, WriteOp};
pub use vnode::Vnode;
