//! Reads never go back: once a GET of a key was answered, a GET of it sent afterwards — by any
//! client, on any vnode, across crashes — returns that version or a later one. A value a client
//! was shown is never lost, even when its writer's acknowledgement never arrived
//! (`--break reads-before-commit-durable`: a 1PC first committer that answers a read before the
//! commit it reads is durable, then crashes and forgets it).

use super::{Checker, Violation};
use crate::history::{Observation, Observed};
use crate::world::World;
use std::collections::BTreeMap;
use waymark_core::{Key, Version};

pub const CHECKER: Checker = Checker {
    name: "read-monotonic",
    property: "a GET sent after another GET of the same key was answered returns that answer's version or a later one",
};

/// A GET's answer: who asked, when it was sent and answered, and the version it returned.
struct Answered<'a> {
    observed: &'a Observed,
    version: Version,
}

pub fn check(w: &World) -> Vec<Violation> {
    let mut by_key: BTreeMap<&Key, Vec<Answered>> = BTreeMap::new();
    for o in &w.history.observed {
        if let Observation::Read { key, version } = &o.what {
            by_key.entry(key).or_default().push(Answered { observed: o, version: *version });
        }
    }
    let mut out = vec![];
    for (key, reads) in by_key {
        out.extend(going_back(key, reads));
    }
    out
}

/// Each read against the newest version answered before it was sent.
fn going_back(key: &Key, mut reads: Vec<Answered>) -> Option<Violation> {
    reads.sort_by_key(|r| r.observed.at_us);
    let mut by_sent: Vec<&Answered> = reads.iter().collect();
    by_sent.sort_by_key(|r| r.observed.invoked_us);
    // Walks the reads by when they were sent, taking in every answer that came before.
    let mut answered = reads.iter().peekable();
    let mut newest: Option<&Answered> = None;
    for r in by_sent {
        while let Some(a) = answered.next_if(|a| a.observed.at_us < r.observed.invoked_us) {
            if newest.is_none_or(|n| a.version > n.version) {
                newest = Some(a);
            }
        }
        if let Some(n) = newest.filter(|n| n.version > r.version) {
            return Some(CHECKER.violation(format!(
                "client {} was answered version {} of {} at {}us; client {} sent a GET of it at {}us and read \
                 version {}",
                n.observed.client,
                n.version,
                String::from_utf8_lossy(key),
                n.observed.at_us,
                r.observed.client,
                r.observed.invoked_us,
                r.version
            )));
        }
    }
    None
}
