//! The directional reachability graph (seed 004 point 7; DESIGN §6: "several physical paths"),
//! invisible outside this module. Every heartbeat tick a vnode tells its neighbours (parent,
//! children, siblings) whom it heard from directly; an edge X → Y means "Y heard X". When this
//! vnode's own link to a tree neighbour looks dead in either direction, a tree message to it is
//! also sent through up to two neighbours that hear both ends, as `Relay`. The logical path — who
//! confirms to whom — stays the tree; relays only carry messages, one hop, never further.

use super::io::{AlterMsg, Relayed};
use super::node::AlterNode;
use crate::ids::VnodeId;
use std::collections::BTreeMap;

const RELAYS_MAX: usize = 2;

/// This vnode's view of the reachability graph.
#[derive(Debug, Default)]
pub(super) struct ReachState {
    /// When each vnode was last heard from directly.
    heard_us: BTreeMap<VnodeId, u64>,
    /// What each neighbour last reported hearing, and when.
    reported: BTreeMap<VnodeId, Report>,
    /// Messages sent through a relay.
    relayed: u64,
}

/// A neighbour's report of whom it heard from directly.
#[derive(Debug)]
struct Report {
    at_us: u64,
    hears: Vec<VnodeId>,
}

impl ReachState {
    /// A message arrived from `from` over a direct link (for a relayed one, `from` is the relay,
    /// not the origin: only the link it came over is known to work).
    pub(super) fn heard(&mut self, from: &VnodeId, at_us: u64) {
        self.heard_us.insert(from.clone(), at_us);
    }
}

impl AlterNode {
    fn recent(&self, at_us: u64) -> bool {
        self.now_us.saturating_sub(at_us) <= self.cfg.heartbeat_timeout_us
    }

    /// Whom this vnode heard from directly, recently.
    fn hears(&self) -> Vec<VnodeId> {
        self.reach.heard_us.iter().filter(|(_, at)| self.recent(**at)).map(|(v, _)| v.clone()).collect()
    }

    /// `y` recently reported hearing `x`.
    fn reports_hearing(&self, y: &VnodeId, x: &VnodeId) -> bool {
        self.reach.reported.get(y).is_some_and(|r| self.recent(r.at_us) && r.hears.contains(x))
    }

    pub(super) fn neighbours(&self) -> Vec<VnodeId> {
        let mut n: Vec<VnodeId> = self.cfg.parents.iter().chain(self.failover.secondary.iter()).cloned().collect();
        n.extend(self.children_seen_us.keys().cloned());
        n.extend(self.cfg.siblings.iter().filter(|s| **s != self.cfg.id).cloned());
        n.sort();
        n.dedup();
        n
    }

    /// On every heartbeat tick: tell the neighbours whom this vnode hears.
    pub(super) fn announce_reach(&mut self) {
        let hears = self.hears();
        for n in self.neighbours() {
            self.push_send(&n, AlterMsg::Reach { hears: hears.clone() });
        }
    }

    pub(super) fn on_reach(&mut self, from: VnodeId, hears: Vec<VnodeId>) {
        self.reach.reported.insert(from, Report { at_us: self.now_us, hears });
    }

    /// Sends a tree message to `to`, around a dead link when the graph shows one.
    pub(super) fn route(&mut self, to: &VnodeId, msg: AlterMsg) {
        let me = self.cfg.id.clone();
        let direct = to == &me
            || (self.reach.heard_us.get(to).is_some_and(|at| self.recent(*at)) && self.reports_hearing(to, &me))
            || !self.reach.reported.contains_key(to);
        if !direct {
            let relays: Vec<VnodeId> = self
                .neighbours()
                .into_iter()
                .filter(|y| y != to && self.reports_hearing(y, &me) && self.reports_hearing(y, to))
                .take(RELAYS_MAX)
                .collect();
            // Encoded once for every relay, and only when there is one.
            let wrapped = if relays.is_empty() { None } else { Relayed::wrap(&msg) };
            if let Some(wrapped) = wrapped {
                for y in relays {
                    self.reach.relayed += 1;
                    self.push_send(&y, AlterMsg::Relay { to: to.clone(), origin: me.clone(), msg: wrapped.clone() });
                }
            }
        }
        self.push_send(to, msg);
    }

    /// A relayed message: deliver it if it is for this vnode, else pass it on (one hop only).
    /// One that does not open (undecodable, or a relay in a relay) is dropped.
    pub(super) fn on_relay(&mut self, to: VnodeId, origin: VnodeId, msg: Relayed) {
        if to == self.cfg.id {
            if let Some(msg) = msg.open() {
                self.on_message(origin, msg);
            }
            return;
        }
        self.push_send(&to, AlterMsg::Relay { to: to.clone(), origin, msg });
    }

    /// Messages this vnode sent through a relay (for the simulator's summary).
    pub fn relayed(&self) -> u64 {
        self.reach.relayed
    }
}
