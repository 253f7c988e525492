//! The order in which this host's connections blocked on a list (`BLPOP`, `BLMOVE`, …): of the
//! connections blocked on a key, only the first looks for an element (the transaction client's
//! `Step::Blocked`), so an element pushed for several is taken by the one that blocked first, as
//! Redis serves them. Across hosts there is no such order: a connection blocked on another host
//! looks on its own.
//!
//! Bounded by the connections: a connection waits on the keys of one command at a time, and its
//! `Turn` takes it off every queue when dropped (served, timed out, or closed).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A connection blocked on a key: when its command arrived, and the connection.
type Waiter = (Instant, u64);

/// Per key, the connections blocked on it, earliest first.
type Queues = BTreeMap<Vec<u8>, VecDeque<Waiter>>;

/// Per key, the connections blocked on it, first blocked first.
#[derive(Default)]
pub struct BlockedQueues {
    queues: Mutex<Queues>,
    /// Told whenever a connection leaves a queue: the next may be first now.
    left: Notify,
}

/// A connection's place in the queues of the keys it blocks on.
pub struct Turn {
    queues: Arc<BlockedQueues>,
    conn: u64,
    keys: Vec<Vec<u8>>,
}

impl BlockedQueues {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Connection `conn`, whose command arrived at `arrived`, blocks on `keys`: it joins each
    /// one's queue behind the commands that arrived before it. Ordered by arrival, not by when it
    /// joins: two connections' commands sent one after the other are read by tasks that race.
    pub fn join(self: &Arc<Self>, conn: u64, arrived: Instant, keys: Vec<Vec<u8>>) -> Turn {
        let mut queues = self.lock();
        for k in &keys {
            let q = queues.entry(k.clone()).or_default();
            let at = q.partition_point(|(t, _)| *t <= arrived);
            q.insert(at, (arrived, conn));
        }
        Turn { queues: self.clone(), conn, keys }
    }
}

impl Turn {
    /// Whether this connection is the first blocked on one of its keys: it may look.
    pub fn is_first(&self) -> bool {
        let queues = self.queues.lock();
        self.keys.iter().any(|k| queues.get(k).and_then(|q| q.front()).is_some_and(|(_, c)| *c == self.conn))
    }

    /// Waits until another connection leaves a queue, or `at_most` passes.
    pub async fn wait(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.queues.left.notified()).await;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut queues = self.queues.lock();
        for k in &self.keys {
            if let Some(q) = queues.get_mut(k) {
                q.retain(|(_, c)| *c != self.conn);
                if q.is_empty() {
                    queues.remove(k);
                }
            }
        }
        drop(queues);
        self.queues.left.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_blocked_on_a_key_looks_and_the_next_once_it_leaves() {
        let queues = Arc::new(BlockedQueues::default());
        let t0 = Instant::now();
        let later = |ms| t0 + Duration::from_millis(ms);
        let b = queues.join(2, later(2), vec![b"l1".to_vec()]);
        let a = queues.join(1, later(1), vec![b"l1".to_vec(), b"l2".to_vec()]);
        let c = queues.join(3, later(3), vec![b"l3".to_vec()]);
        assert!(a.is_first() && !b.is_first() && c.is_first(), "the command that arrived first is first");
        drop(a);
        assert!(b.is_first());
        drop((b, c));
        assert!(queues.lock().is_empty(), "no queue outlives its connections");
    }
}
