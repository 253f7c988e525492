//! The lease: how long a copy of the metadata counts as the cluster's (`synced`, `fresh`), and
//! the echoed stamps that date it.
//!
//! A vnode serves only while its copy is fresh, so that one cut off from its parent stops before
//! a replica can be promoted in its place (`txn::promotion`, `alter::promote`). Freshness must be
//! dated by when the parent's word was *given*, never by when it arrived: a heartbeat held by the
//! network for a second and delivered to a vnode that was cut off meanwhile said nothing about the
//! cluster of now (simulator seed 54, append, 16 clients: an isolated vnode's lease was renewed by
//! such heartbeats and it served a stale GET).
//!
//! So every heartbeat and every `Alive` carries the sender's clock (`sent_us`) and echoes the last
//! stamp it received from the other end (`echo_us`), and a parent answers each `Alive` at once
//! with a heartbeat (its periodic one goes only to children it has not answered within the
//! interval). A child counts itself synced as of the stamp its parent echoes — a time on its own
//! clock before the parent's heartbeat was sent, however long that heartbeat travelled, and
//! about one round trip ago when nothing was held; a root counts a voter heard as of the newest
//! of its own stamps that voter echoed (about an interval ago: the voter echoes in its next
//! `Alive`). Each end compares only stamps of its own clock: no clocks are compared
//! across hosts, only their rates (a lease of half a second tolerates any plausible drift).

use super::node::AlterNode;
use crate::ids::VnodeId;
use std::collections::{BTreeMap, BTreeSet};

/// The stamps this vnode exchanges with its parent and children.
#[derive(Debug, Default)]
pub(super) struct Stamps {
    /// The parent's clock in the last heartbeat heard from it, echoed in the next `Alive` to it.
    parent: Option<(VnodeId, u64)>,
    /// Each child's clock in the last `Alive` heard from it, echoed in the next heartbeat to it.
    children: BTreeMap<VnodeId, u64>,
    /// Per child, the newest of this vnode's own stamps it echoed: when it was last heard in
    /// answer to something this vnode sent. Invariant: never above `now_us`, never decreases.
    echoed: BTreeMap<VnodeId, u64>,
    /// When this vnode last sent each child a heartbeat.
    answered: BTreeMap<VnodeId, u64>,
}

impl AlterNode {
    /// Whether this vnode's copy of the metadata was as new as a fresh parent's within its lease,
    /// half a heartbeat timeout: a store vnode that was down, or is cut off from its parent, may
    /// route by a placement that changed meanwhile, and serves nothing until it has caught up
    /// (`txn::promotion`). Why half the timeout: a parent reports a child down only after a whole
    /// timeout of silence, and a promotion waits half a timeout per level of the tree after the
    /// host is recorded dead (`alter::promote`), so a vnode stops serving before any replica can
    /// take its place. A root has no parent: always.
    pub fn synced(&self) -> bool {
        self.cfg.parents.is_empty()
            || self.synced_us.is_some_and(|at| self.now_us.saturating_sub(at) <= self.lease_us())
    }

    fn lease_us(&self) -> u64 {
        match self.cfg.breaks.long_lease {
            true => 100 * self.cfg.heartbeat_timeout_us,
            false => self.cfg.heartbeat_timeout_us / 2,
        }
    }

    /// Whether a voter's echo of this root's stamp `at_us` is recent enough to count it as
    /// following this root. The echo comes back with the voter's next `Alive`, so it is up to an
    /// interval (and a round trip) old when it arrives: the window is half a timeout plus an
    /// interval (half a timeout alone lapsed between every two echoes, and a root of four voters
    /// was fresh too seldom for its vnodes to serve: `--seed 335 --vnodes 4 --fanout 4
    /// --failover`). Safe while it is under a whole timeout: a voter promises itself to another
    /// root only after a whole timeout without hearing this one, so every voter counted here was
    /// still this root's when it answered.
    fn lately(&self, at_us: u64) -> bool {
        let window_us = self.cfg.heartbeat_timeout_us / 2 + self.cfg.heartbeat_interval_us;
        assert!(window_us < self.cfg.heartbeat_timeout_us, "a heartbeat interval of half a timeout or more");
        self.now_us.saturating_sub(at_us) <= window_us
    }

    /// Whether this copy of the metadata is known to be the cluster's lately: at a root, one that
    /// orders in a term and heard a majority of its voters answer lately (a root cut off from them
    /// may have been replaced); elsewhere, caught up with a fresh parent lately (`synced`). Each
    /// level of the tree adds at most half a heartbeat timeout of staleness, so below a root of
    /// height `h` a copy is never staler than `h` half-timeouts, while a promotion waits that long
    /// and a heartbeat interval more after the metadata records the host dead (`alter::promote`).
    pub fn fresh(&self) -> bool {
        if !self.is_root() {
            return self.synced();
        }
        let heard: BTreeSet<VnodeId> =
            self.stamps.echoed.iter().filter(|(_, at)| self.lately(**at)).map(|(c, _)| c.clone()).collect();
        self.lead_term().is_some() && self.quorum(&heard)
    }

    /// The parent `from` said, at `echo_us` of this vnode's clock or later, that its copy is
    /// fresh and as new as ours: synced as of `echo_us`, not as of now.
    pub(super) fn note_synced(&mut self, echo_us: Option<u64>) {
        // None: it has not heard us yet, nothing dates its word. A stamp ahead of our clock (a peer's
        // bug, or our clock stepped back across a restart) dates nothing either.
        let Some(at) = echo_us.filter(|at| *at <= self.now_us) else { return };
        self.synced_us = Some(self.synced_us.map_or(at, |s| s.max(at)));
    }

    /// A heartbeat's stamp, kept to echo when it came from the parent this vnode follows.
    pub(super) fn note_parent_stamp(&mut self, from: &VnodeId, sent_us: u64) {
        if self.parent() == Some(from) {
            self.stamps.parent = Some((from.clone(), sent_us));
        }
    }

    /// An `Alive`'s stamps: the child's, to echo; ours it echoed, to date the child's answer.
    pub(super) fn note_child_stamps(&mut self, from: &VnodeId, sent_us: u64, echo_us: Option<u64>) {
        let kept = self.stamps.children.entry(from.clone()).or_insert(sent_us);
        *kept = (*kept).max(sent_us);
        if let Some(at) = echo_us.filter(|at| *at <= self.now_us) {
            let echoed = self.stamps.echoed.entry(from.clone()).or_insert(at);
            *echoed = (*echoed).max(at);
        }
    }

    pub(super) fn note_answered(&mut self, child: &VnodeId) {
        self.stamps.answered.insert(child.clone(), self.now_us);
    }

    /// Whether `child` had a heartbeat within the last interval (the answer to its `Alive`): the
    /// periodic one would only repeat it.
    pub(super) fn answered_lately(&self, child: &VnodeId) -> bool {
        let at = self.stamps.answered.get(child);
        at.is_some_and(|at| self.now_us.saturating_sub(*at) < self.cfg.heartbeat_interval_us)
    }

    /// What to echo in a heartbeat to `child`.
    pub(super) fn echo_to_child(&self, child: &VnodeId) -> Option<u64> {
        self.stamps.children.get(child).copied()
    }

    /// What to echo in an `Alive` to `parent`: its last stamp, if it was heard as our parent.
    pub(super) fn echo_to_parent(&self, parent: &VnodeId) -> Option<u64> {
        self.stamps.parent.as_ref().filter(|(p, _)| p == parent).map(|(_, at)| *at)
    }
}
