//! Parent failover (seed 004, consistency points 1–3): when a parent dies its children elect an *assisting child*
//! (bully election: the first child in priority order that is alive), which starts a *secondary
//! parent* on its own host from its copy of the metadata; its siblings follow it. When the primary
//! parent comes back it heartbeats its children, they switch back, and the secondary parent stops
//! (its assisting child stops it; a secondary left without children stops itself).
//!
//! The root's children fail over the same way; the secondary root then has to win a term from a
//! majority of the voters before it orders anything (`root.rs`).

use super::io::{AlterMsg, AlterOutput, AlterTimer};
use super::metadata::Md5Sum;
use super::node::AlterNode;
use super::order::{MetaVersion, Term};
use crate::ids::VnodeId;

/// Which parent this vnode follows, and the election and secondary parent of a failover.
#[derive(Debug, Default)]
pub(super) struct FailoverState {
    /// When the primary parent was last heard from.
    pub(super) primary_seen_us: u64,
    /// The secondary parent this vnode follows while its primary parent is dead.
    pub(super) secondary: Option<VnodeId>,
    pub(super) secondary_seen_us: u64,
    /// Invariant: `None` while a secondary is followed (`follow_secondary`, `switch_back`).
    pub(super) election: Option<Election>,
    /// The secondary parent this vnode's host runs as assisting child.
    pub(super) assisting: Option<VnodeId>,
}

#[derive(Debug, Hash)]
pub(super) struct Election {
    /// A sibling placed before this one answered: it takes over.
    deferred: bool,
}

impl AlterNode {
    pub(super) fn silent(&self, seen_us: u64) -> bool {
        self.now_us.saturating_sub(seen_us) > self.cfg.heartbeat_timeout_us
    }

    fn rank(&self, v: &VnodeId) -> usize {
        self.cfg.siblings.iter().position(|s| s == v).unwrap_or(usize::MAX)
    }

    /// The name a secondary parent of `of` gets on this vnode's host.
    pub fn secondary_name(of: &VnodeId, host: &str) -> VnodeId {
        VnodeId::new(format!("{}-secondary", of.kind), host)
    }

    /// On every heartbeat tick: notice a dead parent, or (as a secondary) an empty branch.
    pub(super) fn check_parents(&mut self) {
        let f = &self.failover;
        assert!(f.secondary.is_none() || f.election.is_none(), "an election while a secondary is followed");
        if self.cfg.secondary_of.is_some() && self.children_seen_us.values().all(|s| self.silent(*s)) {
            let id = self.cfg.id.clone();
            return self.out.push(AlterOutput::StopSecondaryParent { id });
        }
        if self.failover.secondary.is_some() && self.silent(self.failover.secondary_seen_us) {
            self.failover.secondary = None; // the secondary died too: elect again below
        }
        let primary_dead = !self.cfg.parents.is_empty() && self.silent(self.failover.primary_seen_us);
        if primary_dead && self.cfg.failover && self.failover.secondary.is_none() && self.failover.election.is_none() {
            self.start_election();
        }
    }

    fn start_election(&mut self) {
        self.failover.election = Some(Election { deferred: false });
        let me = self.rank(&self.cfg.id);
        let better: Vec<VnodeId> = self.cfg.siblings.iter().take(me).cloned().collect();
        for s in &better {
            self.send(s, AlterMsg::Elect);
        }
        self.timer(AlterTimer::Election, self.cfg.heartbeat_interval_us);
    }

    pub(super) fn on_elect(&mut self, from: &VnodeId) {
        if self.rank(&self.cfg.id) > self.rank(from) {
            return;
        }
        if let Some(parent) = self.failover.assisting.clone() {
            return self.send(from, AlterMsg::SecondaryAt { parent });
        }
        self.send(from, AlterMsg::Defer);
        let primary_dead = self.silent(self.failover.primary_seen_us);
        if primary_dead && self.failover.secondary.is_none() && self.failover.election.is_none() {
            self.start_election();
        }
    }

    pub(super) fn on_defer(&mut self) {
        if let Some(e) = self.failover.election.as_mut() {
            e.deferred = true;
        }
    }

    pub(super) fn on_election_timeout(&mut self) {
        let Some(e) = self.failover.election.take() else { return };
        if !self.silent(self.failover.primary_seen_us) || self.failover.secondary.is_some() {
            return; // the primary came back, or a secondary was found meanwhile
        }
        if e.deferred {
            return self.start_election(); // a better sibling is alive: wait for its secondary
        }
        let of = self.cfg.parents[0].clone();
        let id = Self::secondary_name(&of, &self.cfg.id.host);
        self.failover.assisting = Some(id.clone());
        let (metadata, term) = (self.metadata.clone(), self.root.term);
        self.out.push(AlterOutput::StartSecondaryParent { id: id.clone(), of, metadata, term });
        let siblings: Vec<VnodeId> = self.cfg.siblings.iter().filter(|s| **s != self.cfg.id).cloned().collect();
        for s in &siblings {
            self.send(s, AlterMsg::SecondaryAt { parent: id.clone() });
        }
        self.follow_secondary(id);
    }

    pub(super) fn follow_secondary(&mut self, parent: VnodeId) {
        if !self.silent(self.failover.primary_seen_us) {
            return;
        }
        self.failover.election = None;
        self.failover.secondary = Some(parent.clone());
        self.failover.secondary_seen_us = self.now_us;
        self.send_alive(&parent);
    }

    /// The primary parent's heartbeat: switch back to it (and stop the secondary we run) — a
    /// primary root only once it won a term at least ours, else it is told ours; compare metadata
    /// with the parent we follow and fetch it when ours differs and is older. `fresh`: the parent
    /// counts its copy fresh, and echoed this stamp of ours (`lease.rs`).
    pub(super) fn on_heartbeat(
        &mut self,
        from: &VnodeId,
        version: MetaVersion,
        md5: Md5Sum,
        lead: Option<Term>,
        fresh: Option<u64>,
    ) {
        let away = self.failover.secondary.is_some() || self.failover.election.is_some();
        if self.cfg.parents.first() == Some(from) && away {
            match lead {
                None => self.switch_back(),
                Some(term) if term > Term::ZERO && term >= self.root.term => {
                    self.adopt_term(term);
                    self.switch_back();
                }
                Some(_) => self.refuse(from),
            }
        } else if self.parent() == Some(from) {
            self.adopt_term(lead.unwrap_or(Term::ZERO));
        }
        if self.parent() == Some(from) && (md5 == self.md5 || version < self.metadata.version()) {
            self.note_synced(fresh);
        }
        let behind = self.parent() == Some(from) && self.in_flight.is_none() && md5 != self.md5;
        if behind && version >= self.metadata.version() {
            self.fetch(from);
        }
    }

    /// Follow the primary parent again, and stop the secondary this vnode's host runs.
    pub(super) fn switch_back(&mut self) {
        if self.failover.secondary.is_some() {
            self.leave_in_flight();
        }
        self.failover.secondary = None;
        self.failover.election = None;
        if let Some(id) = self.failover.assisting.take() {
            self.out.push(AlterOutput::StopSecondaryParent { id });
        }
        let primary = self.cfg.parents[0].clone();
        self.send_alive(&primary);
    }

    /// A vnode that follows this one as its parent (a secondary parent's adopted children).
    pub(super) fn adopt(&mut self, child: VnodeId) {
        if !self.cfg.parents.contains(&child) {
            self.children_seen_us.insert(child, self.now_us);
        }
    }
}
