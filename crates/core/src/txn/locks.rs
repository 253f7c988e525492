//! A primary's locks (DESIGN §3: no-wait locking) — and how 1PC transactions pipeline on a locked
//! key instead of aborting.
//!
//! A lock is held from prepare to finish. Between those, a 2PC branch waits for its near, which
//! may abort it, so a transaction that meets its lock aborts (no waiting: no deadlock). A 1PC
//! branch is different: its outcome is decided by the chain's last vnode, its *first committer*,
//! which receives the chain's prepares in the order the primary sent them (links are FIFO). So a
//! 1PC transaction T2 that meets the lock of a 1PC transaction T1 with the same first committer is
//! evaluated on T1's (not yet committed) writes and sent down the chain after it, carrying
//! `after = [T1]`; the first committer commits T2 only if it has committed T1 — otherwise
//! (T1 lost on a broken link, or refused) it refuses T2. A hot key then commits at the rate the
//! chain carries prepares, one fsync per batch at each hop, not one round trip per transaction.
//!
//! Invariant: a key's holders are ordered oldest first; the value a new 1PC transaction is
//! evaluated on is the last holder's write (or the committed value).
//! Invariant: a first committer commits a transaction only after every transaction in its `after`.
//! Invariant: only a live (not recovered), 1PC primary branch with writes is built upon — a
//! recovered branch's first committer is asked, not followed.

use crate::collection::{self, owner_prefix};
use crate::ids::Value;
use crate::ids::{Branch, Key, Role, TxId, VnodeId};
use crate::store::{EvalError, ReadCheck, ResolvedWrite, Store, Write};
use crate::vnode::Vnode;
use crate::AbortReason;
use std::collections::{BTreeMap, BTreeSet};

/// Key → the branches holding its lock, oldest first.
#[derive(Debug, Default, Hash)]
pub struct LockTable {
    held: BTreeMap<Key, Vec<Branch>>,
}

impl LockTable {
    pub fn holders(&self, key: &[u8]) -> &[Branch] {
        self.held.get(key).map_or(&[], |v| v.as_slice())
    }

    pub(crate) fn acquire(&mut self, key: &Key, branch: &Branch) {
        let holders = self.held.entry(key.clone()).or_default();
        if !holders.contains(branch) {
            holders.push(branch.clone());
        }
    }

    pub(crate) fn release(&mut self, key: &Key, branch: &Branch) {
        if let Some(holders) = self.held.get_mut(key) {
            holders.retain(|b| b != branch);
            if holders.is_empty() {
                self.held.remove(key);
            }
        }
    }
}

/// A transaction's writes evaluated at its primary, and the transactions it was evaluated after.
pub(crate) struct Evaluated {
    pub writes: Vec<ResolvedWrite>,
    pub after: Vec<TxId>,
}

impl Vnode {
    /// No-wait locking and `WATCH` validation, then evaluation of each write in order — on the
    /// committed value, or, for a pipelined 1PC transaction, on the last holder's write.
    /// `first_committer` is `Some` for a 1PC transaction.
    pub(crate) fn validate_and_resolve(
        &self,
        tx: &TxId,
        reads: &[ReadCheck],
        writes: &[Write],
        first_committer: Option<&VnodeId>,
    ) -> Result<Evaluated, AbortReason> {
        let keys: BTreeSet<&Key> = reads.iter().map(|r| &r.key).chain(writes.iter().map(|w| &w.key)).collect();
        let mut scratch: Store = self.store.subset(keys.iter().copied());
        let mut after = BTreeSet::new();
        let mut bases: Vec<&[ResolvedWrite]> = vec![];
        for key in keys {
            let Some(last) = self.locks.holders(key).last().filter(|b| &b.tx != tx) else { continue };
            if self.cfg.breaks.skip_lock {
                continue;
            }
            let base = first_committer.and_then(|fc| self.pipelined_on(last, fc));
            let Some(base) = base else { return Err(AbortReason::LockConflict { key: key.clone() }) };
            if let Some(w) = base.iter().find(|w| &w.key == key) {
                scratch.apply(w);
                after.insert(last.tx.clone());
                bases.push(base);
            }
        }
        let now_ms = self.clock_ms();
        for r in reads {
            // A value read before its deadline that has passed since: what the reply showed is no
            // longer the key's value. The transaction tries again, and its read waits for the
            // expiry (`expiry`: a key is expired by a committed delete before anyone is told).
            if self.store.entry(&r.key).is_some_and(|e| e.is_expired(now_ms)) {
                return Err(AbortReason::LockConflict { key: r.key.clone() });
            }
            // A WATCH fails only on a committed write: its failure reveals that write, and the
            // reply is held by its cut (DESIGN §4). A version moved only by a pipelined predecessor
            // not yet decided is a conflict with a transaction in flight, which reveals nothing.
            if self.store.version(&r.key) != r.version {
                return Err(AbortReason::WatchFailed { key: r.key.clone() });
            }
            if scratch.version(&r.key) != r.version {
                return Err(AbortReason::LockConflict { key: r.key.clone() });
            }
        }
        let heads_before: BTreeMap<&Key, Option<Value>> =
            writes.iter().filter_map(|w| Some((&w.key, scratch.entry(&w.key)?.value.clone()))).collect();
        let mut resolved: Vec<ResolvedWrite> = Vec::with_capacity(writes.len());
        for w in writes {
            let r = scratch.resolve(&w.key, &w.op, now_ms).map_err(|e| match e {
                EvalError::NotAnInteger => AbortReason::NotAnInteger { key: w.key.clone() },
                EvalError::NotExpired => AbortReason::LockConflict { key: w.key.clone() },
                EvalError::WrongType => AbortReason::WrongType { key: w.key.clone() },
            })?;
            if r.value.as_ref().is_some_and(|v| v.len() > self.cfg.limits.value_max_bytes) {
                return Err(AbortReason::ValueTooLarge { key: w.key.clone() });
            }
            scratch.apply(&r);
            resolved.retain(|earlier| earlier.key != r.key);
            resolved.push(r);
        }
        let heads_before = heads_before.into_iter().filter(|_| !self.cfg.breaks.elements_outlive_collection);
        for (key, before) in heads_before {
            let after = resolved.iter().rev().find(|r| &r.key == key).and_then(|r| r.value.as_deref());
            if collection::drops(before.as_deref(), after) {
                let dropped = self.elements_dropped(key, &resolved, &bases);
                if dropped.len() as u64 > collection::DROP_INLINE_MAX {
                    return Err(AbortReason::CollectionTooLarge { key: key.clone() });
                }
                resolved.extend(dropped);
            }
        }
        if self.memory_full && resolved.iter().any(|w| w.value.is_some()) {
            return Err(AbortReason::OutOfMemory);
        }
        Ok(Evaluated { writes: resolved, after: after.into_iter().collect() })
    }

    /// The deletes of every live element of collection `key` that `resolved` does not write: its
    /// head is deleted or replaced by something else (`collection`: no element outlives its
    /// collection). Elements a pipelined predecessor (`bases`) wrote count, at its versions: they
    /// are committed before this transaction is.
    fn elements_dropped(
        &self,
        key: &Key,
        resolved: &[ResolvedWrite],
        bases: &[&[ResolvedWrite]],
    ) -> Vec<ResolvedWrite> {
        let prefix = owner_prefix(key);
        let written: BTreeSet<&Key> = resolved.iter().map(|r| &r.key).collect();
        let mut in_bases = bases.iter().flat_map(|b| b.iter()).filter(|w| w.key.starts_with(&prefix)).peekable();
        if in_bases.peek().is_none() {
            return self.store.drop_elements(key, &written);
        }
        // On a pipelined predecessor's writes: the elements as that predecessor leaves them.
        let mut scratch = self.store.filtered(|k| k.starts_with(&prefix));
        for w in in_bases {
            scratch.apply(w);
        }
        scratch.drop_elements(key, &written)
    }

    /// The writes of `holder` if a 1PC transaction decided by `first_committer` may be pipelined
    /// after it: a live 1PC primary branch with writes, decided by the same first committer.
    fn pipelined_on(&self, holder: &Branch, first_committer: &VnodeId) -> Option<&[ResolvedWrite]> {
        let p = self.part.prepared.get(holder)?;
        let fits = holder.role == Role::Primary
            && p.rec.one_phase
            && !p.recovered
            && !p.read_only
            && &p.rec.first_committer == first_committer;
        fits.then_some(p.rec.writes.as_slice())
    }

    /// Locks the keys a primary branch read or wrote; returns them for release at finish.
    pub(crate) fn lock(&mut self, branch: &Branch, reads: &[ReadCheck], writes: &[ResolvedWrite]) -> Vec<Key> {
        if self.cfg.breaks.skip_lock {
            return vec![];
        }
        let mut keys: Vec<Key> =
            reads.iter().map(|r| r.key.clone()).chain(writes.iter().map(|w| w.key.clone())).collect();
        keys.sort();
        keys.dedup();
        for k in &keys {
            self.locks.acquire(k, branch);
        }
        keys
    }

    /// The first committer's check of a pipelined 1PC transaction: every transaction it was
    /// evaluated after is committed here (they came first down the same chain).
    pub(crate) fn predecessors_committed(&self, after: &[TxId]) -> bool {
        self.cfg.breaks.no_dependency_check || after.iter().all(|t| self.near.decided.contains_key(t))
    }
}
