//! Expiry (issue 34): a key's deadline is part of its committed value (`Entry::deadline_ms`), and
//! only a partition's primary decides that a key has expired — by committing a delete through the
//! partition's chain, like any transaction (Redis propagates a `DEL` the same way).
//!
//! - **Lazily**: a `GET` at the primary that finds its key's deadline passed waits until the
//!   primary's expiry transaction (`WriteOp::Expire`) ends, then reads again — so no read is told
//!   "absent" before the delete is committed and durable, and none returns a value past its
//!   deadline by the primary's clock. A transaction whose read check names a key expired since it
//!   read is refused as a conflict (`txn::locks`); its retry reads again.
//! - **Actively**: while this vnode leads keys with deadlines, a timer every `TICK_US` starts the
//!   expiry of up to `PER_TICK` keys whose deadline passed, oldest deadline first
//!   (`ExpiryState::index`), with at most `IN_FLIGHT_MAX` expiry transactions at a time.
//!
//! **A time that only moves forward** (`Vnode::clock_ms`): the primary compares deadlines with its
//! wall clock raised to the largest time any expiry it holds was decided at. `WriteOp::Expire`
//! resolves to a tombstone that keeps that time (`ResolvedWrite::deadline_ms` without a value),
//! every copy of the partition applies it, logs it, and keeps it in its store; a vnode raises its
//! clock on applying one and on recovery. So a replica promoted with a clock behind its old
//! primary's never serves a key the old primary expired (the delete is committed on every copy
//! before anyone is told), and never holds time below an expiry it applied. Between primaries of
//! different partitions, deadlines are as good as the hosts' clocks agree (as in Redis Cluster).
//!
//! Restores keep absolute deadlines: a key whose deadline passed while it lay in a snapshot
//! expires when first read after the restore, or by the active expiry.
//!
//! Invariant: an expiry transaction writes only `WriteOp::Expire` of one key and reads nothing;
//! it commits only where the key's deadline has passed by the evaluating primary's clock
//! (`Store::resolve`). `--break serve-expired` answers reads of expired keys with their value.

use crate::ids::{ClientId, Key};
use crate::io::{Request, Response, Timer};
use crate::store::{ResolvedWrite, Write, WriteOp};
use crate::txn::read_wait::Reader;
use crate::vnode::Vnode;
use std::collections::{BTreeMap, BTreeSet};

/// The client id a vnode's own expiry transactions run under. Sessions are numbered from 1 up;
/// the drivers' own clients take the top ids (the admin API `u64::MAX - 1`, the simulator's
/// operator `u64::MAX`): this one is far from both.
pub const EXPIRY_CLIENT: ClientId = ClientId(u64::MAX - 255);
/// How often the active expiry looks for keys past their deadline.
pub const TICK_US: u64 = 100_000;
/// Keys whose expiry one tick starts at most.
pub const PER_TICK: usize = 20;
/// Index entries one tick examines at most (stale ones, and those of keys this vnode does not
/// lead, are dropped as they are examined).
pub const EXAMINE_MAX: usize = 256;
/// Expiry transactions in flight at most on one vnode.
pub const IN_FLIGHT_MAX: usize = 64;
/// Reads that wait for expiries at most on one vnode; past it, a read is told to try again.
pub const WAITING_MAX: usize = 4_096;
/// How often one key's expiry may fail in a row before the reads waiting for it are told to try
/// again (the primary moved, or a conflicting write keeps winning).
pub const ATTEMPTS_MAX: u32 = 3;

/// A vnode's expiry state (memory only: rebuilt from the store at recovery).
#[derive(Debug, Default, Hash)]
pub(crate) struct ExpiryState {
    /// The largest time an expiry applied here was decided at (`Vnode::clock_ms`).
    floor_ms: u64,
    /// `(deadline, key)` of every value with a deadline, as far as this vnode applied them. An
    /// entry may be stale (the key was written since); the store is checked before acting.
    index: BTreeSet<(u64, Key)>,
    /// Keys whose expiry transaction is in flight: its request number and the failed attempts.
    in_flight: BTreeMap<Key, (u64, u32)>,
    /// Request number → key, for the replies.
    by_req: BTreeMap<u64, Key>,
    /// Reads waiting for their key's expiry.
    waiting: BTreeMap<Key, Vec<Reader>>,
    next_req: u64,
    /// Whether the tick timer is set.
    ticking: bool,
    /// The partitions this vnode led when the index was last built: the index holds only keys of
    /// partitions it leads, and is built again when it comes to lead others (a promotion).
    led: BTreeSet<u32>,
    /// Keys expired by this vnode as a primary since it started (for metrics).
    pub(crate) expired: u64,
}

impl ExpiryState {
    fn waiting_count(&self) -> usize {
        self.waiting.values().map(Vec::len).sum()
    }
}

impl Vnode {
    /// The time deadlines are compared with here, in Unix milliseconds: the wall clock, never
    /// below an expiry this vnode applied.
    pub fn clock_ms(&self) -> u64 {
        (self.now_us / 1_000).max(self.expiry.floor_ms)
    }

    /// Keys this vnode expired as a primary since it started.
    pub fn keys_expired(&self) -> u64 {
        self.expiry.expired
    }

    /// At recovery, and when this vnode comes to lead partitions it did not: the floor, and the
    /// index of the keys it leads, from the store (one pass).
    pub(crate) fn expiry_rebuild(&mut self) {
        let led = self.led_partitions();
        let (mut index, mut floor_ms) = (BTreeSet::new(), self.expiry.floor_ms);
        for (key, e) in self.store.iter() {
            match (e.deadline_ms, &e.value) {
                (Some(at), Some(_)) if led.contains(&self.cfg.placement.partition_of(key).0) => {
                    index.insert((at, key.clone()));
                }
                (Some(at), None) => floor_ms = floor_ms.max(at),
                _ => {}
            }
        }
        (self.expiry.index, self.expiry.floor_ms, self.expiry.led) = (index, floor_ms, led);
        if self.booted {
            self.expiry_tick_soon();
        }
    }

    /// After the placement in use changed: the index is built again if this vnode leads a
    /// partition it did not.
    pub(crate) fn expiry_follow(&mut self) {
        if !self.led_partitions().is_subset(&self.expiry.led) {
            self.expiry_rebuild();
        }
    }

    fn led_partitions(&self) -> BTreeSet<u32> {
        let placement = &self.cfg.placement;
        let me = &self.cfg.id;
        (0..placement.partitions()).filter(|p| placement.primary(crate::ids::PartitionId(*p)) == me).collect()
    }

    /// A write applied to the store (a commit, a page copied): its deadline indexed if this vnode
    /// leads the key, its expiry time raising the clock.
    pub(crate) fn expiry_applied(&mut self, w: &ResolvedWrite) {
        let Some(at) = w.deadline_ms else { return };
        match w.value {
            Some(_) if self.leads(&w.key) => drop(self.expiry.index.insert((at, w.key.clone()))),
            Some(_) => {}
            None => self.expiry.floor_ms = self.expiry.floor_ms.max(at),
        }
        self.expiry_tick_soon();
    }

    /// A read at the primary of a key whose deadline has passed: it waits for the expiry.
    /// Returns `false` when the key has not expired (the read goes on).
    pub(crate) fn read_waits_for_expiry(&mut self, reader: &Reader, key: &Key) -> bool {
        let expired = self.store.entry(key).is_some_and(|e| e.is_expired(self.clock_ms()));
        if !expired || self.cfg.breaks.serve_expired {
            return false;
        }
        if self.expiry.waiting_count() >= WAITING_MAX {
            self.refuse_read(reader.clone(), "TRYAGAIN too many reads wait for expiries");
            return true;
        }
        self.expiry.waiting.entry(key.clone()).or_default().push(reader.clone());
        self.expire_key(key.clone());
        true
    }

    /// Starts the expiry transaction of `key` unless one is in flight (or too many are, or this
    /// vnode does not serve clients yet: a transaction needs its `Boot` durable, `txn::near`).
    fn expire_key(&mut self, key: Key) {
        if self.expiry.in_flight.contains_key(&key) {
            return;
        }
        let serving = self.booted && self.tree_synced();
        if self.expiry.in_flight.len() >= IN_FLIGHT_MAX || !serving {
            return self.expiry_tick_soon(); // the tick starts it later; its readers wait
        }
        self.expiry.next_req += 1;
        let req = self.expiry.next_req;
        self.expiry.in_flight.insert(key.clone(), (req, 0));
        self.expiry.by_req.insert(req, key.clone());
        // Through the door every client's request takes (a blocking cut holds it like any other).
        let request = Request::Txn { reads: vec![], writes: vec![Write { key, op: WriteOp::Expire }] };
        self.on_client(EXPIRY_CLIENT, req, request);
    }

    /// The answer to one of this vnode's expiry transactions: the reads waiting for the key read
    /// again (now absent, or written since), or — after `ATTEMPTS_MAX` failures — try again.
    pub(crate) fn on_expiry_answer(&mut self, req: u64, response: Response) {
        let Some(key) = self.expiry.by_req.remove(&req) else { return };
        let attempts = self.expiry.in_flight.remove(&key).map_or(0, |(_, a)| a);
        let committed = matches!(response, Response::Committed { .. });
        self.expiry.expired += committed as u64;
        let still_expired = self.store.entry(&key).is_some_and(|e| e.is_expired(self.clock_ms()));
        if still_expired && attempts + 1 < ATTEMPTS_MAX && self.leads(&key) {
            self.expire_key(key.clone());
            if let Some((r, _)) = self.expiry.in_flight.get(&key).copied() {
                self.expiry.in_flight.insert(key, (r, attempts + 1));
            }
            return;
        }
        for reader in self.expiry.waiting.remove(&key).unwrap_or_default() {
            match still_expired {
                true => self.refuse_read(reader, "TRYAGAIN the key's expiry did not commit"),
                false => self.read_at_primary(reader, key.clone()),
            }
        }
    }

    /// Keeps the tick timer set while keys with deadlines are indexed here.
    pub(crate) fn expiry_tick_soon(&mut self) {
        let work = !self.expiry.index.is_empty() || !self.expiry.waiting.is_empty();
        if !self.expiry.ticking && work {
            self.expiry.ticking = true;
            self.set_timer(Timer::Expiry, TICK_US);
        }
    }

    /// The active expiry: up to `PER_TICK` keys this vnode leads whose deadline passed.
    pub(crate) fn expiry_tick(&mut self) {
        self.expiry.ticking = false;
        let now_ms = self.clock_ms();
        let (mut started, mut examined) = (0, 0);
        while started < PER_TICK && examined < EXAMINE_MAX && self.expiry.in_flight.len() < IN_FLIGHT_MAX {
            let Some((at, key)) = self.expiry.index.first().cloned().filter(|(at, _)| *at <= now_ms) else { break };
            examined += 1;
            self.expiry.index.remove(&(at, key.clone()));
            let current = self.store.entry(&key).is_some_and(|e| e.deadline_ms == Some(at) && e.is_expired(now_ms));
            if current && self.leads(&key) && self.may_serve() {
                self.expire_key(key);
                started += 1;
            }
        }
        // Keys waiting for room in flight: their readers wait, the next tick starts them.
        let waiting: Vec<Key> = self.expiry.waiting.keys().cloned().collect();
        for key in waiting {
            self.expire_key(key);
        }
        self.expiry_tick_soon();
    }
}
