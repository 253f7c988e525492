//! Replies to clients against the logs, in a state where every request has been answered (the
//! explorer's terminal states: nothing fails and every schedule completes).

use super::{copies, Checker, Cluster, LogFacts, Violation};
use std::collections::BTreeMap;
use waymark_core::{Request, Response, TxId};

pub const CHECKER: Checker = Checker {
    name: "replies",
    property: "every client request gets exactly one reply, a cut request is answered ok, and a transaction \
               reported committed is committed on every copy it wrote, one reported aborted on none",
};

/// `answered`: every request, with the replies it got.
pub fn check(c: &impl Cluster, facts: &LogFacts, answered: &[(&Request, &[Response])]) -> Vec<Violation> {
    let mut out = vec![];
    let mut told: BTreeMap<&TxId, bool> = BTreeMap::new();
    for (i, (request, replies)) in answered.iter().enumerate() {
        match (request, replies) {
            (Request::Txn { .. }, [Response::Committed { tx, .. }]) => drop(told.insert(tx, true)),
            (Request::Txn { .. }, [Response::Aborted { tx: Some(tx), .. }]) => drop(told.insert(tx, false)),
            (Request::Txn { .. }, [Response::Aborted { tx: None, .. }]) => {}
            (Request::Cut, [Response::CutDone { ok: true, .. }]) => {}
            _ => out.push(CHECKER.violation(format!("request #{} got replies {replies:?}", i + 1))),
        }
    }
    for (tx, committed) in told {
        let (on, off): (Vec<_>, Vec<_>) =
            facts.copies_of(c, tx).into_iter().partition(|(n, k)| facts.committed_on(*n, tx, k));
        match committed {
            true if !off.is_empty() => {
                out.push(CHECKER.violation(format!("{tx} reported committed, missing on {}", copies(c, &off))))
            }
            false if !on.is_empty() => {
                out.push(CHECKER.violation(format!("{tx} reported aborted, committed on {}", copies(c, &on))))
            }
            _ => {}
        }
    }
    out
}
