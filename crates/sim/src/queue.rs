//! The worlds' queue of events in virtual time (`world::World`, `tree::TreeWorld`): events run in
//! the order they are due, and those due in the same microsecond in the order they were
//! scheduled, so a seed runs the same events in the same order every time.

use std::collections::BTreeMap;

/// Where an event sits in the queue: when it is due, then when it was scheduled. The derived order
/// compares `at_us`, then `seq`: the order of the `(at_us, seq)` pair it replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    pub at_us: u64,
    /// Invariant: unique in its queue (counted up at every `push`), so no two events share a key.
    pub seq: u64,
}

/// Events by `EventKey`, earliest first.
#[derive(Debug)]
pub struct EventQueue<E> {
    events: BTreeMap<EventKey, E>,
    /// The `seq` of the last event pushed.
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { events: BTreeMap::new(), seq: 0 }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at_us`, after every event already scheduled for then.
    pub fn push(&mut self, at_us: u64, event: E) {
        self.seq += 1;
        let key = EventKey { at_us, seq: self.seq };
        let old = self.events.insert(key, event);
        debug_assert!(old.is_none(), "two events at {key:?}");
    }

    /// The next event due, with its key.
    pub fn pop(&mut self) -> Option<(EventKey, E)> {
        self.events.pop_first()
    }

    /// Puts an event `pop` took back in its place, ahead of everything scheduled after it.
    pub fn put_back(&mut self, key: EventKey, event: E) {
        debug_assert!(key.seq <= self.seq, "{key:?} was never pushed");
        let old = self.events.insert(key, event);
        debug_assert!(old.is_none(), "two events at {key:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_run_by_time_then_in_the_order_they_were_scheduled() {
        let mut q = EventQueue::default();
        for (at_us, name) in [(5, "b"), (3, "a"), (5, "c"), (9, "d")] {
            q.push(at_us, name);
        }
        let (key, first) = q.pop().unwrap();
        assert_eq!((key, first), (EventKey { at_us: 3, seq: 2 }, "a"));
        q.put_back(key, first);
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }
}
