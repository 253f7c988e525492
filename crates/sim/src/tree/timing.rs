//! The tree's clock in simulation: how long a hop takes, and the heartbeat timing and deadlines
//! that follow from it. Both drivers of the tree (`--tree` and `--tree-only`) build their shape
//! with these, so a change of hop latency reaches both.

use super::build::Timing;
use waymark_core::Breaks;

/// The longest a message between two tree vnodes takes on a working link.
pub const HOP_US: u64 = 1_000;

/// Heartbeats go every this many hops.
const HEARTBEAT_HOPS: u64 = 20;

/// Silence for this many heartbeat intervals marks a parent or child unreachable.
const HEARTBEATS_MISSED: u64 = 3;

/// The timing the tree's shape is built with: writes taking up to `sync_us`, heartbeats on or
/// off (off, a scale run counts only the cut's messages; there is then no failure detection).
pub fn timing(sync_us: u64, heartbeats: bool, breaks: Breaks) -> Timing {
    let heartbeat_interval_us = if heartbeats { HEARTBEAT_HOPS * HOP_US } else { u64::MAX / 4 };
    Timing {
        hop_us: HOP_US,
        sync_us,
        heartbeat_interval_us,
        heartbeat_timeout_us: HEARTBEATS_MISSED * heartbeat_interval_us,
        breaks,
    }
}
