//! Catch-up (issue 33): a store vnode named a *learner* of a partition copies it from the
//! partition's primary while the primary keeps serving, then proposes itself a copy.
//!
//! ```text
//!   root: placement/p = <e>;primary,…+learner#e      (alter::promote, catch-up on)
//!   learner: PartitionReset{p, since: e}              its stale copy of p dropped, durably
//!   learner ──Ask{p, since, after}──▶ primary         a page at a time, in key order
//!   primary ──Page{entries, next}──▶ learner          once no branch from before e is open here
//!   learner: Copied{entries}                          each page logged, applied by version
//!   learner ──Propose placement/p = <e+1>;primary,…,learner──▶ root   once the last is durable
//! ```
//!
//! Why the learner ends up holding every committed write of `p`:
//! - every transaction routed by a chain that names the learner reaches it like a backup (the
//!   learners are at the end of the chain, `Placement::chain`), and a `Prepare` routed by an
//!   older chain is refused by every member that holds the newer one (`Placement::epoch_sum`);
//! - what committed under older chains is in the primary's store once no branch prepared there
//!   before the primary adopted a chain naming the learner is still open (the *fence*: each
//!   branch remembers the placement generation it was prepared under, `PreparedTx::generation`;
//!   a branch rebuilt from the log counts as older than any) — the primary takes part in every
//!   transaction that writes `p`, and applies a commit before it forgets the branch;
//! - a replica applies a write only if its version is newer (`Store::apply`), so a page and a
//!   live write of one key may arrive in either order.
//!
//! Why the learner drops what it held of `p` first (`PartitionReset`): it comes back from a
//! spell out of the chain, and what it holds may be a history the live copies do not share (a
//! branch it committed that a recovery without it rolled back, ARCHITECTURE's failover point 15),
//! with versions equal to theirs: taking the newer version would keep its own. The reset also
//! strips the writes to `p` from every branch it holds prepared — all of them from before it
//! joined, since a `Prepare` routed by the chain that names it cannot arrive before it holds
//! that chain. The reset is logged with the join it is for (`since`) and happens once per join,
//! across restarts (`VnodeImage::learner_resets`): a second reset would drop writes the learner
//! received as a member and the primary may have sent it no page for.
//!
//! Invariant (checked where the proposal is made): a learner proposes itself a copy only after
//! the primary's last page, and the proposal leaves through the outbox after every `Copied` is
//! durable. `--break switch-before-copied` proposes at once.

use crate::alter::cluster;
use crate::alter::{AlterInput, AlterRecord};
use crate::ids::{Key, PartitionId, VnodeId};
use crate::io::Timer;
use crate::message::{Body, Envelope};
use crate::placement::{ChainRecord, Learner};
use crate::record::Record;
use crate::store::ResolvedWrite;
use crate::vnode::Vnode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Bound;

/// Entries per page at most.
pub const COPY_PAGE_KEYS: usize = 256;
/// Bytes of keys and values per page at most (a page is one peer frame).
pub const COPY_PAGE_BYTES: usize = 256 * 1024;
/// Keys a page examines at most: the store holds every partition's keys in one order.
pub const COPY_EXAMINED_MAX: usize = 100_000;

/// What a learner and a partition's primary say to each other. Never coloured: it is no
/// transaction, and a learner's data is no part of any cut until it is a copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CopyMsg {
    /// The learner asks for the entries of `partition` after `after` (from the first when `None`).
    Ask { partition: PartitionId, since: u64, after: Option<Key> },
    /// The entries of `partition` after `after` (deleted keys with their versions too), up to
    /// `next` (the last key examined; `None`: the partition's last page).
    Page { partition: PartitionId, since: u64, after: Option<Key>, entries: Vec<ResolvedWrite>, next: Option<Key> },
    /// The primary cannot serve the page yet (a branch from before the learner joined is open,
    /// it does not hold the chain that names the learner, or a `versions` cut is open here): ask
    /// again in a moment.
    NotNow { partition: PartitionId, since: u64 },
}

/// A learner's progress on one partition (memory only: a restart copies again from the first
/// page, which is safe since pages apply by version and the reset is not repeated).
#[derive(Debug, Hash)]
struct Learning {
    since: u64,
    /// The page asked for (`None`: the first).
    after: Option<Key>,
    done: bool,
    /// When the page (or the proposal, once done) was last asked for.
    asked_at_us: u64,
    /// The next page is asked for at this time, not before: the copy rate's pace, or a primary
    /// that answered `NotNow`.
    paced_until_us: Option<u64>,
    /// When the last page came in (once `done`).
    done_at_us: u64,
}

/// A store vnode's catch-up state, as a learner and as a primary that serves pages.
#[derive(Debug, Hash)]
pub(crate) struct CatchUp {
    /// Raised on every change of the placement in use; 1 at start, so a branch rebuilt from the
    /// log (generation 0) is older than any.
    pub(crate) generation: u64,
    learning: BTreeMap<PartitionId, Learning>,
    /// Partition → the join its copy was last reset for (from the log: `PartitionReset`).
    pub(crate) resets: BTreeMap<u32, u64>,
    /// Proposals made as a learner, numbered from the incarnation up.
    proposals: u64,
    /// When this vnode last proposed copies.
    proposed_at_us: Option<u64>,
    /// Pages served and entries installed, for the host's metrics.
    pub(crate) pages_served: u64,
    pub(crate) entries_installed: u64,
}

impl Default for CatchUp {
    fn default() -> Self {
        CatchUp {
            generation: 1,
            learning: BTreeMap::new(),
            resets: BTreeMap::new(),
            proposals: 0,
            proposed_at_us: None,
            pages_served: 0,
            entries_installed: 0,
        }
    }
}

/// How long a learner waits for a page before asking again, and after a `NotNow`.
fn retry_us(v: &Vnode) -> u64 {
    v.cfg.tree.as_ref().map_or(50_000, |t| t.heartbeat_interval_us.max(1_000))
}

impl Vnode {
    /// The partitions this vnode catches up on, and how far (for status pages).
    pub fn learning(&self) -> Vec<(PartitionId, bool)> {
        self.catch_up.learning.iter().map(|(p, l)| (*p, l.done)).collect()
    }

    /// Pages this vnode served to learners as a primary, and entries it installed from pages as
    /// a learner, since it started (for metrics).
    pub fn copy_counts(&self) -> (u64, u64) {
        (self.catch_up.pages_served, self.catch_up.entries_installed)
    }

    /// After the placement in use changed or was confirmed: start, go on with, or forget the
    /// copy of every partition this vnode is a learner of.
    pub(crate) fn catch_up_follow(&mut self) {
        let me = self.cfg.id.clone();
        let placement = self.cfg.placement.clone();
        let mine: BTreeMap<PartitionId, u64> = (0..placement.partitions())
            .map(PartitionId)
            .filter_map(|p| Some((p, placement.learners(p).iter().find(|l| l.vnode == me)?.since)))
            .collect();
        self.catch_up.learning.retain(|p, l| mine.get(p) == Some(&l.since));
        for (p, since) in mine {
            if self.catch_up.resets.get(&p.0) != Some(&since) {
                self.reset_partition(p, since);
            }
            if !self.catch_up.learning.contains_key(&p) {
                let done = self.cfg.breaks.switch_before_copied;
                let now = self.now_us;
                let learning =
                    Learning { since, after: None, done, asked_at_us: now, paced_until_us: None, done_at_us: now };
                self.catch_up.learning.insert(p, learning);
                self.catch_up_next(p);
            }
        }
        // The chains changed under a proposal in flight (or it was applied): propose on the new ones.
        self.propose_copies(true);
    }

    /// Drops this vnode's copy of `p` (store and prepared writes), durably: it joins `p` anew.
    fn reset_partition(&mut self, p: PartitionId, since: u64) {
        let partitions = self.cfg.placement.partitions();
        self.out.append(Record::PartitionReset { partition: p, partitions, since });
        self.catch_up.resets.insert(p.0, since);
        let placement = self.cfg.placement.clone();
        let of_p = |k: &[u8]| placement.partition_of(k) == p;
        let dropped: Vec<Key> = self.store.iter().filter(|(k, _)| of_p(k)).map(|(k, _)| k.clone()).collect();
        for k in dropped {
            let before = crate::tally::counted(&self.store, &k);
            self.store.remove(&k);
            self.tallies.replace(p.0, before, None);
        }
        let locks = &mut self.locks;
        for (branch, prepared) in self.part.prepared.iter_mut() {
            prepared.rec.writes.retain(|w| !of_p(&w.key));
            for k in prepared.locked.iter().filter(|k| of_p(k)) {
                locks.release(k, branch);
            }
            prepared.locked.retain(|k| !of_p(k));
        }
    }

    /// Asks `p`'s primary for the next page, or proposes once the last one is in.
    fn catch_up_next(&mut self, p: PartitionId) {
        let Some(l) = self.catch_up.learning.get_mut(&p) else { return };
        l.asked_at_us = self.now_us;
        l.paced_until_us = None;
        if l.done {
            return self.propose_copies(false);
        }
        let ask = CopyMsg::Ask { partition: p, since: l.since, after: l.after.clone() };
        let primary = self.cfg.placement.primary(p).clone();
        self.send_copy(&primary, ask);
        self.set_timer(Timer::CatchUp(p), retry_us(self));
    }

    /// Proposes, in one alteration, the chains of every partition this vnode has finished copying
    /// with it moved from the learners to the copies. While others are still copying it waits a
    /// little for them (a returning vnode learns its partitions together), so that one epoch
    /// change switches them all: each change of placement fails a cut running across it, and
    /// one alteration per partition kept every cut after a heal failing (`--tree --failover
    /// --catch-up --workload append --vnodes 12 --fanout 2` seed 322, liveness). Not again within
    /// `20 × retry` unless `forced` (the chains changed).
    ///
    /// Invariant: only partitions whose copy is done (the primary's last page logged here, and the
    /// proposal held by the outbox until that record is durable).
    fn propose_copies(&mut self, forced: bool) {
        let (retry, now, me) = (retry_us(self), self.now_us, self.cfg.id.clone());
        let done: Vec<PartitionId> = self.catch_up.learning.iter().filter(|(_, l)| l.done).map(|(p, _)| *p).collect();
        let Some(first) = done.first().copied() else { return };
        if !forced && self.catch_up.proposed_at_us.is_some_and(|t| now < t + retry * 20) {
            return;
        }
        let first_done_us = done.iter().map(|p| self.catch_up.learning[p].done_at_us).min().unwrap_or(now);
        let gather_until_us = first_done_us + retry * 5;
        if self.catch_up.learning.values().any(|l| !l.done) && now < gather_until_us {
            return self.set_timer(Timer::CatchUp(first), gather_until_us - now);
        }
        // Not across a running cut, which the switch would fail — unless waiting long already.
        let cut_running = self.tree.as_ref().is_some_and(|t| cluster::cut_running(t.alter.metadata()));
        if cut_running && now < first_done_us + retry * 100 {
            return self.set_timer(Timer::CatchUp(first), retry);
        }
        let next = |p: PartitionId| {
            let old = self.cfg.placement.record(p);
            let learners: Vec<Learner> = old.learners.iter().filter(|l| l.vnode != me).cloned().collect();
            let mut chain = old.chain.clone();
            chain.push(me.clone());
            (p, ChainRecord { epoch: old.epoch + 1, chain, learners })
        };
        let chains: Vec<(PartitionId, ChainRecord)> = done.iter().map(|p| next(*p)).collect();
        assert!(done.iter().all(|p| self.catch_up.learning[p].done), "{me} proposes a copy it has not made");
        self.catch_up.proposals += 1;
        self.catch_up.proposed_at_us = Some(now);
        let n = (u64::from(self.incarnation) + 1) << 32 | (self.catch_up.proposals & 0xffff_ffff);
        let record: AlterRecord = cluster::chains_record(&chains);
        self.alter_input(AlterInput::Propose { n, record });
        self.set_timer(Timer::CatchUp(first), retry * 20);
    }

    /// A learner's timer: ask again for a page that did not come, or propose again.
    pub(crate) fn catch_up_timer(&mut self, p: PartitionId) {
        let retry = retry_us(self);
        let Some(l) = self.catch_up.learning.get(&p) else { return };
        if l.done {
            return self.propose_copies(false);
        }
        let due = match l.paced_until_us {
            Some(at) => self.now_us >= at,
            None => self.now_us >= l.asked_at_us + retry,
        };
        if due {
            self.catch_up_next(p);
        }
    }

    pub(crate) fn on_copy(&mut self, from: VnodeId, msg: CopyMsg) {
        match msg {
            CopyMsg::Ask { partition, since, after } => self.serve_page(from, partition, since, after),
            CopyMsg::Page { partition, since, after, entries, next } => {
                self.install_page(partition, since, after, entries, next)
            }
            CopyMsg::NotNow { partition, since } => {
                let retry = retry_us(self);
                let now = self.now_us;
                if let Some(l) = self.catch_up.learning.get_mut(&partition).filter(|l| l.since == since && !l.done) {
                    l.paced_until_us = Some(now + retry);
                    self.set_timer(Timer::CatchUp(partition), retry);
                }
            }
        }
    }

    /// As `p`'s primary: the next page for a learner, once the fence allows.
    fn serve_page(&mut self, learner: VnodeId, p: PartitionId, since: u64, after: Option<Key>) {
        let placement = &self.cfg.placement;
        let named = p.0 < placement.partitions()
            && placement.primary(p) == &self.cfg.id
            && placement.learners(p).contains(&Learner { vnode: learner.clone(), since });
        // Under `versions` a page must hold only what every cut not yet ended here includes.
        let cut_open = self.cfg.strategy == crate::config::CutStrategy::Versions
            && self.versions.cut_open()
            && !self.cfg.breaks.copy_during_versions_cut;
        if !named || !self.may_serve() || self.fence_open(p) || cut_open {
            return self.send_copy(&learner, CopyMsg::NotNow { partition: p, since });
        }
        let (entries, next) = self.page_of(p, after.as_ref());
        self.catch_up.pages_served += 1;
        self.send_copy(&learner, CopyMsg::Page { partition: p, since, after, entries, next });
    }

    /// Whether a branch prepared here under an older placement still writes `p`: what it
    /// commits may not have reached the learner, which was not in its chain.
    fn fence_open(&self, p: PartitionId) -> bool {
        if self.cfg.breaks.copy_ignores_fence {
            return false;
        }
        let placement = &self.cfg.placement;
        let generation = self.catch_up.generation;
        self.part
            .prepared
            .values()
            .any(|b| b.generation < generation && b.rec.writes.iter().any(|w| placement.partition_of(&w.key) == p))
    }

    /// The committed entries of `p` after `after`, in key order, and where the next page starts
    /// (after the last key examined; `None` once the store is examined to its end).
    fn page_of(&self, p: PartitionId, after: Option<&Key>) -> (Vec<ResolvedWrite>, Option<Key>) {
        let from = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.as_slice()));
        let mut entries = vec![];
        let mut bytes = 0;
        let mut last: Option<&Key> = None;
        for (examined, (key, entry)) in self.store.range(from).enumerate() {
            let full = entries.len() >= COPY_PAGE_KEYS || bytes >= COPY_PAGE_BYTES;
            if full || examined >= COPY_EXAMINED_MAX {
                return (entries, last.cloned());
            }
            last = Some(key);
            if self.cfg.placement.partition_of(key) == p {
                bytes += key.len() + entry.value.as_ref().map_or(0, Vec::len);
                let (value, version, deadline_ms) = (entry.value.clone(), entry.version, entry.deadline_ms);
                entries.push(ResolvedWrite { key: key.clone(), value, version, deadline_ms });
            }
        }
        (entries, None)
    }

    /// As a learner: logs and applies a page, then asks for the next or proposes.
    fn install_page(
        &mut self,
        p: PartitionId,
        since: u64,
        after: Option<Key>,
        entries: Vec<ResolvedWrite>,
        next: Option<Key>,
    ) {
        let expected = self.catch_up.learning.get(&p).is_some_and(|l| l.since == since && !l.done && l.after == after);
        if !expected {
            return; // a late or repeated page
        }
        assert!(entries.iter().all(|w| self.cfg.placement.partition_of(&w.key) == p), "a page of another partition");
        if !entries.is_empty() {
            self.catch_up.entries_installed += entries.len() as u64;
            self.out.append(Record::Copied { partition: p, writes: entries.clone() });
            self.apply_committed(&entries, None);
        }
        let pace_us = self.copy_pace_us(&entries);
        let now = self.now_us;
        let l = self.catch_up.learning.get_mut(&p).expect("checked above");
        match next {
            Some(key) => l.after = Some(key),
            None => (l.done, l.done_at_us) = (true, now),
        }
        if pace_us == 0 || l.done {
            return self.catch_up_next(p);
        }
        l.paced_until_us = Some(now + pace_us);
        self.set_timer(Timer::CatchUp(p), pace_us);
    }

    /// How long a page of `entries` keeps the next one of its partition waiting under the cluster
    /// setting `copy_bytes_per_s` (0 when unset): a learner copies at most that fast in all, its
    /// partitions copying side by side each at that rate over their number.
    fn copy_pace_us(&self, entries: &[ResolvedWrite]) -> u64 {
        let Some(rate) = self.tree.as_ref().and_then(|t| cluster::copy_bytes_per_s(t.alter.metadata())) else {
            return 0;
        };
        let copying = self.catch_up.learning.values().filter(|l| !l.done).count().max(1) as u64;
        let bytes: u64 = entries.iter().map(|w| (w.key.len() + w.value.as_ref().map_or(0, Vec::len)) as u64).sum();
        bytes.saturating_mul(1_000_000).saturating_mul(copying) / rate
    }

    fn send_copy(&mut self, to: &VnodeId, msg: CopyMsg) {
        let env = Envelope { from: self.cfg.id.clone(), to: to.clone(), cut: None, body: Body::Copy(msg) };
        self.out.promise(crate::io::Output::Send(env));
    }
}
