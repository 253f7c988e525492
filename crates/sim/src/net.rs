//! The network model: per-link latency, FIFO per connection, connections that break and drop what
//! is in flight, partitions (symmetric and one-way) that heal, and clogged links (FoundationDB's
//! "swizzle") that hold messages until unclogged. Reordering across links comes from latency.
//! Rarely, a message is delivered twice (the copy later, out of order) or held for seconds (a
//! stalled connection: what follows it on the link waits behind it) — `Mishap`.

use crate::slot::{Direction, Slot};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone, Copy)]
struct Link {
    /// Bumped when the connection breaks; a message of an older epoch is lost.
    epoch: u64,
    /// Invariant: deliveries on one link are scheduled in non-decreasing time (FIFO).
    last_delivery_us: u64,
    clogged_until_us: u64,
    /// Partitions currently blocking this direction.
    blocked: u32,
}

#[derive(Debug, Default)]
pub struct Network {
    links: BTreeMap<Direction, Link>,
}

/// Where a sent message will arrive, and the connection epoch it travels on.
pub struct InFlight {
    pub at_us: u64,
    pub epoch: u64,
}

/// A rare network fault on one message, drawn from its own stream (`Mishap::draw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mishap {
    None,
    /// Delivered twice: the copy this long after the original, on the same connection (lost if
    /// that connection broke meanwhile), overtaking nothing's order guarantee.
    Duplicate {
        after_us: u64,
    },
    /// Held this long; the connection stalls behind it (FIFO is kept).
    LongDelay {
        us: u64,
    },
}

/// One message in 500 is duplicated, one in 2 000 is held 0.5–3 s.
pub const DUPLICATE_P: f64 = 0.002;
pub const LONG_DELAY_P: f64 = 0.000_5;

impl Mishap {
    pub fn draw(rng: &mut ChaCha8Rng) -> Mishap {
        let x: f64 = rng.gen();
        if x < DUPLICATE_P {
            Mishap::Duplicate { after_us: rng.gen_range(1..300_000) }
        } else if x < DUPLICATE_P + LONG_DELAY_P {
            Mishap::LongDelay { us: rng.gen_range(500_000..3_000_000) }
        } else {
            Mishap::None
        }
    }
}

impl Network {
    /// `None`: the link is partitioned and the message is lost. `extra_us` holds the message (and
    /// the link behind it) that much longer.
    pub fn send(&mut self, rng: &mut ChaCha8Rng, now_us: u64, from: Slot, to: Slot, extra_us: u64) -> Option<InFlight> {
        let latency_us = if from == to { 5 } else { latency_us(rng) };
        let link = self.links.entry(Direction { from, to }).or_default();
        if link.blocked > 0 {
            return None;
        }
        let at_us = (now_us + latency_us).max(link.last_delivery_us).max(link.clogged_until_us) + extra_us;
        link.last_delivery_us = at_us;
        Some(InFlight { at_us, epoch: link.epoch })
    }

    pub fn is_current(&self, from: Slot, to: Slot, epoch: u64) -> bool {
        self.links.get(&Direction { from, to }).map_or(0, |l| l.epoch) == epoch
    }

    /// Breaks the connection between `a` and `b`: both directions lose what is in flight.
    pub fn break_connection(&mut self, a: Slot, b: Slot) {
        for key in [Direction { from: a, to: b }, Direction { from: b, to: a }] {
            let link = self.links.entry(key).or_default();
            link.epoch += 1;
            link.last_delivery_us = 0;
        }
    }

    /// Breaks every connection of `node` in a world of `slots` vnodes.
    pub fn break_all_of(&mut self, node: Slot, slots: usize) {
        for other in Slot::all(slots) {
            self.break_connection(node, other);
        }
    }

    pub fn block(&mut self, from: Slot, to: Slot) {
        self.links.entry(Direction { from, to }).or_default().blocked += 1;
        self.break_connection(from, to);
    }

    pub fn unblock(&mut self, from: Slot, to: Slot) {
        let link = self.links.entry(Direction { from, to }).or_default();
        debug_assert!(link.blocked > 0, "unblocking a link that is not blocked");
        link.blocked = link.blocked.saturating_sub(1);
    }

    pub fn clog(&mut self, from: Slot, to: Slot, until_us: u64) {
        let link = self.links.entry(Direction { from, to }).or_default();
        link.clogged_until_us = link.clogged_until_us.max(until_us);
    }

    pub fn unclog_all(&mut self, now_us: u64) {
        for link in self.links.values_mut() {
            link.clogged_until_us = link.clogged_until_us.min(now_us);
        }
    }
}

/// Mostly 0.1–1 ms, sometimes up to 10 ms: enough spread to reorder across links.
fn latency_us(rng: &mut ChaCha8Rng) -> u64 {
    if rng.gen_bool(0.05) {
        rng.gen_range(1_000..10_000)
    } else {
        rng.gen_range(100..1_000)
    }
}
