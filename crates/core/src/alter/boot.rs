//! Boot loading by parent for a host that starts (seed 004: "a host that becomes alive is told by
//! its parent which vnodes to start"). The host starts the vnodes with no parent (the root) from
//! their logs at once; for every other vnode of its configuration it asks the vnode's parents —
//! the primary and the secondaries that may stand in for it (`AlterConfig::parent_queue`) —
//! `HostAlive{host}`, and starts what the first answer (`StartVnodes`) names. A parent answers
//! with the vnodes of the host it is the primary parent of (`Metadata::vnodes_on`), so the host
//! groups its vnodes by primary parent and each group is settled by one answer from its queue.
//! A vnode its parent's answer does not name is not started: the metadata no longer places it on
//! this host.
//!
//! The simulator's host agents boot one crashed vnode at a time (`waymark-sim`'s `tree::host`);
//! this is the same exchange for a whole host, which the server drives: it sends `asks` again
//! (with a backoff of its own) until `done`, and feeds every `StartVnodes` to `on_answer`.
//!
//! Invariant: a vnode is returned for starting at most once, by `new` (no parent) or by the
//! answer that settles its group.

use super::io::{AlterConfig, AlterMsg};
use crate::ids::VnodeId;
use crate::message::{Body, Envelope};

/// The vnodes of one host whose primary parent is the same, and who may answer for it.
#[derive(Clone, Debug)]
struct Group {
    /// The primary parent, then the secondaries that may stand in for it.
    queue: Vec<VnodeId>,
    /// This host's vnodes under that primary parent, in configuration order.
    vnodes: Vec<VnodeId>,
}

/// A host's boot by parent, from its vnodes' tree configurations to every group settled.
#[derive(Clone, Debug)]
pub struct HostBoot {
    host: String,
    /// The groups not settled yet.
    waiting: Vec<Group>,
}

/// What one answer settles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// The vnodes to start now.
    pub start: Vec<VnodeId>,
    /// The vnodes of the group the answer did not name: not to be started.
    pub not_named: Vec<VnodeId>,
}

impl HostBoot {
    /// The boot of `host` over the tree configurations of its vnodes, and the vnodes to start at
    /// once: those with no parent.
    pub fn new<'a>(host: &str, configs: impl IntoIterator<Item = &'a AlterConfig>) -> (HostBoot, Vec<VnodeId>) {
        let mut roots = vec![];
        let mut waiting: Vec<Group> = vec![];
        for cfg in configs {
            assert_eq!(cfg.id.host, host, "{} is not a vnode of {host}", cfg.id);
            let queue = cfg.parent_queue();
            match waiting.iter_mut().find(|g| !queue.is_empty() && g.queue == queue) {
                _ if queue.is_empty() => roots.push(cfg.id.clone()),
                Some(g) => g.vnodes.push(cfg.id.clone()),
                None => waiting.push(Group { queue, vnodes: vec![cfg.id.clone()] }),
            }
        }
        (HostBoot { host: host.to_string(), waiting }, roots)
    }

    /// Every group settled.
    pub fn done(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The questions to send now: `HostAlive` from a vnode of each unsettled group to each parent
    /// in its queue (a parent that is down, or a secondary that never started, just drops it).
    pub fn asks(&self) -> Vec<Envelope> {
        let mut asks = vec![];
        for g in &self.waiting {
            for to in &g.queue {
                let body = Body::Alter(AlterMsg::HostAlive { host: self.host.clone() });
                asks.push(Envelope { from: g.vnodes[0].clone(), to: to.clone(), cut: None, body });
            }
        }
        asks
    }

    /// The parents asked and not answered yet, for a host that says whom it waits for.
    pub fn waiting_for(&self) -> Vec<VnodeId> {
        self.waiting.iter().flat_map(|g| g.queue.iter().cloned()).collect()
    }

    /// A `StartVnodes{vnodes}` from `from`: settles the group whose queue holds `from` — starts
    /// what it names of that group, and not the rest. An answer from no unsettled group's queue
    /// (a second answer, a stranger) settles nothing.
    pub fn on_answer(&mut self, from: &VnodeId, vnodes: &[VnodeId]) -> Settled {
        let Some(at) = self.waiting.iter().position(|g| g.queue.contains(from)) else { return Settled::default() };
        let group = self.waiting.remove(at);
        let (start, not_named) = group.vnodes.into_iter().partition(|v| vnodes.contains(v));
        Settled { start, not_named }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alter::shape::{build_over, Timing};

    fn v(s: &str) -> VnodeId {
        VnodeId::parse(s).expect("a vnode id")
    }

    /// A 3-host tree, one store vnode each, fan-out 16: one manager (the root) over the stores.
    fn configs() -> Vec<AlterConfig> {
        let stores = vec![v("store0@node1"), v("store0@node2"), v("store0@node3")];
        let t = Timing {
            hop_us: 1_000,
            sync_us: 10_000,
            heartbeat_interval_us: 20_000,
            heartbeat_timeout_us: 200_000,
            breaks: crate::Breaks::default(),
        };
        build_over(stores, 16, &t).configs
    }

    fn on(host: &str, all: &[AlterConfig]) -> Vec<AlterConfig> {
        all.iter().filter(|c| c.id.host == host).cloned().collect()
    }

    #[test]
    fn a_host_starts_its_root_at_once_and_asks_the_parents_of_the_rest() {
        let all = configs();
        let root = all.iter().find(|c| c.parents.is_empty()).expect("a root").clone();
        let (boot, now) = HostBoot::new(&root.id.host, &on(&root.id.host, &all));
        assert_eq!(now, vec![root.id.clone()]);
        assert!(!boot.done(), "the root's host runs a store vnode too, which its parent starts");
        let asks = boot.asks();
        assert!(!asks.is_empty());
        assert!(asks.iter().all(|e| e.body == Body::Alter(AlterMsg::HostAlive { host: root.id.host.clone() })));
        assert!(asks.iter().any(|e| e.to == root.id), "the root is the stores' primary parent");
    }

    #[test]
    fn one_answer_from_the_queue_settles_a_group_and_a_second_settles_nothing() {
        let all = configs();
        let host = all.iter().find(|c| !c.parents.is_empty()).expect("a child").id.host.clone();
        let mine = on(&host, &all);
        let (mut boot, _) = HostBoot::new(&host, &mine);
        let child = mine.iter().find(|c| !c.parents.is_empty()).expect("a child here");
        let queue = child.parent_queue();
        let stand_in = queue.last().expect("a parent").clone();
        let settled = boot.on_answer(&stand_in, std::slice::from_ref(&child.id));
        assert!(settled.start.contains(&child.id) && settled.not_named.is_empty(), "{settled:?}");
        assert!(boot.done(), "{boot:?}");
        assert_eq!(boot.on_answer(&queue[0], std::slice::from_ref(&child.id)), Settled::default());
    }

    #[test]
    fn a_vnode_its_parent_does_not_name_is_not_started() {
        let all = configs();
        let host = all.iter().find(|c| !c.parents.is_empty()).expect("a child").id.host.clone();
        let mine = on(&host, &all);
        let (mut boot, _) = HostBoot::new(&host, &mine);
        let child = mine.iter().find(|c| !c.parents.is_empty()).expect("a child here");
        let settled = boot.on_answer(&child.parent_queue()[0], &[]);
        assert_eq!(settled.start, Vec::<VnodeId>::new());
        assert!(settled.not_named.contains(&child.id));
    }

    #[test]
    fn an_answer_from_a_stranger_settles_nothing() {
        let all = configs();
        let host = all.iter().find(|c| !c.parents.is_empty()).expect("a child").id.host.clone();
        let (mut boot, _) = HostBoot::new(&host, &on(&host, &all));
        assert_eq!(boot.on_answer(&v("manager9@node9"), &[]), Settled::default());
        assert!(!boot.done());
    }
}
