//! Real-time safety (DESIGN §4, beyond Ignite): no client observes an effect of an *after*
//! transaction of cut C — its commit acknowledgement, or a read of a value it wrote — before this
//! vnode knows that every vnode has started C (phase STARTED, or END). Such replies are held here;
//! commits never are.
//!
//! Why it suffices: a client that saw T1 (stamped C) only sends T2 after every vnode started C, so
//! T2 prepares after `CutStart{C}` everywhere and is on the after side too — "T2 restored, T1 not"
//! cannot happen.
//!
//! Liveness: a held reply is released after `held_reply_timeout_us` even without STARTED; this
//! vnode then fails its local cut C and never confirms STARTED{C}, so C cannot be declared
//! successful and the early release cannot be observed in a restore.
//! Invariant: a reply about cut C leaves only when `started_upto >= C`, or C was refused here.

use crate::ids::{ClientId, CutId, Key};
use crate::io::{Output, Response, Timer};
use crate::store::ResolvedWrite;
use crate::vnode::Vnode;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Default, Hash)]
pub struct RealTime {
    /// The highest cut known to have been started by every vnode (or to have ended).
    started_upto: Option<CutId>,
    /// The highest cut this vnode gave up holding replies for: it will not confirm its STARTED.
    refused_upto: Option<CutId>,
    held: VecDeque<Held>,
    /// Keys whose current value was written by a transaction stamped with a cut not yet known
    /// to be started everywhere: a read of them is held like a commit acknowledgement.
    reveal: BTreeMap<Key, CutId>,
    /// How long each released reply was held (drained by the driver for metrics).
    hold_durations_us: Vec<u64>,
}

#[derive(Debug, Hash)]
struct Held {
    cut: CutId,
    since_us: u64,
    client: ClientId,
    req: u64,
    response: Response,
}

impl RealTime {
    fn needs_hold(&self, cut: Option<CutId>) -> Option<CutId> {
        cut.filter(|c| self.started_upto < Some(*c))
    }

    /// The cut a read of `key` would reveal, if its reply must be held.
    pub(crate) fn held_count(&self) -> usize {
        self.held.len()
    }

    pub(crate) fn reveals(&self, key: &[u8]) -> Option<CutId> {
        self.reveal.get(key).copied().filter(|c| self.started_upto < Some(*c))
    }

    /// `reveals`, as a GET's answer uses it (the `unheld-reads` break holds none).
    pub(crate) fn read_reveals(&self, key: &[u8], breaks: &crate::Breaks) -> Option<CutId> {
        if breaks.unheld_reads {
            return None;
        }
        self.reveal.get(key).copied().filter(|c| self.started_upto < Some(*c))
    }

    /// Whether this vnode knows that every vnode has started `cut` (or that it ended).
    pub(crate) fn started_everywhere(&self, cut: CutId) -> bool {
        self.started_upto >= Some(cut)
    }

    pub(crate) fn refused(&self, cut: CutId) -> bool {
        self.refused_upto >= Some(cut)
    }
}

impl Vnode {
    /// Replies to a client about something stamped `cut` (a commit, or a value written by it).
    pub(crate) fn reply_revealing(&mut self, cut: Option<CutId>, client: ClientId, req: u64, response: Response) {
        if let Some(response) = self.hold_revealing(cut, client, req, response) {
            self.reply(client, req, response);
        }
    }

    /// `reply_revealing` for a reply that promises nothing about this vnode's log (a near's answer
    /// to a 1PC transaction, decided and logged down its chain): when real-time safety does not
    /// hold it, it leaves at once. One it held is released like any reply, held behind the log.
    pub(crate) fn reply_revealing_unheld(
        &mut self,
        cut: Option<CutId>,
        client: ClientId,
        req: u64,
        response: Response,
    ) {
        if let Some(response) = self.hold_revealing(cut, client, req, response) {
            self.out.unheld(Output::Reply { client, req, response });
        }
    }

    /// Holds the reply if it reveals a cut not yet started everywhere; else gives it back.
    fn hold_revealing(
        &mut self,
        cut: Option<CutId>,
        client: ClientId,
        req: u64,
        response: Response,
    ) -> Option<Response> {
        let hold = if self.cfg.real_time_safety { self.rt.needs_hold(cut) } else { None };
        let Some(cut) = hold else {
            debug_assert!(!self.cfg.real_time_safety || self.rt.needs_hold(cut).is_none());
            return Some(response);
        };
        if !self.rt.held.iter().any(|h| h.cut == cut) {
            self.set_timer(Timer::HeldReplies(cut), self.cfg.timeouts.held_reply_timeout_us);
        }
        self.rt.held.push_back(Held { cut, since_us: self.now_us, client, req, response });
        None
    }

    /// Applies committed writes, remembering which values reveal a cut not yet started everywhere.
    pub(crate) fn apply_committed(&mut self, writes: &[ResolvedWrite], tx_cut: Option<CutId>) {
        for w in writes {
            // A write no newer than the key's entry changes nothing: its tally is not computed
            // (an MD5 and two CRCs per write otherwise, on every replica's hot path).
            if self.store.entry(&w.key).is_some_and(|e| w.version <= e.version) {
                continue;
            }
            let before = crate::tally::counted(&self.store, &w.key);
            let applied = self.store.apply(w);
            // A write that does not apply still gives a new key its (empty) entry.
            if applied || before.is_none() {
                let partition = self.cfg.placement.partition_of(&w.key).0;
                let after = crate::tally::counted(&self.store, &w.key);
                let before = before.filter(|_| !self.cfg.breaks.tally_keeps_overwritten);
                self.tallies.replace(partition, before, after);
            }
            if !applied {
                continue;
            }
            self.expiry_applied(w);
            match self.rt.needs_hold(tx_cut) {
                Some(cut) => drop(self.rt.reveal.insert(w.key.clone(), cut)),
                None => drop(self.rt.reveal.remove(&w.key)),
            }
        }
    }

    /// STARTED{cut} (or END{cut}) reached this vnode: every vnode has started `cut`.
    pub(crate) fn cut_started_everywhere(&mut self, cut: CutId) {
        self.rt.started_upto = self.rt.started_upto.max(Some(cut));
        let upto = self.rt.started_upto;
        self.rt.reveal.retain(|_, c| Some(*c) > upto);
        self.release_held(|h| Some(h.cut) <= upto);
    }

    /// Held too long: release, and make sure `cut` can never be declared successful.
    pub(crate) fn held_replies_timeout(&mut self, cut: CutId) {
        if !self.rt.held.iter().any(|h| h.cut <= cut) {
            return;
        }
        self.rt.refused_upto = self.rt.refused_upto.max(Some(cut));
        self.fail_local_cut(cut);
        self.versions_fail(cut);
        self.release_held(|h| h.cut <= cut);
    }

    fn release_held(&mut self, release: impl Fn(&Held) -> bool) {
        let (go, keep): (VecDeque<Held>, VecDeque<Held>) =
            std::mem::take(&mut self.rt.held).into_iter().partition(release);
        self.rt.held = keep;
        for h in go {
            // Invariant (module): a reply about cut C leaves only once C started everywhere, or
            // was refused here (so C can never be declared successful).
            assert!(
                self.rt.started_upto >= Some(h.cut) || self.rt.refused(h.cut),
                "a reply about {:?} released before it started everywhere",
                h.cut
            );
            self.rt.hold_durations_us.push(self.now_us - h.since_us);
            self.reply(h.client, h.req, h.response);
        }
    }

    /// How long each reply released since the last call was held, in microseconds.
    pub fn take_hold_durations_us(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.rt.hold_durations_us)
    }
}
