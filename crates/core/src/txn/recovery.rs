//! Rebuilding a vnode from its durable log (DESIGN §3): committed writes are applied, decisions are
//! remembered, and a prepared transaction without an outcome is in doubt — locked again, marked
//! `recovered`, and resolved by asking its first committer (presumed abort).

use crate::ids::CutId;
use crate::io::Timer;
use crate::record::Record;
use crate::txn::participant::PreparedTx;
use crate::vnode::Vnode;
use std::collections::BTreeSet;

impl Vnode {
    pub(crate) fn replay(&mut self, log: &[Record]) {
        for record in log {
            self.replay_one(record);
        }
        self.placement_from_metadata();
        self.relock_in_doubt();
    }

    fn replay_one(&mut self, record: &Record) {
        match record {
            Record::Boot { .. } => self.incarnation += 1,
            Record::TxPrepared(p) => {
                let in_doubt = PreparedTx {
                    rec: p.clone(),
                    read_only: false,
                    locked: vec![],
                    pending: BTreeSet::new(),
                    recovered: true,
                    backoff_us: self.cfg.timeouts.in_doubt_timeout_us,
                };
                self.part.prepared.insert(p.branch(), in_doubt);
            }
            Record::TxCommitted { branch, tx_cut, writes } => {
                if !writes.is_empty() {
                    // A 1PC first committer: the commit carries the writes and is the decision.
                    self.store.apply_all(writes);
                    self.near.decided.insert(branch.tx.clone(), *tx_cut);
                } else if let Some(p) = self.part.prepared.remove(branch) {
                    self.store.apply_all(&p.rec.writes);
                }
            }
            Record::TxRolledBack { tx, branch } => {
                if let Some(branch) = branch {
                    self.part.prepared.remove(branch);
                }
                self.part.tombstones.insert(tx.clone());
            }
            Record::TxDecided { tx, tx_cut } => drop(self.near.decided.insert(tx.clone(), *tx_cut)),
            Record::CutStart { cut } => self.cut.note_started(*cut),
            Record::CutFinish(_) => {}
            Record::CutBegin { cut } => self.coordinator.note_begun(*cut),
            Record::CutEnd { cut, .. } => self.coordinator.note_ended(*cut),
            Record::Alteration { seq, bytes } => self.replay_alteration(*seq, bytes),
            Record::AlterClone { metadata } => {
                if let Some(t) = self.tree.as_mut() {
                    t.recovered = metadata.clone();
                }
            }
            Record::AlterTerm { term } => {
                if let Some(t) = self.tree.as_mut() {
                    t.recovered_term = t.recovered_term.max(*term);
                }
            }
        }
    }

    /// An alteration record counts if it is the next one and reads back whole; an alteration that
    /// was appended but never confirmed may be in the log too — applying it is what every vnode
    /// that confirmed did, and a clone from the parent settles any difference.
    fn replay_alteration(&mut self, seq: u64, bytes: &[u8]) {
        let Some(t) = self.tree.as_mut() else { return };
        if let Some((term, s, record)) = crate::alter::AlterRecord::decode(bytes).filter(|(_, s, _)| *s == seq) {
            if s == t.recovered.seq() + 1 && term >= t.recovered.term() {
                t.recovered.apply(term, s, &record);
            }
        }
    }

    /// Keys of in-doubt transactions stay locked on their primary until the outcome is known.
    fn relock_in_doubt(&mut self) {
        let me = self.cfg.id.clone();
        for (branch, p) in self.part.prepared.iter_mut() {
            let placement = &self.cfg.placement;
            let keys: Vec<_> =
                p.rec.writes.iter().map(|w| w.key.clone()).filter(|k| placement.primary_of(k) == &me).collect();
            for k in &keys {
                self.locks.insert(k.clone(), branch.tx.clone());
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
