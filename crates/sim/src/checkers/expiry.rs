//! No read returns a value past its deadline (issue 34, `waymark_core::expiry`): a primary tells
//! nobody of a key's expiry before the delete is committed, and never serves the value once its
//! deadline has passed by its expiry clock — here every vnode's clock is the simulation's.
//!
//! Judged conservatively, by when the read was *invoked*: a read sent at or after the deadline of
//! the value it returned (by the committed write that made that version) was answered after it.
//! The same for a committed transaction that read a key: its reads were validated at its commit,
//! after it began.

use super::{Checker, Violation};
use crate::history::Observation;
use crate::world::World;
use std::collections::BTreeMap;
use waymark_core::{Key, Version};

pub const CHECKER: Checker = Checker {
    name: "expiry",
    property: "no read, and no committed transaction's read, returns a value whose deadline had passed when it \
               was invoked",
};

pub fn check(w: &World) -> Vec<Violation> {
    // (key, version) → the deadline of the value the committed write gave it.
    let mut deadlines: BTreeMap<(&Key, Version), u64> = BTreeMap::new();
    for t in w.history.committed() {
        for r in t.written.iter().filter(|r| r.value.is_some()) {
            if let Some(at) = r.deadline_ms {
                deadlines.insert((&r.key, r.version), at);
            }
        }
    }
    let mut out = vec![];
    let mut judge = |key: &Key, version: Version, invoked_us: u64, who: String| {
        if let Some(at) = deadlines.get(&(key, version)).filter(|at| invoked_us >= **at * 1_000) {
            let key = String::from_utf8_lossy(key);
            let evidence = format!(
                "{who} invoked at {invoked_us} µs read {key} at version {version}, whose value expired at {at} ms"
            );
            out.push(CHECKER.violation(evidence));
        }
    };
    for o in &w.history.observed {
        if let Observation::Read { key, version } = &o.what {
            judge(key, *version, o.invoked_us, format!("a GET of client {}", o.client));
        }
    }
    for t in w.history.committed() {
        for r in &t.reads {
            judge(&r.key, r.version, t.invoked_us, format!("{:?} of client {}", t.tx, t.client));
        }
    }
    out
}
