//! The drivers' clock, in microseconds: the wall-clock time when the process started plus the
//! monotonic time since, so time never goes backwards for a vnode (the core asserts it) and a
//! restarted process counts on from where the previous one stopped, never repeating a value —
//! the core numbers a manager's own proposals by time and relies on that across restarts.
//! A vnode's timers are set in this unit.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Epoch {
    instant: Instant,
    /// Microseconds since the Unix epoch at `instant`.
    unix_us: u64,
}

fn epoch() -> &'static Epoch {
    static EPOCH: OnceLock<Epoch> = OnceLock::new();
    EPOCH.get_or_init(|| {
        let unix_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
        Epoch { instant: Instant::now(), unix_us }
    })
}

pub fn now_us() -> u64 {
    let e = epoch();
    e.unix_us + e.instant.elapsed().as_micros() as u64
}

/// [`now_us`] in milliseconds: Unix time as manifests, snapshot names and deadlines take it.
pub fn now_ms() -> u64 {
    now_us() / 1000
}

/// The instant a timer set for `at_us` fires.
pub fn instant_of(at_us: u64) -> Instant {
    let e = epoch();
    e.instant + Duration::from_micros(at_us.saturating_sub(e.unix_us))
}

/// A deadline that never comes (for a select arm that is disabled anyway).
pub fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_counts_from_the_wall_clock_and_timers_map_back_to_instants() {
        let now = now_us();
        assert!(now > 1_600_000_000_000_000, "microseconds since 1970: {now}");
        let at = instant_of(now + 1_000_000);
        let ahead = at.saturating_duration_since(Instant::now());
        assert!(ahead > Duration::from_millis(900) && ahead <= Duration::from_secs(1), "{ahead:?}");
    }
}
