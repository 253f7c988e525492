//! Real-time order of a declared cut. A client observes T1 by its commit acknowledgement, a GET
//! returning a version T1 wrote, or a `WATCH` failing because T1 wrote the watched key after the
//! client read it.

use super::{Checker, LogFacts, Violation};
use crate::history::{ClientTxn, Observation};
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::{CutId, TxId};

pub const CHECKER: Checker = Checker {
    name: "real-time",
    property: "for every successful cut, if a client observed T1 before T2 was sent (by any client), then \
               \"T2 restored and T1 not\" never happens",
};

/// When and how a client first learnt of a committed transaction.
struct Seen<'a> {
    tx: &'a TxId,
    at_us: u64,
    how: String,
}

/// Checks one cut, given the transactions it restores.
pub fn check_cut(w: &World, facts: &LogFacts, cut: CutId, restored: &BTreeSet<&TxId>) -> Vec<Violation> {
    // The earliest observation of a transaction the cut leaves out…
    let Some(t1) = observations(w, facts).filter(|s| !restored.contains(s.tx)).min_by_key(|s| s.at_us) else {
        return vec![];
    };
    // …and any transaction sent after it that the cut keeps.
    let writers = w.history.txns.iter().filter(|t| !t.writes.is_empty());
    let kept = |t: &&ClientTxn| t.tx.as_ref().is_some_and(|tx| restored.contains(tx));
    writers
        .filter(|t2| t2.invoked_us > t1.at_us)
        .find(kept)
        .map(|t2| {
            CHECKER.violation(format!(
                "{cut}: {} was {} at {}us and is not restored, but {} (client {}) sent at {}us after it is",
                t1.tx,
                t1.how,
                t1.at_us,
                t2.tx.as_ref().expect("kept"),
                t2.client,
                t2.invoked_us
            ))
        })
        .into_iter()
        .collect()
}

/// Every moment a client learnt that a transaction had committed.
fn observations<'a>(w: &'a World, facts: &'a LogFacts) -> impl Iterator<Item = Seen<'a>> + 'a {
    let acks = w.history.committed().filter(|t| !t.written.is_empty()).filter_map(|t| {
        let how = format!("acknowledged to client {}", t.client);
        Some(Seen { tx: t.tx.as_ref()?, at_us: t.completed_us, how })
    });
    let seen = w.history.observed.iter().filter_map(move |o| {
        let (key, version, how) = match &o.what {
            Observation::Read { key, version } => (key, *version, "read"),
            Observation::WatchFailed { key, read_version } => (key, read_version + 1, "behind a failed WATCH of"),
        };
        let tx = facts.writer(key, version)?;
        let key = String::from_utf8_lossy(key);
        Some(Seen { tx, at_us: o.at_us, how: format!("{how} {key}@{version} by client {}", o.client) })
    });
    acks.chain(seen)
}
