//! The transaction client (DESIGN §3): how one client's Redis data commands become Waymark
//! transactions, as a pure state machine that the server's Redis session and the simulator's
//! clients drive alike.
//!
//! Given a batch — one command, a `WATCH`, or the commands queued between `MULTI` and `EXEC` —
//! [`TxnClient`] says which requests to send to the client's near vnode ([`Step::Send`]), reads
//! the keys the replies depend on, evaluates the commands against what came back
//! (`evaluate.rs`), sends the commit (or skips it when nothing can have changed), retries a
//! conflict after a back-off the driver waits out ([`Step::Backoff`]) within
//! [`ClientLimits::conflict_retries_max`], and produces the Redis reply ([`Step::Done`]).
//!
//! The driver adds only transport: it sends the requests together, hands back every answer in
//! order (`None` for one not answered within its time-out), sleeps the back-off with jitter, and
//! writes the reply.

mod answer;
pub mod collections;
pub mod command;
pub mod evaluate;
mod hash;
mod lcs;
mod list;
mod run;
mod set;
mod txn_client;

pub use command::DataCmd;
pub use run::{Answer, Attempt, AttemptOutcome, Ended, Finished, Step};
pub use txn_client::TxnClient;

/// The client's limits, from the node's configuration (the simulator uses the defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// The largest value a write may store (`limits.value_max_bytes`).
    pub value_max_bytes: usize,
    /// The largest reply a batch may produce (`limits.reply_max_bytes`): past it the batch is
    /// refused and the connection closed.
    pub reply_max_bytes: usize,
    /// The most key and value bytes one transaction may write (half a peer frame: the prepare
    /// must fit in one).
    pub txn_max_bytes: usize,
    /// Attempts of one batch that conflicts with other transactions before the client hears of it.
    pub conflict_retries_max: u32,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            value_max_bytes: 4 << 20,
            reply_max_bytes: 256 << 20,
            txn_max_bytes: 32 << 20,
            conflict_retries_max: 16,
        }
    }
}

/// The first back-off after a conflict; each further one doubles, up to [`BACKOFF_MAX_US`].
pub const BACKOFF_MIN_US: u64 = 500;
pub const BACKOFF_MAX_US: u64 = 50_000;

#[cfg(test)]
mod tests;
