//! `SCAN`'s cursors, and the sizes of the pages `KEYS`, `RANDOMKEY` and `FLUSHALL` ask for. The
//! scan itself is the core's (`waymark_core::txn::scan`, driven by the transaction client).
//!
//! A Redis cursor is a number (clients parse it as one), while a scan stands at a partition and a
//! key. A cursor handed out is `(partition + 1) << 32 | slot`, the slot naming the key in this
//! connection's table. A cursor whose slot is not there — forgotten, from another connection, or
//! made up — resumes at the start of its partition: keys may come again, as `SCAN` allows, and
//! none present throughout is skipped.
//!
//! `FLUSHALL`/`FLUSHDB` delete a page of keys per transaction while they scan: not one atomic
//! transaction over the whole keyspace (a write made meanwhile may survive it, as if made after).

use std::collections::{BTreeMap, VecDeque};
use waymark_core::ScanCursor;
use waymark_resp::glob::Glob;

/// Keys per page when `KEYS` reads the whole keyspace.
pub const WHOLE_PAGE_KEYS: u32 = 1_000;
/// Keys per page (and so per `DEL` transaction) of `FLUSHALL`: half the default
/// `limits.txn_keys_max`.
pub const FLUSH_PAGE_KEYS: u32 = 512;
/// Keys per page while `RANDOMKEY` looks for one.
pub const RANDOM_PAGE_KEYS: u32 = 16;
/// The most pages one `KEYS`, `RANDOMKEY` or `FLUSHALL` reads.
pub const WHOLE_PAGES_MAX: usize = 1 << 20;
/// The most cursors a connection keeps; the oldest is forgotten first.
pub const CURSORS_MAX: usize = 64;

pub fn too_many_pages() -> String {
    format!("ERR the keyspace took more than {WHOLE_PAGES_MAX} pages to scan")
}

/// A `MATCH` pattern: `Some(None)` matches every key (no pattern, or `*`), `None` matches none
/// (a pattern past the glob's length limit).
pub fn glob(pattern: Option<&[u8]>) -> Option<Option<Glob>> {
    match pattern {
        None | Some(b"*") => Some(None),
        Some(p) => Glob::new(p, false).map(Some),
    }
}

/// This connection's `SCAN` cursors: slot → where the scan stands.
#[derive(Debug, Default)]
pub struct Cursors {
    kept: BTreeMap<u32, ScanCursor>,
    order: VecDeque<u32>,
    next_slot: u32,
}

impl Cursors {
    /// The cursor a client sent, as a place to scan from (`0`: the start).
    pub fn resume(&self, cursor: u64) -> ScanCursor {
        let partition = (cursor >> 32) as u32;
        if partition == 0 {
            return ScanCursor::default();
        }
        let slot = cursor as u32;
        match self.kept.get(&slot) {
            Some(kept) if kept.partition == partition - 1 => kept.clone(),
            _ => ScanCursor { partition: partition - 1, after: None },
        }
    }

    /// The number to hand the client for `next`; never 0.
    pub fn keep(&mut self, next: ScanCursor) -> u64 {
        let slot = self.next_slot;
        self.next_slot = self.next_slot.wrapping_add(1);
        let partition = next.partition;
        self.kept.insert(slot, next);
        self.order.push_back(slot);
        while self.order.len() > CURSORS_MAX {
            if let Some(old) = self.order.pop_front() {
                self.kept.remove(&old);
            }
        }
        (u64::from(partition) + 1) << 32 | u64::from(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: u32, after: &str) -> ScanCursor {
        ScanCursor { partition, after: Some(after.as_bytes().to_vec()) }
    }

    #[test]
    fn a_cursor_handed_out_resumes_where_its_scan_stood() {
        let mut c = Cursors::default();
        let n = c.keep(at(3, "k"));
        assert_ne!(n, 0);
        assert_eq!(c.resume(n), at(3, "k"));
        assert_eq!(c.resume(0), ScanCursor::default());
    }

    #[test]
    fn a_forgotten_or_made_up_cursor_restarts_its_partition_and_skips_nothing() {
        let mut c = Cursors::default();
        let first = c.keep(at(5, "a"));
        for i in 0..CURSORS_MAX {
            c.keep(at(1, &i.to_string()));
        }
        assert_eq!(c.resume(first), ScanCursor { partition: 5, after: None }, "forgotten");
        assert_eq!(c.resume((8 << 32) | 12345), ScanCursor { partition: 7, after: None }, "made up");
    }
}
