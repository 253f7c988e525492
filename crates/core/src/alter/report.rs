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
/// in flight, and cleared when its proposal ends: `own_done`).
#[derive(Debug, Default)]
pub(super) struct Reports {
    /// Children whose state change this vnode has proposed, with the proposal number.
    children: BTreeMap<VnodeId, u64>,
    /// Hosts whose liveness this vnode has proposed, with the proposal number.
    hosts: BTreeMap<String, u64>,
}

impl AlterNode {
    /// An own proposal ended (applied or given up): its child may be reported again.
    pub(super) fn own_done(&mut self, n: u64) {
        self.reports.children.retain(|_, m| *m != n);
        self.reports.hosts.retain(|_, m| *m != n);
    }

    pub(super) fn report_host_alive(&mut self, host: &str) {
        if self.metadata.get(&format!("host/{host}")) != Some(cluster::ALIVE) {
            self.propose_own(cluster::host_state(host, true));
        }
    }

    /// On every heartbeat tick: for each configured child whose working state differs from what
    /// the metadata records, propose the change (one proposal in flight per child; a failed one
    /// is proposed again on a later tick).
    pub(super) fn report_children(&mut self) {
        let working = self.working_children();
        let children: Vec<VnodeId> = self.cfg.children.clone();
        for child in children {
            let now = working.contains(&child);
            let recorded = self.metadata.get(&format!("state/{child}")) != Some(DOWN);
            if now != recorded && !self.reports.children.contains_key(&child) {
                let state = if now { WORKING } else { DOWN };
                let n = self.propose_own(cluster::vnode_state(&child, state));
                self.reports.children.insert(child, n);
            }
        }
        self.report_hosts();
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
            if alive != recorded && !self.reports.hosts.contains_key(&host) {
                let n = self.propose_own(cluster::host_state(&host, alive));
                self.reports.hosts.insert(host, n);
            }
        }
    }
}
