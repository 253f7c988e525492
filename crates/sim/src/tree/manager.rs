//! A manager vnode as the `--tree` world holds it: the core's `ManagerVnode` — the very code the
//! server runs, with its write-ahead `Outbox` — and its log under the store vnodes' crash model.
//!
//! Before, the world drove the bare alteration role and kept what it persisted at once, so a
//! promise or an applied alteration was never lost in a crash between "append" and "durable", and
//! the rule "persist, then answer" went untested for managers (issue 11). Now a crash keeps the
//! durable records, some prefix of the unsynced ones, and loses the rest.

use rand_chacha::ChaCha8Rng;
use waymark_core::alter::{AlterConfig, ManagerVnode, Metadata};
use waymark_core::{Record, TreeImage};

/// A cut process not ended in this long is given up by the operator (`END:failed`).
pub const OPERATOR_TIMEOUT_US: u64 = 5_000_000;

pub struct ManagerNode {
    /// Absent while the manager is down.
    pub vnode: Option<ManagerVnode>,
    pub cfg: AlterConfig,
    /// What the log is replayed on top of: the genesis metadata, or the copy a secondary parent
    /// was started with.
    pub base: TreeImage,
    /// Invariant: `log[..durable]` survives any crash.
    pub log: Vec<Record>,
    pub durable: usize,
    /// Bumped at every stop, so that timers and syncs of a dead instance are ignored.
    pub instance: u32,
    pub sync_pending: bool,
    /// Fault: the next alteration read back from this log comes back damaged.
    pub corrupt_next: bool,
    /// Store vnodes every cut phase must reach (primary managers run a cut operator).
    leaves: u64,
}

impl ManagerNode {
    /// Down, with an empty log over `base`: `start` brings it up.
    pub fn new(cfg: AlterConfig, base: TreeImage, leaves: u64) -> Self {
        let (log, durable, instance) = (vec![], 0, 0);
        ManagerNode { vnode: None, cfg, base, log, durable, instance, sync_pending: false, corrupt_next: false, leaves }
    }

    /// Rebuilds the manager from its log, as the server does; `false` if it runs already.
    /// Every manager can run the cut operator: a secondary parent too, which is the only one left
    /// to ask when it stands in for the only manager of the tree (3 hosts, fan-out 16: the root).
    pub fn start(&mut self) -> bool {
        if self.vnode.is_some() {
            return false;
        }
        self.durable = self.log.len();
        self.sync_pending = false;
        let vnode = ManagerVnode::recover(self.cfg.clone(), self.base.clone(), &self.log);
        self.vnode = Some(vnode.with_operator(self.leaves, OPERATOR_TIMEOUT_US));
        true
    }

    /// Stops it (a secondary parent told to stop); `false` if it was down.
    pub fn stop(&mut self) -> bool {
        self.instance += 1;
        self.sync_pending = false;
        self.vnode.take().is_some()
    }

    /// Loses the manager's memory and whatever of its log was not durable, except a prefix of
    /// the unsynced records that reached the disk anyway. Returns whether a record was lost.
    pub fn crash(&mut self, rng: &mut ChaCha8Rng) -> bool {
        self.stop();
        crate::world::lose_unsynced(&mut self.log, self.durable, rng)
    }

    pub fn is_up(&self, instance: u32) -> bool {
        self.vnode.is_some() && self.instance == instance
    }

    /// The metadata it holds: in memory while it runs, else what its log rebuilds.
    pub fn metadata(&self) -> Metadata {
        match &self.vnode {
            Some(v) => v.alter().metadata().clone(),
            None => {
                let mut image = self.base.clone();
                self.log.iter().for_each(|r| image.apply(r));
                image.metadata
            }
        }
    }
}
