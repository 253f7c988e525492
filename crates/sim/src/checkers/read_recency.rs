//! Read recency: reads are linearizable, no read goes back in time.
//!
//! The acknowledgement may come from the first committer before the key's primary has heard of the
//! decision, so a primary that answers from its committed store at once breaks this
//! (`--break reads-ignore-prepared`).

use super::{Checker, Violation};
use crate::history::Observation;
use crate::world::World;
use std::collections::BTreeMap;
use waymark_core::{Key, TxId, Version};

pub const CHECKER: Checker = Checker {
    name: "read-recency",
    property: "a GET sent after a client was told that a write to its key committed returns that write's \
               version or a later one",
};

/// A write some client was told committed: when, and which version it gave its key.
struct Acked {
    at_us: u64,
    version: Version,
    tx: Option<TxId>,
}

pub fn check(w: &World) -> Vec<Violation> {
    let acked = acknowledged_writes(w);
    let mut out = vec![];
    for o in &w.history.observed {
        let Observation::Read { key, version } = &o.what else { continue };
        let Some(acks) = acked.get(key) else { continue };
        // Acks are sorted by time: the newest version acknowledged before the read was sent.
        let before = acks.iter().take_while(|a| a.at_us < o.invoked_us).max_by_key(|a| a.version);
        if let Some(a) = before.filter(|a| a.version > *version) {
            let tx = a.tx.as_ref().map_or("?".into(), |t| t.to_string());
            out.push(CHECKER.violation(format!(
                "client {} sent GET {} at {}us and read version {version}, but {tx} was acknowledged at {}us \
                     with version {}",
                o.client,
                String::from_utf8_lossy(key),
                o.invoked_us,
                a.at_us,
                a.version
            )));
        }
    }
    out
}

fn acknowledged_writes(w: &World) -> BTreeMap<Key, Vec<Acked>> {
    let mut by_key: BTreeMap<Key, Vec<Acked>> = BTreeMap::new();
    for t in w.history.committed() {
        for write in &t.written {
            let ack = Acked { at_us: t.completed_us, version: write.version, tx: t.tx.clone() };
            by_key.entry(write.key.clone()).or_default().push(ack);
        }
    }
    for acks in by_key.values_mut() {
        acks.sort_by_key(|a| a.at_us);
    }
    by_key
}
