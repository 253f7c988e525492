//! The `versions` comparison strategy: seed 002's global snapshot in three phases around a
//! snapshot version (`snpVersion`), adapted to our roles. The near vnode of a transaction is its
//! originator, and a transaction's version is its `TxId` without the near (`TxVersion`: the near's
//! incarnation, then its sequence number), ordered per near vnode.
//!
//! - **Phase 1** (seed 002 §4, `VersionsStart`): log the local state (`VersionsLocalState`), fix
//!   `snp_version`, collect the transactions this vnode originated that are still active (all have
//!   smaller versions), keep collecting the *late* ones — registered after `snp_version` was fixed
//!   with a smaller version (§4.4) — and report `snp_version` once the collected ones finished.
//! - **Phase 2** (§6, `VersionsMap`): with the map of every vnode's `snp_version`, await every
//!   branch prepared here whose version is below its near's entry, then log the map.
//! - **Phase 3** (§7, `VersionsStop` then `VersionsSkip`): stop collecting late transactions, hand
//!   them to the coordinator, which sends the union back; log it (`VersionsSkip`).
//!
//! Restore (`cut::versions_restore`): a vnode's state at the cut is every transaction committed
//! before its `VersionsMap` record whose version is below its near's entry and that no vnode
//! listed as late.
//!
//! What we had to add for the design to be consistent at all (seed 002 does not list it):
//! a transaction's side is fixed when it is *created*, not when it commits, so a transaction
//! created before its near fixed `snp_version` (included) can read or overwrite the write of one
//! created after another near fixed its own (excluded) — a restore with the reader and without
//! the writer. So, while a cut runs: a near colours the `Prepare` of a transaction it registers
//! during the cut with the cut (the colour is the transaction's *side*, passed down the chain and
//! stamped as `tx_cut` by the first committer); a primary refuses a transaction of an older side
//! that reads or writes a key whose last writer, committed or prepared, is of a newer side, or
//! that writes a key a newer side read (`AbortReason::SnapshotOrder`), until phase 2 tells it that
//! every near has fixed its version; and replies revealing a newer side are held until then
//! (`cut::real_time`). Neither is needed by the consistent cut, which decides a side when a
//! transaction commits.
//!
//! Seed 002 problem 2 (a missed backup transaction), in our roles: a near that timed out on a
//! one-phase transaction keeps it active in phase 1 until its first committer says what became of
//! it; otherwise the chain can commit after phase 1 on a replica that logged the map first.
//!
//! Invariants (asserted where produced and used):
//! - A near's versions only grow, and `snp_version` is above every version it registered before
//!   phase 1 (`snp = next + unregistered`); the late ones are exactly those registered after it
//!   with a smaller version, and they are all in the skip set.
//! - A transaction is coloured (after the cut) iff its near registered it while the cut ran here;
//!   with the skip set, that is iff the restore filter excludes it.
//! - `VersionsMap{C}` is appended only once every branch below the map that was prepared here when
//!   the map arrived has finished (a later prepare below it is of a transaction its near had
//!   finished — aborted, or resolved by its first committer — and never commits here; or, one
//!   phase, of one a crashed near forgot, and this vnode refuses it: `versions_too_late`).
//! - A vnode that restarts during a cut answers every later phase of it with a failure: its
//!   collections were in memory (seed 002 problem 3). So does one that prepared a transaction of
//!   the cut's after side before restarting, even if phase 1 had not reached it: the guard's
//!   memory of which keys that side read or wrote is lost (`VersionsSideSeen`).

use crate::ids::{Branch, CutId, Key, TxId, VnodeId};
use crate::message::{CutMsg, PrepareWrites, TxnMsg};
use crate::record::Record;
use crate::store::{ReadCheck, Write};
use crate::vnode::Vnode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A transaction's version at its near vnode (seed 002's `GridCacheVersion`): ordered by the
/// near's incarnation, then by its sequence number. Comparable only between transactions of the
/// same near.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct TxVersion {
    pub incarnation: u32,
    pub seq: u32,
}

impl TxVersion {
    pub fn of(tx: &TxId) -> TxVersion {
        TxVersion { incarnation: tx.incarnation, seq: tx.seq }
    }
}

impl fmt::Display for TxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.incarnation, self.seq)
    }
}

/// Seed 002 §5: every near vnode's `snp_version` (`Map<UUID, GridCacheVersion>`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotVersions(pub BTreeMap<VnodeId, TxVersion>);

impl SnapshotVersions {
    /// Whether `tx`'s version is below its near's `snp_version` (a transaction of a near the map
    /// does not know is not).
    pub fn below(&self, tx: &TxId) -> bool {
        self.0.get(&tx.near).is_some_and(|snp| TxVersion::of(tx) < *snp)
    }
}

#[derive(Debug, Default, Hash)]
pub struct VersionsState {
    pub(crate) running: Option<VersionsCut>,
    /// The side of every transaction this vnode knows to be *after* a cut: the newest cut during
    /// which its near registered it. Set by the near at registration, by participants from the
    /// colour of the `Prepare`. Forgotten when that cut ends.
    sides: BTreeMap<TxId, CutId>,
    /// The colour of the message being handled (set by `Vnode::on_message`).
    pub(crate) incoming: Option<CutId>,
    /// One-phase transactions this near timed out on and whose outcome its first committer has
    /// not told yet, with that first committer: they count as active in phase 1 (problem 2).
    unresolved: BTreeMap<TxId, VnodeId>,
    /// Keys read (`WATCH`) by a transaction of a newer side than `None`, at this primary, with the
    /// newest such side: a transaction of an older side may not write them (the restore would
    /// keep the write and drop the read that came before it — an anti-dependency cycle).
    /// Forgotten for a cut once phase 2 reaches this vnode, as `RealTime::reveal`.
    read_sides: BTreeMap<Key, CutId>,
    /// Rebuilt from the log: the newest cut whose sides this vnode may have held in a previous
    /// incarnation. It lost them (they are in memory), so it cannot guard that cut.
    lost_sides_upto: Option<CutId>,
    /// The newest cut of a `VersionsSideSeen` record in this vnode's log.
    /// Invariant: `>= lost_sides_upto`, and every side held in `sides`/`read_sides` is `<=` it.
    side_seen_logged: Option<CutId>,
}

#[derive(Debug, Hash)]
pub(crate) struct VersionsCut {
    id: CutId,
    snp: TxVersion,
    /// Phase 1: transactions this near originated that were active when `snp` was fixed.
    collected: BTreeSet<TxId>,
    report_to: Option<VnodeId>,
    /// §4.4: registered here after `snp` was fixed, with a smaller version.
    late: BTreeSet<TxId>,
    collecting_late: bool,
    map: Option<SnapshotVersions>,
    /// Phase 2: branches prepared here below the map, not yet finished.
    awaited: BTreeSet<Branch>,
    map_asked: Option<VnodeId>,
    map_logged: bool,
    skip_logged: bool,
    failed: bool,
}

impl VersionsState {
    /// The side a `Prepare` of `tx` carries: the cut it is after, if any.
    pub(crate) fn side(&self, tx: &TxId) -> Option<CutId> {
        self.sides.get(tx).copied()
    }

    pub fn running_id(&self) -> Option<CutId> {
        self.running.as_ref().map(|c| c.id)
    }

    /// Whether this vnode knows of a cut that has not ended here: it runs its phases, or holds
    /// the side of a transaction after one. Its store may then hold writes of transactions the
    /// cut leaves out, which only their `TxId` tells apart — a copied page carries none, so a
    /// primary serves no page meanwhile (`catch_up::serve_page`).
    pub(crate) fn cut_open(&self) -> bool {
        self.running.is_some() || !self.sides.is_empty()
    }
}

impl Vnode {
    fn versions_on(&self) -> bool {
        self.cfg.strategy == crate::config::CutStrategy::Versions
    }

    /// The colour of a transaction message under this strategy: a `Prepare` carries its
    /// transaction's side, nothing else is coloured.
    pub(crate) fn versions_colour(&self, msg: &TxnMsg) -> Option<CutId> {
        match msg {
            TxnMsg::Prepare { tx, .. } => self.versions.side(tx),
            _ => None,
        }
    }

    /// The near registered `tx` (it took its version in the same step, or — modelled by
    /// `versions_unregistered` — a little before `snp_version` was fixed).
    pub(crate) fn versions_registered(&mut self, tx: &TxId) {
        if !self.versions_on() {
            return;
        }
        let no_skip = self.cfg.breaks.versions_no_skip;
        let Some(c) = self.versions.running.as_mut() else { return };
        self.versions.sides.insert(tx.clone(), c.id);
        if TxVersion::of(tx) < c.snp && c.collecting_late && !no_skip {
            c.late.insert(tx.clone());
        }
    }

    /// A participant learns `tx`'s side from the colour of its `Prepare`. The first time it learns
    /// of a cut's after side it logs so, before anything it promises in this step: a restart must
    /// not forget that it held guard state for that cut.
    pub(crate) fn versions_note_side(&mut self, tx: &TxId) {
        if let Some(cut) = self.versions.incoming.filter(|_| self.versions_on()) {
            if self.versions.side_seen_logged < Some(cut) {
                self.versions.side_seen_logged = Some(cut);
                self.out.append(Record::VersionsSideSeen { cut });
            }
            let side = self.versions.sides.entry(tx.clone()).or_insert(cut);
            *side = (*side).max(cut);
        }
    }

    /// A key of a one-phase transaction that reaches this hop of its chain only after the running
    /// cut's map did, with a version below it: it must not commit, or it would be included on
    /// the hops before this one (their phase 2 awaited it) and not here (committed after this
    /// vnode's map). Its near normally keeps such a transaction active in phase 1, so the map
    /// cannot exist yet; a near that crashed forgot it (seed 504 of the matrix, versions, append).
    /// Refusing aborts it on the whole chain: this hop decides it, or the hops before it roll
    /// back on its refusal.
    pub(crate) fn versions_too_late(&self, tx: &TxId, writes: &PrepareWrites) -> Option<Key> {
        if !self.versions_on() || self.cfg.breaks.versions_late_one_phase {
            return None;
        }
        let map = self.versions.running.as_ref()?.map.as_ref()?;
        if !map.below(tx) {
            return None;
        }
        match writes {
            PrepareWrites::Unresolved(ws) => ws.first().map(|w| w.key.clone()),
            PrepareWrites::Resolved(ws) => ws.first().map(|w| w.key.clone()),
        }
    }

    /// The first committer's stamp under this strategy: the transaction's side.
    pub(crate) fn versions_stamp(&self, tx: &TxId) -> Option<CutId> {
        self.versions.side(tx)
    }

    /// The key that keeps the transaction being prepared (its side is the incoming colour) from
    /// preparing here: a key it reads or writes whose last writer — committed (and not yet known
    /// to be settled everywhere) or prepared — is of a newer side, or a key it writes that a
    /// transaction of a newer side read. Either way the restore would keep this transaction and
    /// drop one it must follow.
    pub(crate) fn versions_guard(&self, reads: &[ReadCheck], writes: &[Write]) -> Option<Key> {
        if !self.versions_on() || self.cfg.breaks.versions_no_guard {
            return None;
        }
        let side = self.versions.incoming;
        let writer_side = |key: &Key| {
            let prepared = self.prepared_writers_of(key).iter().filter_map(|b| self.versions.side(&b.tx)).max();
            self.rt.reveals(key).max(prepared)
        };
        if let Some(r) = reads.iter().find(|r| writer_side(&r.key) > side) {
            return Some(r.key.clone());
        }
        let read_side = |key: &Key| self.versions.read_sides.get(key).copied();
        writes.iter().find(|w| writer_side(&w.key).max(read_side(&w.key)) > side).map(|w| w.key.clone())
    }

    /// A primary prepared a transaction that passed the guard: remember the keys it read if it is
    /// after a cut.
    pub(crate) fn versions_note_reads(&mut self, reads: &[ReadCheck]) {
        let Some(cut) = self.versions.incoming.filter(|_| self.versions_on()) else { return };
        if self.rt.started_everywhere(cut) {
            // Phase 2 (or END) of `cut` was here: no transaction before it prepares any more. A
            // late-coloured prepare must not leave an entry that nothing clears until the next cut.
            return;
        }
        for r in reads {
            let side = self.versions.read_sides.entry(r.key.clone()).or_insert(cut);
            *side = (*side).max(cut);
        }
    }

    /// Problem 2: the near timed out on a one-phase transaction, whose chain may still commit. It
    /// keeps it active (for phase 1) until its first committer says what became of it.
    /// The blocking strategy needs the same (`cut::blocking`): a chain still in flight when every
    /// near looked quiet committed on one replica before its marker and on the next after it
    /// (`waymark-sim --cuts --tree --strategy blocking`, seeds 277 and 313 of 500).
    pub(crate) fn versions_one_phase_timed_out(&mut self, tx: TxId, first_committer: VnodeId) {
        let tracked = match self.cfg.strategy {
            crate::config::CutStrategy::Versions => !self.cfg.breaks.versions_forget_one_phase,
            crate::config::CutStrategy::Blocking => true,
            crate::config::CutStrategy::Consistent => false,
        };
        if !tracked {
            return;
        }
        self.versions.unresolved.insert(tx.clone(), first_committer);
        self.versions_ask_again(tx);
    }

    /// Asks the first committer of an unresolved one-phase transaction (on the prepare timer).
    pub(crate) fn versions_ask_again(&mut self, tx: TxId) {
        let Some(fc) = self.versions.unresolved.get(&tx).cloned() else { return };
        // As first committer it answers at once, presuming abort durably if it never saw `tx`.
        self.send_txn(&fc, TxnMsg::StatusQuery { tx: tx.clone(), one_phase: true });
        self.set_timer(crate::io::Timer::PrepareTimeout(tx), self.cfg.timeouts.prepare_timeout_us);
    }

    /// One-phase transactions this near timed out on whose outcome is still unknown.
    pub(crate) fn one_phase_unresolved(&self) -> usize {
        self.versions.unresolved.len()
    }

    pub(crate) fn versions_resolved(&mut self, tx: &TxId) {
        self.versions.unresolved.remove(tx);
    }

    /// Phase 1 reached this vnode.
    pub(crate) fn versions_start(&mut self, from: VnodeId, cut: CutId) {
        match self.versions.running.as_mut() {
            Some(c) if c.id == cut => {
                c.report_to = Some(from);
                return self.versions_progress();
            }
            _ => {}
        }
        if self.cut.last_finished >= Some(cut) || self.versions.lost_sides_upto >= Some(cut) {
            // Started before a crash (its collections are lost), already over, or it committed
            // writes after this cut before a crash and no longer knows which keys hold them.
            return self.send_cut(&from, CutMsg::VersionsReport { cut, snp: None });
        }
        // §4.1, §4.2: the local state record, then `snp_version`. The vnode assigns versions and
        // registers transactions in one step, so Ignite's race (§problems 1) cannot happen here by
        // itself; `versions_unregistered` versions are left to transactions "already holding a
        // version but not registered yet", the model of that race.
        let next = TxVersion { incarnation: self.incarnation, seq: self.near.next_seq };
        let snp = TxVersion { seq: next.seq.saturating_add(self.cfg.versions_unregistered), ..next };
        self.out.append(Record::VersionsLocalState { cut, snp });
        self.cut.note_started(cut);
        // §4.3: every active transaction this near originated is below `snp`.
        let mut collected: BTreeSet<TxId> = self.near.txs.keys().cloned().collect();
        collected.extend(self.versions.unresolved.keys().cloned());
        debug_assert!(collected.iter().all(|tx| TxVersion::of(tx) < snp), "an active transaction above snp");
        self.versions.running = Some(VersionsCut {
            id: cut,
            snp,
            collected,
            report_to: Some(from),
            late: BTreeSet::new(),
            collecting_late: true,
            map: None,
            awaited: BTreeSet::new(),
            map_asked: None,
            map_logged: false,
            skip_logged: false,
            failed: false,
        });
        self.versions_progress();
    }

    /// Recovery: an earlier incarnation held guard state for cuts up to `side_seen`.
    pub(crate) fn versions_rebuild(&mut self, side_seen: Option<CutId>) {
        self.versions.lost_sides_upto = side_seen;
        self.versions.side_seen_logged = side_seen;
    }

    /// Phase 2: every near reported; `map` holds their `snp_version`s.
    pub(crate) fn versions_map(&mut self, from: VnodeId, cut: CutId, map: SnapshotVersions) {
        // Every near has fixed its version: a transaction registered from now on is after the cut
        // wherever it goes, so replies revealing one may leave and the guard may stop.
        self.cut_started_everywhere(cut);
        self.versions.read_sides.retain(|_, c| *c > cut);
        let refused = self.rt.refused(cut);
        let prepared = &self.part.prepared;
        let Some(c) = self.versions.running.as_mut().filter(|c| c.id == cut && !c.failed && !refused) else {
            return self.send_cut(&from, CutMsg::VersionsMapLogged { cut, ok: false });
        };
        c.map_asked = Some(from);
        if c.map.is_none() {
            debug_assert!(map.0.get(&self.cfg.id).is_none_or(|snp| *snp == c.snp), "the map changed my snp");
            // §6.1: the active transactions whose near's version is below the map.
            let below = prepared.iter().filter(|(b, p)| !p.read_only && map.below(&b.tx));
            c.awaited = below.map(|(b, _)| b.clone()).collect();
            c.map = Some(map);
        }
        self.versions_progress();
    }

    /// Phase 3, first half: stop collecting late transactions and hand them over.
    pub(crate) fn versions_stop(&mut self, from: VnodeId, cut: CutId) {
        let Some(c) = self.versions.running.as_mut().filter(|c| c.id == cut && c.map_logged && !c.failed) else {
            return self.send_cut(&from, CutMsg::VersionsLate { cut, late: None });
        };
        c.collecting_late = false;
        // The "threads" that held a version below `snp` have all registered by now: later
        // transactions get versions above it.
        if self.near.next_seq < c.snp.seq && c.snp.incarnation == self.incarnation {
            self.near.next_seq = c.snp.seq;
        }
        let late = c.late.clone();
        self.send_cut(&from, CutMsg::VersionsLate { cut, late: Some(late) });
    }

    /// Phase 3, second half: the union of every near's late transactions, to log.
    pub(crate) fn versions_skip(&mut self, from: VnodeId, cut: CutId, skip: BTreeSet<TxId>) {
        let Some(c) = self.versions.running.as_mut().filter(|c| c.id == cut && c.map_logged && !c.failed) else {
            return self.send_cut(&from, CutMsg::VersionsSkipLogged { cut, ok: false });
        };
        debug_assert!(c.late.is_subset(&skip), "my late transactions are missing from the skip set");
        if !c.skip_logged {
            c.skip_logged = true;
            self.out.append(Record::VersionsSkip { cut, skip });
        }
        self.send_cut(&from, CutMsg::VersionsSkipLogged { cut, ok: true });
    }

    /// The cut process ended (`End`): forget the cut and the sides it gave.
    pub(crate) fn versions_end(&mut self, cut: CutId) {
        if self.versions.running.as_ref().is_some_and(|c| c.id <= cut) {
            self.versions.running = None;
        }
        self.versions.sides.retain(|_, c| *c > cut);
        self.versions.read_sides.retain(|_, c| *c > cut);
    }

    /// Real-time safety gave up holding replies for `cut`: it must not succeed.
    pub(crate) fn versions_fail(&mut self, cut: CutId) {
        if let Some(c) = self.versions.running.as_mut().filter(|c| c.id == cut) {
            c.failed = true;
        }
    }

    /// Runs after every step: report phase 1 once the collected transactions finished, log the
    /// map once the awaited branches finished.
    pub(crate) fn versions_progress(&mut self) {
        let (near, unresolved, prepared) = (&self.near.txs, &self.versions.unresolved, &self.part.prepared);
        let Some(c) = self.versions.running.as_mut() else { return };
        c.collected.retain(|tx| near.contains_key(tx) || unresolved.contains_key(tx));
        c.awaited.retain(|b| prepared.contains_key(b));
        let (cut, snp) = (c.id, c.snp);
        if c.failed {
            if let Some(to) = c.report_to.take() {
                self.send_cut(&to, CutMsg::VersionsReport { cut, snp: None });
            }
            return;
        }
        if c.collected.is_empty() {
            if let Some(to) = c.report_to.take() {
                self.send_cut(&to, CutMsg::VersionsReport { cut, snp: Some(snp) });
            }
        }
        let Some(c) = self.versions.running.as_mut() else { return };
        let Some(map) = c.map.clone().filter(|_| c.awaited.is_empty()) else { return };
        if !c.map_logged {
            c.map_logged = true;
            assert!(c.awaited.is_empty(), "VersionsMap while a branch below the map is awaited");
            self.out.append(Record::VersionsMap { cut, map });
            self.note_holdings(cut);
        }
        let Some(c) = self.versions.running.as_mut() else { return };
        if let Some(to) = c.map_asked.take() {
            self.send_cut(&to, CutMsg::VersionsMapLogged { cut, ok: true });
        }
    }
}
