//! Fail fast on a host recorded dead (issue 30, item 5): what a near is waiting for from a host the
//! metadata has just recorded dead ends at once with a retryable answer, instead of at its timeout
//! (2 s on a node). A request sent just before the record waited out the whole timeout, and on real
//! processes that, not the failover itself, set the longest windows (`bench/failover.sh`: accounts
//! writable again 2.6 s after a kill, or 4.2 s when a probe was caught waiting).
//!
//! Why each answer is safe:
//! - a 2PC transaction not yet decided is aborted (`FailingOver`, `TRYAGAIN` to a Redis client):
//!   a near may abort before it decides, and every participant hears it (the dead host's, if it
//!   prepared, asks when it comes back and is told abort);
//! - a 1PC transaction gets what its timeout would have given, `Unknown`: its first committer,
//!   down the chain, decides, and may have;
//! - a GET sent to a primary there gets `TRYAGAIN`, as a GET sent after the record would.

use crate::alter::cluster;
use crate::ids::TxId;
use crate::io::Response;
use crate::txn::near::PendingRead;
use crate::vnode::Vnode;

impl Vnode {
    /// After the tree role stepped: when the metadata changed and records a host dead, end what
    /// waits on it.
    pub(crate) fn fail_fast_on_dead_hosts(&mut self) {
        let Some(tree) = self.tree.as_ref() else { return };
        let m = tree.alter.metadata();
        if self.near.dead_hosts_checked == Some(m.version()) {
            return;
        }
        self.near.dead_hosts_checked = Some(m.version());
        if !cluster::failover_on(m) {
            return;
        }
        let dead = cluster::dead_hosts(m);
        if dead.is_empty() {
            return;
        }
        let on_dead = |v: &crate::ids::VnodeId| dead.contains(&v.host);
        let stuck: Vec<TxId> = self
            .near
            .txs
            .iter()
            .filter(|(_, ntx)| ntx.replicas.iter().any(on_dead))
            .map(|(tx, _)| tx.clone())
            .collect();
        for tx in stuck {
            self.near_fail_over(tx);
        }
        let reads: Vec<u64> = self.near.reads.iter().filter(|(_, r)| on_dead(&r.primary)).map(|(id, _)| *id).collect();
        for id in reads {
            if let Some(PendingRead { asked, .. }) = self.near.reads.remove(&id) {
                let why = "TRYAGAIN the key's primary is failing over";
                self.reply(asked.client, asked.req, Response::Unavailable { why });
            }
        }
    }
}
