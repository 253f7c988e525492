//! Workloads: what clients ask for. A workload plans an operation, then gives its batches of
//! Redis commands one after another — `WATCH`, a command, `MULTI … EXEC` — each chosen from the
//! answer to the one before, as an application using Redis would.

pub mod append;
pub mod bank;
pub mod expiry;
pub mod hash;
pub mod lists;
pub mod sets;

use rand_chacha::ChaCha8Rng;
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, ScanCursor, Value};
use waymark_resp::Reply;

/// One client operation: the keys and numbers its batches are built from.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: &'static str,
    pub read_keys: Vec<Key>,
    /// Per-plan data the workload needs to build the writes (amount, elements, …).
    pub params: Vec<i64>,
    pub target_keys: Vec<Key>,
}

/// What a client sends as one unit to the transaction client.
#[derive(Clone, Debug, PartialEq)]
pub enum Batch {
    Watch(Vec<Key>),
    Command(DataCmd),
    /// `MULTI`, the commands, `EXEC`.
    Exec(Vec<DataCmd>),
    /// A page of a scan of the keyspace (`--scans`).
    Scan(ScanCursor),
    /// A blocking command (`BLPOP`, …) with its time-out in milliseconds.
    Blocking(DataCmd, u64),
}

/// The batch a plan runs next, labelled for the history (`kind` of its transactions).
pub type Next = Option<(&'static str, Batch)>;

pub trait Workload {
    /// The keys and values one `MSET` sets up before the clients start.
    fn setup(&self) -> Vec<(Key, Value)>;
    fn plan(&mut self, client: usize, rng: &mut ChaCha8Rng) -> Plan;
    /// The batch after the `done` batches of `plan` already run (`last`: the answer to the last
    /// one); `None` when the operation is over.
    fn next(&mut self, plan: &Plan, done: usize, last: Option<&Answer>) -> Next;
}

pub fn parse_i64(v: &Option<Value>) -> i64 {
    v.as_deref().and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The values of a reply to `GET` or `MGET` (`None` for a key without one), or `None` if the
/// answer is not such a reply.
pub fn values_of(answer: Option<&Answer>) -> Option<Vec<Option<Value>>> {
    let Some(Answer::Replies(replies)) = answer else { return None };
    let value = |r: &Reply| match r {
        Reply::Bulk(v) => Some(Some(v.clone())),
        Reply::Null => Some(None),
        _ => None,
    };
    match replies.first()? {
        Reply::Array(items) => items.iter().map(value).collect(),
        single => Some(vec![value(single)?]),
    }
}
