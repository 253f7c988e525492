//! What passes between a vnode's driver thread and the rest of its host: the commands queued to a
//! vnode (`VnodeCmd`: envelopes from the router, client requests, inspections, exports) and what a
//! vnode asks of its host (`HostEvent`). They sit below the driver, the router and the host, which
//! all speak them, and above storage, whose results they carry.

use crate::snapshot::manifest::VnodeFiles;
use crate::status::VnodeStatus;
use crate::storage::log_writer::{CutExportError, LogWriteError};
use tokio::sync::oneshot;
use waymark_core::alter::{Metadata, Term};
use waymark_core::cut::holdings::CutHoldings;
use waymark_core::{ClientId, Request, Response, VnodeId};

/// Envelopes are the common command and move once through the queue: boxing them would cost an
/// allocation per message for nothing.
#[allow(clippy::large_enum_variant)]
pub enum VnodeCmd {
    Deliver(waymark_core::Envelope),
    Client {
        client: ClientId,
        req: u64,
        request: Request,
        reply: oneshot::Sender<Response>,
    },
    Inspect(oneshot::Sender<VnodeStatus>),
    /// What the vnode held as a copy when its part of a cut was whole (`None`: it did not finish
    /// that cut since it started), for a snapshot's export.
    HoldingsAt {
        cut: waymark_core::CutId,
        reply: oneshot::Sender<Option<CutHoldings>>,
    },
    /// Export a cut's files into a snapshot (from the vnode's log, in the log's order).
    Export {
        cut: waymark_core::CutId,
        from: Option<waymark_wal::Position>,
        dest: std::path::PathBuf,
        reply: oneshot::Sender<Result<VnodeFiles, CutExportError>>,
    },
}

/// What a host must do for a vnode: start or stop a secondary parent (seed 004), or stop itself.
#[derive(Debug)]
pub enum HostEvent {
    StartSecondary {
        id: VnodeId,
        of: VnodeId,
        metadata: Metadata,
        term: Term,
    },
    StopSecondary {
        id: VnodeId,
    },
    /// The vnode's log failed: a node with a broken disk stops rather than lie.
    Fatal {
        vnode: VnodeId,
        error: LogWriteError,
    },
}
