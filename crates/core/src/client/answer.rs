//! What the near's answers mean to the client: a read's value, a commit, a conflict worth another
//! attempt, or the error the client hears — in Redis's words where Redis has them.

use super::run::AttemptOutcome;
use crate::ids::{Key, Value, Version};
use crate::io::{Element, Member, Response, ScanCursor};
use crate::message::AbortReason;

/// No answer within the client's time-out.
pub const TIMED_OUT: &str =
    "ERR timed out waiting for the cluster (a write may or may not have committed; a read can be retried)";
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's words for a command on a key of another type.
pub const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// A primary refused a value past its limit (`limits.value_max_bytes`).
pub const VALUE_TOO_LARGE: &str = "ERR string exceeds maximum allowed size (limits.value_max_bytes)";

/// A primary's host is at its memory limit (Redis's words under `noeviction`).
pub const OUT_OF_MEMORY: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A commit's answer that is not a commit.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// Another transaction was in the way: worth another attempt (why, for the trace).
    Conflict(String),
    /// The client hears this error; `AttemptOutcome` says whether the attempt may have committed.
    Error(String, AttemptOutcome),
}

/// The error reply a client hears, in Redis's words (the code first: `ERR`, `TRYAGAIN`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReply(pub String);

/// What a read answered: the key's value, version and deadline, and its primary's clock; for a
/// collection's read, the elements picked and where a page goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub value: Option<Value>,
    pub version: Version,
    pub deadline_ms: Option<u64>,
    pub now_ms: u64,
    pub elements: Vec<Element>,
    pub next: Option<Member>,
}

/// A read's answer, or the error the client hears.
pub fn read(answer: Option<Response>) -> Result<Read, ErrorReply> {
    match answer {
        Some(Response::Value { value, version, deadline_ms, now_ms }) => {
            Ok(Read { value, version, deadline_ms, now_ms, elements: vec![], next: None })
        }
        Some(Response::Elements { value, version, deadline_ms, now_ms, elements, next }) => {
            Ok(Read { value, version, deadline_ms, now_ms, elements, next })
        }
        Some(Response::Unavailable { why }) => Err(ErrorReply(unavailable(why))),
        Some(other) => Err(ErrorReply(format!("ERR unexpected response {other:?}"))),
        None => Err(ErrorReply(TIMED_OUT.into())),
    }
}

/// A scan page's answer: its keys and where the scan goes on, or the error the client hears.
pub fn keys(answer: Option<Response>) -> Result<(Vec<Key>, Option<ScanCursor>), ErrorReply> {
    match answer {
        Some(Response::Keys { keys, next }) => Ok((keys, next)),
        Some(Response::Unavailable { why }) => Err(ErrorReply(unavailable(why))),
        Some(other) => Err(ErrorReply(format!("ERR unexpected response {other:?}"))),
        None => Err(ErrorReply(TIMED_OUT.into())),
    }
}

/// A commit's answer that is not `Committed`.
pub fn failure(answer: Option<Response>) -> Failure {
    let show = |k: &Key| String::from_utf8_lossy(k).into_owned();
    let conflict = |why: String| Failure::Conflict(why);
    let aborted = |e: &str| Failure::Error(e.into(), AttemptOutcome::Aborted);
    let Some(response) = answer else {
        return Failure::Error(TIMED_OUT.into(), AttemptOutcome::Unknown);
    };
    match response {
        Response::Aborted { reason, .. } => match reason {
            AbortReason::LockConflict { key } => conflict(format!("lock conflict on '{}'", show(&key))),
            AbortReason::WatchFailed { key } => conflict(format!("'{}' changed", show(&key))),
            AbortReason::PresumedAbort => conflict("aborted by recovery".into()),
            AbortReason::SnapshotOrder { key } => {
                conflict(format!("'{}' is on the other side of a snapshot", show(&key)))
            }
            AbortReason::CutMarkerWritten => conflict("a blocking snapshot was being written".into()),
            AbortReason::StalePlacement => conflict("a partition moved to another replica".into()),
            AbortReason::FailingOver => conflict("a partition is failing over".into()),
            AbortReason::Timeout => {
                aborted("ERR transaction aborted: a participant did not answer in time (nothing was written)")
            }
            AbortReason::NotAnInteger { .. } => aborted(NOT_AN_INTEGER),
            AbortReason::ValueTooLarge { .. } => aborted(VALUE_TOO_LARGE),
            AbortReason::OutOfMemory => aborted(OUT_OF_MEMORY),
            AbortReason::WrongType { .. } => aborted(WRONG_TYPE),
            AbortReason::CollectionTooLarge { key } => aborted(&format!(
                "ERR '{}' holds more than {} elements, which Waymark does not drop in one transaction: remove them in \
                 batches first (HDEL, SREM, SPOP)",
                show(&key),
                crate::collection::DROP_INLINE_MAX
            )),
        },
        Response::Unknown { .. } => Failure::Error(
            "ERR the outcome of this transaction is unknown: a replica did not answer in time; read the keys to find out"
                .into(),
            AttemptOutcome::Unknown,
        ),
        Response::Unavailable { why } => Failure::Error(unavailable(why), AttemptOutcome::Aborted),
        other => Failure::Error(format!("ERR unexpected response {other:?}"), AttemptOutcome::Unknown),
    }
}

/// Redis Cluster's `-TRYAGAIN` (retry in a moment) and Redis's `-NOREPLICAS` (too few replicas
/// to write: `min_copies`) pass as they are: clients know them.
fn unavailable(why: &str) -> String {
    if why.starts_with("TRYAGAIN") || why.starts_with("NOREPLICAS") {
        why.to_string()
    } else {
        format!("ERR unavailable: {why}")
    }
}
