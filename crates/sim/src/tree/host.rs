//! The host agents of the cluster tree (seed 004), written once for both drivers of the tree: the
//! bank world with managers over store vnodes (`--tree`) and the tree world of `AlterNode`s alone
//! (`--tree-only`). A host agent
//! - starts a secondary parent when a vnode it runs, the assisting child, says so, and stops it
//!   when told (the registry of secondary parents: each is added once, restarted on a fresh log);
//! - brings a crashed vnode back by asking its primary parent which vnodes to start (boot loading
//!   by parent), again and again until an answer comes; the root, with no parent, starts from its
//!   own log;
//! - starts the vnodes a parent's `StartVnodes` names that are down.
//!
//! Each world says how it holds, starts, stops and addresses its tree vnodes (`TreeHost`); the
//! bookkeeping above is the trait's own, so the two drivers cannot drift apart.

use super::stats::TreeStats;
use waymark_core::alter::{AlterConfig, AlterMsg};
use waymark_core::{TreeImage, VnodeId};

/// A host whose parent does not answer asks again this much later (the parent may be down or cut
/// off, and its `StartVnodes` may be lost).
pub const HOST_ASK_AGAIN_US: u64 = 100_000;

/// What the host agents need from a world that runs the tree.
pub trait TreeHost {
    /// Where the world keeps a tree vnode.
    type At: Copy;

    fn tree_stats(&mut self) -> &mut TreeStats;
    /// The run is ending: faults healed, nothing crashes or needs bringing back any more.
    fn tree_stopping(&self) -> bool;
    fn tree_vnode(&self, id: &VnodeId) -> Option<Self::At>;
    fn tree_config(&self, at: Self::At) -> &AlterConfig;
    fn tree_running(&self, at: Self::At) -> bool;
    /// Starts the vnode from what its log holds, unless it runs.
    fn boot_tree_vnode(&mut self, at: Self::At);
    /// Stops a secondary parent, with what that means in this world; whether it ran.
    fn stop_secondary_at(&mut self, at: Self::At) -> bool;
    /// Adds a secondary parent, down: it did not run in this world before.
    fn add_secondary(&mut self, cfg: AlterConfig) -> Self::At;
    /// Starts the secondary parent at `at` as `cfg` on a fresh log over `image`.
    fn start_secondary_at(&mut self, at: Self::At, cfg: AlterConfig, image: TreeImage);
    fn send_alter(&mut self, from: Self::At, to: &VnodeId, msg: AlterMsg);
    /// The host of the vnode at `at` comes back (`host_back`) `after_us` from now.
    fn host_back_later(&mut self, at: Self::At, after_us: u64);

    /// The root's host is back: with no parent to ask, it starts the root from its own log.
    fn boot_root(&mut self, root: Self::At) {
        self.boot_tree_vnode(root);
    }

    /// The assisting child's host starts secondary parent `id` in the place of `of`, on a copy of
    /// the assisting child's metadata; nothing if it runs already.
    fn start_secondary(&mut self, id: VnodeId, of: &VnodeId, image: TreeImage) {
        let Some(of) = self.tree_vnode(of) else { return };
        let cfg = self.tree_config(of).secondary(id.clone());
        let at = match self.tree_vnode(&id) {
            Some(at) if self.tree_running(at) => return,
            Some(at) => at,
            None => self.add_secondary(cfg.clone()),
        };
        self.tree_stats().secondaries_started += 1;
        // A fresh log on the assisting child's copy: a secondary parent keeps no history.
        self.start_secondary_at(at, cfg, image);
    }

    fn stop_secondary(&mut self, id: &VnodeId) {
        let Some(at) = self.tree_vnode(id) else { return };
        if self.stop_secondary_at(at) {
            self.tree_stats().secondaries_stopped += 1;
        }
    }

    /// Boot loading by parent: the host of the crashed vnode at `at` is back and asks the vnode's
    /// parents — the primary and the secondaries that may stand in for it — which vnodes to start
    /// on it; it asks again while no answer comes. Asking the primary alone left a manager down
    /// for as long as its parent's host was cut off, and with it the majority a secondary root
    /// needed (`--seed 145 --workload append --tree --fanout 2 --failover --clients 12`).
    fn host_back(&mut self, at: Self::At) {
        if self.tree_stopping() || self.tree_running(at) {
            return;
        }
        let cfg = self.tree_config(at);
        let queue = cfg.parent_queue();
        if queue.is_empty() {
            return self.boot_root(at);
        }
        let host = cfg.id.host.clone();
        // A secondary never started has no address yet: it could not answer.
        let parents: Vec<VnodeId> = queue.into_iter().filter(|p| self.tree_vnode(p).is_some()).collect();
        for parent in &parents {
            self.send_alter(at, parent, AlterMsg::HostAlive { host: host.clone() });
        }
        self.host_back_later(at, HOST_ASK_AGAIN_US);
    }

    /// A parent's `StartVnodes` reached the host agent: it starts those of `vnodes` that are down.
    fn boot_by_parent(&mut self, vnodes: &[VnodeId]) {
        for id in vnodes {
            let Some(at) = self.tree_vnode(id) else { continue };
            if !self.tree_running(at) {
                self.tree_stats().boots_by_parent += 1;
                self.boot_tree_vnode(at);
            }
        }
    }
}
