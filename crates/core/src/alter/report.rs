//! A parent reports what it sees to the metadata, through alterations like any other change
//! (seed 004 point 8: "topology is modified by failover, job or vnode state is changed"): a host
//! that comes alive (`host/<h>` = `alive`), a child that stops answering or comes back
//! (`state/<child>` = `down` / `working`), a child's host all of whose vnodes are recorded down
//! (`host/<h>` = `dead`) or that has a working vnode again (`alive`).

use super::cluster::{self, DOWN, WORKING};
use super::node::AlterNode;
use crate::ids::VnodeId;
use std::collections::BTreeMap;

/// The reports this vnode has in flight.
/// Invariant: at most one proposal per child and per host (a report is made only when none is
/// in flight, and cleared when its proposal ends — `own_done` — or is withdrawn).
#[derive(Debug, Default)]
pub(super) struct Reports {
    /// Children whose state change this vnode has proposed: the proposal number and whether it
    /// says the child works.
    children: BTreeMap<VnodeId, Report>,
    /// Hosts whose liveness this vnode has proposed: the proposal number and whether it says
    /// the host is alive.
    hosts: BTreeMap<String, Report>,
}

#[derive(Clone, Copy, Debug)]
struct Report {
    n: u64,
    up: bool,
}

impl AlterNode {
    /// An own proposal ended (applied or given up): its child may be reported again.
    pub(super) fn own_done(&mut self, n: u64) {
        self.reports.children.retain(|_, r| r.n != n);
        self.reports.hosts.retain(|_, r| r.n != n);
        self.promotion_done(n);
    }

    pub(super) fn report_host_alive(&mut self, host: &str) {
        if self.metadata.get(&format!("host/{host}")) != Some(cluster::ALIVE) {
            self.propose_own(cluster::host_state(host, true));
        }
    }

    /// On every heartbeat tick: for each configured child whose working state differs from what
    /// the metadata records, propose the change (one proposal in flight per child; a failed one
    /// is proposed again on a later tick).
    ///
    /// A report in flight that says the opposite of what this vnode sees now, or that the
    /// metadata already records (another parent's report got there first), is withdrawn first: retrying it would only order a stale claim again and again (each retry a full
    /// round of the tree), delaying every other alteration, the cut's phases among them, and
    /// the report that is true would wait behind it (seed 1002 of the 12-vnode, fan-out 2
    /// `--tree` sweep: reports of a partition healed long before were still being ordered
    /// 1.5 s later, and cuts stopped succeeding). A withdrawn proposal already queued at the
    /// root may still be applied; the next tick then reports the truth again.
    pub(super) fn report_children(&mut self) {
        let working = self.working_children();
        let children: Vec<VnodeId> = self.cfg.children.clone();
        for child in children {
            let now = working.contains(&child);
            let recorded = self.metadata.get(&format!("state/{child}")) != Some(DOWN);
            if let Some(r) = self.reports.children.get(&child).copied() {
                if r.up == now && recorded != now {
                    continue; // still true and still needed
                }
                self.withdraw_own(r.n); // stale, or the metadata records it already
            }
            self.report_state(child, now, recorded);
        }
        self.report_roots();
        self.report_hosts();
    }

    /// Proposes `vnode`'s state when what this vnode sees (`now`) differs from what the metadata
    /// records.
    fn report_state(&mut self, vnode: VnodeId, now: bool, recorded: bool) {
        if now != recorded {
            let state = if now { WORKING } else { DOWN };
            let n = self.propose_own(cluster::vnode_state(&vnode, state));
            self.reports.children.insert(vnode, Report { n, up: now });
        }
    }

    /// The primary root has no parent to report it. A secondary root that orders a term stands
    /// in for it because it stopped answering, so it records it down — else the primary's host,
    /// its other vnodes recorded down, never counts as dead and none of its partitions is promoted
    /// (seen on real processes: three hosts, the root's host killed, nothing failed over). A
    /// primary root that orders again records itself working.
    fn report_roots(&mut self) {
        if !self.is_root() || self.lead_term().is_none() {
            return;
        }
        let (vnode, now) = match self.cfg.secondary_of.clone() {
            Some(primary) => (primary, false),
            None => (self.cfg.id.clone(), true),
        };
        let recorded = self.metadata.get(&format!("state/{vnode}")) != Some(DOWN);
        if let Some(r) = self.reports.children.get(&vnode).copied() {
            if r.up == now && recorded != now {
                return; // still true and still needed
            }
            self.withdraw_own(r.n);
        }
        self.report_state(vnode, now, recorded);
    }

    /// A child's host is dead when the metadata records every vnode on it down; alive again when
    /// one of them works. Read from the metadata, so it follows the `state/…` reports above.
    fn report_hosts(&mut self) {
        let mut hosts: Vec<String> = self.cfg.children.iter().map(|c| c.host.clone()).collect();
        hosts.sort();
        hosts.dedup();
        for host in hosts {
            let alive = cluster::host_has_working_vnode(&self.metadata, &host);
            let recorded = self.metadata.get(&format!("host/{host}")) != Some(cluster::DEAD);
            if let Some(r) = self.reports.hosts.get(&host).copied() {
                if r.up == alive && recorded != alive {
                    continue;
                }
                self.withdraw_own(r.n);
            }
            if alive != recorded {
                let n = self.propose_own(cluster::host_state(&host, alive));
                self.reports.hosts.insert(host, Report { n, up: alive });
            }
        }
    }
}
