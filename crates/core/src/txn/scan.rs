//! Scans of the keyspace (issue 34: `SCAN`, `KEYS`, `RANDOMKEY`, `FLUSHALL`): one partition at a
//! time, in key order, a page per request, each page read at the partition's primary.
//!
//! Guarantee (Redis's for `SCAN`): every key present for the whole of a scan — from its first
//! page's request to its last page's answer — is returned at least once. Why:
//! - a page resumes strictly after the last key the previous page *examined* in that partition,
//!   and keys are examined in order, so no key at or before that point is owed, and none after it
//!   is skipped, whatever is written around it meanwhile;
//! - the page is read at the partition's primary (by the placement it serves by, and only while
//!   it may serve, as a `GET` is), which holds every commit acknowledged to a client, or holds its
//!   branch prepared: a 1PC first committer commits only after the primary prepared, and a 2PC
//!   near decides only after every primary did. So the page counts a key that a branch prepared
//!   here gives a value, besides the keys its store holds with one. A key deleted by a branch
//!   still prepared is returned too. A page may thus return a key that does not exist (a prepared
//!   write that aborts, a deletion on its way): `SCAN` allows that for keys not present
//!   throughout.
//!
//! After a promotion the next page goes to the new primary, which holds every acknowledged commit
//! (`alter::promote`). Real-time safety: a page reveals that its keys exist, so it is held as a
//! read of the newest of them would be (`cut::real_time`).
//!
//! Bounded: a page returns at most [`SCAN_COUNT_MAX`] keys and examines at most
//! [`SCAN_EXAMINED_MAX`] entries of the vnode's store (which holds other partitions too), so a
//! page of a sparse partition may return no key and a cursor to go on from.

use crate::collection::is_element;
use crate::ids::{ClientId, Key, PartitionId, VnodeId};
use crate::io::{Response, ScanCursor};
use crate::message::TxnMsg;
use crate::txn::near::PendingRead;
use crate::txn::read_wait::Reader;
use crate::vnode::Vnode;
use std::collections::BTreeSet;
use std::ops::Bound;

/// The most keys one page returns, whatever the client's `COUNT`.
pub const SCAN_COUNT_MAX: u32 = 10_000;
/// The most store entries one page examines.
pub const SCAN_EXAMINED_MAX: usize = 100_000;

/// One page of a partition: its keys, and the cursor after it (`None`: the scan is over).
struct Page {
    keys: Vec<Key>,
    next: Option<ScanCursor>,
}

impl Vnode {
    /// A client's page request at its near: served here if this vnode is the partition's primary,
    /// else forwarded to it as a read is.
    pub(crate) fn client_scan(&mut self, client: ClientId, req: u64, cursor: ScanCursor, count: u32) {
        let partitions = self.cfg.placement.partitions();
        if cursor.partition >= partitions {
            return self.reply(client, req, Response::Keys { keys: vec![], next: None });
        }
        let primary = self.cfg.placement.primary(PartitionId(cursor.partition)).clone();
        if self.failing_over(&primary) {
            let response = Response::Unavailable { why: "TRYAGAIN the partition's primary is failing over" };
            return self.reply(client, req, response);
        }
        if primary == self.cfg.id {
            return self.scan_at_primary(Reader::Client { client, req }, cursor, count);
        }
        self.forward_read(client, req, primary, |id| TxnMsg::Scan { req: id, cursor, count });
    }

    pub(crate) fn on_scan(&mut self, from: VnodeId, req: u64, cursor: ScanCursor, count: u32) {
        self.scan_at_primary(Reader::Near { from, req }, cursor, count);
    }

    pub(crate) fn on_scan_reply(
        &mut self,
        req: u64,
        keys: Vec<Key>,
        next: Option<ScanCursor>,
        writer_cut: Option<crate::ids::CutId>,
    ) {
        if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&req) {
            self.reply_revealing(writer_cut, asked.client, asked.req, Response::Keys { keys, next });
        }
    }

    fn scan_at_primary(&mut self, reader: Reader, cursor: ScanCursor, count: u32) {
        let partition = PartitionId(cursor.partition);
        // The range first: a peer's cursor must not index past the placement.
        let leads = cursor.partition < self.cfg.placement.partitions()
            && self.cfg.placement.primary(partition) == &self.cfg.id
            && self.may_serve();
        if !leads {
            return self.refuse_read(reader, "TRYAGAIN the key's partition moved");
        }
        let page = self.page(cursor, count);
        let writer_cut = page.keys.iter().filter_map(|k| self.rt.read_reveals(k, &self.cfg.breaks)).max();
        match reader {
            Reader::Client { client, req } => {
                self.reply_revealing(writer_cut, client, req, Response::Keys { keys: page.keys, next: page.next })
            }
            Reader::Near { from, req } => {
                let reply = TxnMsg::ScanReply { req, keys: page.keys, next: page.next, writer_cut };
                self.send_txn(&from, reply)
            }
            Reader::ClientElements { .. } | Reader::NearElements { .. } => {
                unreachable!("a scan page is asked for by `client_scan` or `on_scan`")
            }
        }
    }

    /// The keys of `cursor`'s partition after `cursor.after`, examined in key order until `count`
    /// are found or the bound is reached, with the keys branches prepared here give a value in
    /// the same range.
    fn page(&self, cursor: ScanCursor, count: u32) -> Page {
        let partition = PartitionId(cursor.partition);
        let count = count.clamp(1, SCAN_COUNT_MAX) as usize;
        let placement = &self.cfg.placement;
        let from = cursor.after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut keys = BTreeSet::new();
        let mut last: Option<&Key> = None;
        let mut ended = true;
        for (examined, (key, entry)) in self.store.range(from).enumerate() {
            if keys.len() >= count || examined >= SCAN_EXAMINED_MAX {
                ended = false;
                break;
            }
            last = Some(key);
            if entry.value.is_some() && !is_element(key) && placement.partition_of(key) == partition {
                keys.insert(key.clone());
            }
        }
        let within = |k: &Key| {
            placement.partition_of(k) == partition
                && !is_element(k)
                && cursor.after.as_ref().is_none_or(|a| k > a)
                && (ended || last.is_some_and(|l| k <= l))
        };
        for p in self.part.prepared.values().filter(|p| !p.read_only) {
            keys.extend(p.rec.writes.iter().filter(|w| w.value.is_some() && within(&w.key)).map(|w| w.key.clone()));
        }
        if self.cfg.breaks.scan_skips_first && cursor.after.is_some() {
            let first = keys.iter().next().cloned();
            first.map(|k| keys.remove(&k));
        }
        let next = match ended {
            false => Some(ScanCursor { partition: cursor.partition, after: last.cloned() }),
            true if cursor.partition + 1 < placement.partitions() => {
                Some(ScanCursor { partition: cursor.partition + 1, after: None })
            }
            true => None,
        };
        Page { keys: keys.into_iter().collect(), next }
    }
}
