//! Property (real-time order): for every successful cut, if T1's commit acknowledgement reached its
//! client before T2 was sent (by any client), then "T2 restored and T1 not" never happens.

use super::Violation;
use crate::world::World;
use std::collections::BTreeSet;
use waymark_core::TxId;

/// Checks one cut, given the transactions it restores.
pub fn check_cut(w: &World, cut: waymark_core::CutId, restored: &BTreeSet<&TxId>) -> Vec<Violation> {
    let writers = || w.history.committed().filter(|t| !t.written.is_empty() && t.tx.is_some());
    // The earliest-acknowledged transaction the cut leaves out…
    let Some(t1) =
        writers().filter(|t| !restored.contains(t.tx.as_ref().expect("filtered"))).min_by_key(|t| t.completed_us)
    else {
        return vec![];
    };
    // …and any transaction sent after that acknowledgement that the cut keeps.
    writers()
        .filter(|t2| t2.invoked_us > t1.completed_us && restored.contains(t2.tx.as_ref().expect("filtered")))
        .take(1)
        .map(|t2| Violation {
            checker: "real-time",
            message: format!(
                "{cut}: {} (client {}) was acknowledged at {}us and is not restored, but {} (client {}) sent at {}us after it is",
                t1.tx.as_ref().expect("filtered"),
                t1.client,
                t1.completed_us,
                t2.tx.as_ref().expect("filtered"),
                t2.client,
                t2.invoked_us
            ),
        })
        .collect()
}
