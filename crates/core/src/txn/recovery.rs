//! Rebuilding a vnode from its durable log (DESIGN §3): committed writes are applied, decisions are
//! remembered, and a prepared transaction without an outcome is in doubt — locked again, marked
//! `recovered`, and resolved by asking its first committer (presumed abort).

use crate::config::CutStrategy;
use crate::ids::CutId;
use crate::image::VnodeImage;
use crate::io::Timer;
use crate::txn::participant::PreparedTx;
use crate::vnode::Vnode;
use std::collections::BTreeSet;

impl Vnode {
    /// Takes the state a log amounts to (`image.rs`): committed data, decisions, tombstones, and
    /// every prepared branch without an outcome — in doubt.
    pub(crate) fn rebuild(&mut self, image: VnodeImage) {
        let VnodeImage { summary, store, prepared, decided, tombstones, learner_resets } = image;
        self.catch_up.resets = learner_resets;
        self.incarnation = summary.incarnation;
        self.tallies = crate::tally::Tallies::of(&store, &self.cfg.placement);
        self.store = store;
        self.near.decided = decided;
        self.part.tombstones = tombstones;
        for (branch, rec) in prepared {
            let in_doubt = PreparedTx {
                read_only: rec.writes.is_empty(),
                rec,
                locked: vec![],
                pending: BTreeSet::new(),
                recovered: true,
                successor_committed: false,
                prepared_at: crate::ids::Lsn(0),
                generation: 0,
                backoff_us: self.cfg.timeouts.in_doubt_timeout_us,
            };
            self.part.prepared.insert(branch, in_doubt);
        }
        match summary.cut_seen {
            Some(cut) if self.cfg.strategy == CutStrategy::Consistent => self.resume_cut_after_restart(cut),
            Some(cut) => self.cut.note_started(cut),
            None => {}
        }
        self.versions_rebuild(summary.versions_side_seen);
        self.coordinator.rebuild(summary.coordinator_last_cut, summary.coordinator_unfinished);
        self.logged = summary;
        self.placement_from_metadata();
        self.relock_in_doubt();
        self.expiry_rebuild();
    }

    /// Keys of in-doubt transactions stay locked on their primary until the outcome is known: the
    /// written ones and those locked for reads.
    fn relock_in_doubt(&mut self) {
        let me = self.cfg.id.clone();
        for (branch, p) in self.part.prepared.iter_mut() {
            let placement = &self.cfg.placement;
            let written = p.rec.writes.iter().map(|w| w.key.clone()).filter(|k| placement.primary_of(k) == &me);
            let keys: Vec<_> = written.chain(p.rec.read_locks.iter().cloned()).collect();
            for k in &keys {
                self.locks.acquire(k, branch);
            }
            p.locked = keys;
        }
    }

    /// On `Restarted`, after the `Boot` record: start resolving what the log left in doubt, and
    /// close a cut process this vnode was coordinating when it crashed.
    pub(crate) fn after_recovery(&mut self) {
        let in_doubt: Vec<_> = self.part.prepared.keys().cloned().collect();
        for tx in in_doubt {
            self.set_timer(Timer::InDoubt(tx), self.cfg.timeouts.in_doubt_timeout_us);
        }
        if let Some(cut) = self.coordinator.unfinished() {
            self.coordinator_end_abandoned(cut);
        }
    }

    /// The highest cut id this vnode's log mentions (for tests and tools).
    pub fn last_cut_seen(&self) -> Option<CutId> {
        self.cut.last_finished
    }
}
