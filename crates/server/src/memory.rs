//! The host's data against its memory limit (`limits.maxmemory_bytes`, Redis's `maxmemory` with
//! the `noeviction` policy). Each vnode's thread keeps its share of the gauge up to date from its
//! kept tallies and tells its vnode (`Input::MemoryLimit`) when the host crosses the limit; the
//! core refuses writes that store a value meanwhile. Reads and deletes go on, and nothing already
//! acknowledged is touched.
//!
//! Replicas apply what their primaries commit whatever this host holds (Redis's
//! `replica-ignore-maxmemory`): a replica that refused would leave its chain without a copy. The
//! primaries of a partition's replicas are spread over the hosts, so a host's replicas grow only
//! as fast as other hosts' primaries, which refuse once their own hosts are full.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The host's data in memory, summed over its vnodes, and its limit.
#[derive(Debug)]
pub struct MemoryGauge {
    /// 0: no limit. Changed live by `CONFIG SET maxmemory`; each vnode learns it when its driver
    /// next gauges memory (`gauge_memory`, around each batch): a write already under way may
    /// still be taken.
    limit_bytes: AtomicU64,
    used_bytes: AtomicU64,
}

impl MemoryGauge {
    pub fn new(limit_bytes: u64) -> Arc<MemoryGauge> {
        Arc::new(MemoryGauge { limit_bytes: AtomicU64::new(limit_bytes), used_bytes: AtomicU64::new(0) })
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// 0 when there is no limit.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes.load(Ordering::Relaxed)
    }

    /// A new limit for this host (`CONFIG SET maxmemory`; 0: none).
    pub fn set_limit_bytes(&self, limit_bytes: u64) {
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
    }

    pub fn reached(&self) -> bool {
        let limit = self.limit_bytes();
        limit != 0 && self.used_bytes() >= limit
    }

    /// One vnode's share, counted from 0.
    pub fn share(self: &Arc<Self>) -> MemoryShare {
        MemoryShare { gauge: self.clone(), counted_bytes: 0, told_reached: false }
    }
}

/// What one vnode's data adds to the gauge, and what its vnode was last told. Dropped with its
/// vnode's thread, it takes its bytes back out.
#[derive(Debug)]
pub struct MemoryShare {
    gauge: Arc<MemoryGauge>,
    counted_bytes: u64,
    told_reached: bool,
}

impl MemoryShare {
    /// The host's data, all vnodes together.
    pub fn used_bytes(&self) -> u64 {
        self.gauge.used_bytes()
    }

    /// Counts the vnode's data as `bytes` now; `Some(reached)` when the vnode must be told that
    /// the host's state changed since it last was.
    pub fn update(&mut self, bytes: u64) -> Option<bool> {
        let used = &self.gauge.used_bytes;
        if bytes > self.counted_bytes {
            used.fetch_add(bytes - self.counted_bytes, Ordering::Relaxed);
        } else {
            used.fetch_sub(self.counted_bytes - bytes, Ordering::Relaxed);
        }
        self.counted_bytes = bytes;
        let reached = self.gauge.reached();
        (reached != self.told_reached).then(|| {
            self.told_reached = reached;
            reached
        })
    }
}

impl Drop for MemoryShare {
    fn drop(&mut self) {
        self.gauge.used_bytes.fetch_sub(self.counted_bytes, Ordering::Relaxed);
    }
}

/// A memory amount as Redis's configuration takes it: bytes, or a number with `k`/`m`/`g`
/// (powers of 1000) or `kb`/`mb`/`gb` (powers of 1024), in any case.
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let digits = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits);
    let scale: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// The default limit: half of the machine's memory, shared by the hosts of this cluster that run
/// on it (the demo and the tests run every host on one machine), so that the data, the copies a
/// checkpoint serialises and the page cache fit before the kernel's OOM killer would act. `None`
/// when the machine's memory cannot be read (no limit then).
pub fn default_limit_bytes(hosts_here: usize) -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024 / 2 / hosts_here.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_tell_their_vnode_once_per_crossing_and_give_their_bytes_back() {
        let gauge = MemoryGauge::new(100);
        let (mut a, mut b) = (gauge.share(), gauge.share());
        assert_eq!(a.update(60), None);
        assert_eq!(b.update(50), Some(true), "110 of 100");
        assert_eq!(a.update(70), Some(true), "a learns it on its next update");
        assert_eq!(a.update(80), None, "already told");
        drop(b);
        assert_eq!(gauge.used_bytes(), 80);
        assert_eq!(a.update(40), Some(false));
        assert!(!gauge.reached());
    }

    #[test]
    fn memory_amounts_read_as_redis_reads_them() {
        assert_eq!(parse_memory("1000"), Some(1000));
        assert_eq!(parse_memory("100mb"), Some(100 << 20));
        assert_eq!(parse_memory("2GB"), Some(2 << 30));
        assert_eq!(parse_memory("3k"), Some(3000));
        assert_eq!(parse_memory("bla"), None);
        assert_eq!(parse_memory("-1"), None);
        assert_eq!(parse_memory("99999999999999999999gb"), None);
    }

    #[test]
    fn no_limit_is_never_reached() {
        let gauge = MemoryGauge::new(0);
        let mut a = gauge.share();
        assert_eq!(a.update(u64::MAX / 2), None);
    }

    #[test]
    fn the_default_limit_is_half_the_machine_shared_by_its_hosts() {
        let one = default_limit_bytes(1).expect("a Linux machine has /proc/meminfo");
        let three = default_limit_bytes(3).expect("a Linux machine has /proc/meminfo");
        assert!(one > 0 && three <= one / 3 + 1, "{one} {three}");
    }
}
