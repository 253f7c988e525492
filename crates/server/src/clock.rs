//! The drivers' clock: microseconds since the process started, from the monotonic clock, so time
//! never goes backwards for a vnode (the core asserts it). A vnode's timers are set in this unit.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

pub fn now_us() -> u64 {
    epoch().elapsed().as_micros() as u64
}

/// The instant a timer set for `at_us` fires.
pub fn instant_of(at_us: u64) -> Instant {
    epoch() + Duration::from_micros(at_us)
}

/// A deadline that never comes (for a select arm that is disabled anyway).
pub fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
