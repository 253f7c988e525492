//! Where an envelope goes: to a vnode of this host (its command queue), or to the peer link of the
//! host named in `to` (DESIGN §7). Vnode threads send without ever waiting — a full queue drops the
//! envelope, as a broken connection would, and the protocols survive that — so no vnode can block
//! another. Peer readers deliver with back-pressure instead: a busy vnode slows its senders' TCP.
//!
//! Envelopes for a peer are encoded by the sending thread into the peer's buffer (`queue`) and
//! written by it when it calls `flush` — a vnode's driver once per turn, for all its steps sent.

use crate::net::outgoing::{Dropped, Outgoing};
use crate::vnode::VnodeCmd;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::RwLock;
use tokio::sync::mpsc;
use waymark_core::alter::AlterMsg;
use waymark_core::{Body, Envelope, VnodeId};

#[derive(Default)]
pub struct RouterStats {
    /// Envelopes dropped because the receiving vnode's queue was full.
    pub dropped_local: AtomicU64,
    /// Envelopes dropped because a peer link's backlog was full, or the peer unreachable.
    pub dropped_peer: AtomicU64,
    /// Envelopes dropped because their frame was larger than `limits.frame_max_bytes`.
    pub dropped_too_big: AtomicU64,
    /// Envelopes for a vnode this host does not run (e.g. a secondary parent that stopped).
    pub unknown_vnode: AtomicU64,
}

pub struct Router {
    host: String,
    local: RwLock<HashMap<VnodeId, mpsc::Sender<VnodeCmd>>>,
    /// While the host boots by parent (`crate::boot`): where a parent's `StartVnodes`, addressed
    /// to a vnode of this host that does not run yet, goes.
    boot: RwLock<Option<mpsc::Sender<Envelope>>>,
    peers: HashMap<String, Arc<Outgoing>>,
    pub stats: RouterStats,
}

impl Router {
    pub fn new(host: String, peers: HashMap<String, Arc<Outgoing>>) -> Self {
        Router { host, local: RwLock::default(), boot: RwLock::default(), peers, stats: RouterStats::default() }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn add_local(&self, id: VnodeId, tx: mpsc::Sender<VnodeCmd>) {
        self.local.write().expect("router lock").insert(id, tx);
    }

    pub fn remove_local(&self, id: &VnodeId) {
        self.local.write().expect("router lock").remove(id);
    }

    /// Sets (or, with `None`, ends) the boot inbox: `StartVnodes` for a vnode not running goes there.
    pub fn set_boot_inbox(&self, inbox: Option<mpsc::Sender<Envelope>>) {
        *self.boot.write().expect("router lock") = inbox;
    }

    /// An envelope for a vnode this host does not run: a parent's answer to a boot goes to the boot
    /// inbox (never waiting: a full inbox drops it, and the host asks again); the rest is counted.
    fn not_running(&self, env: Envelope) {
        let boot = self.boot.read().expect("router lock");
        match (&*boot, &env.body) {
            (Some(inbox), Body::Alter(AlterMsg::StartVnodes { .. })) => drop(inbox.try_send(env)),
            _ => drop(self.stats.unknown_vnode.fetch_add(1, Ordering::Relaxed)),
        }
    }

    pub fn local(&self, id: &VnodeId) -> Option<mpsc::Sender<VnodeCmd>> {
        self.local.read().expect("router lock").get(id).cloned()
    }

    /// From a vnode's step: a local envelope is delivered, a remote one waits in its peer's buffer
    /// for `flush`. Returns whether it went to a peer. Never waits.
    pub fn queue(&self, env: Envelope) -> bool {
        if env.to.host == self.host {
            self.send_local(env);
            return false;
        }
        let Some(out) = self.peers.get(&env.to.host) else {
            self.stats.unknown_vnode.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        match out.push(&env) {
            Ok(()) => {}
            Err(Dropped::TooBig) => {
                self.stats.dropped_too_big.fetch_add(1, Ordering::Relaxed);
                tracing::error!(to = %env.to, "an envelope larger than limits.frame_max_bytes was dropped");
            }
            Err(Dropped::NoLink | Dropped::Full) => drop(self.stats.dropped_peer.fetch_add(1, Ordering::Relaxed)),
        }
        true
    }

    /// Writes what waits for every peer, as far as the sockets take it now.
    pub fn flush(&self) {
        for out in self.peers.values() {
            out.flush();
        }
    }

    fn send_local(&self, env: Envelope) {
        let Some(tx) = self.local(&env.to) else { return self.not_running(env) };
        if tx.try_send(VnodeCmd::Deliver(env)).is_err() {
            self.stats.dropped_local.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// From a peer link: waits for room in the vnode's queue.
    pub async fn deliver(&self, env: Envelope) {
        let Some(tx) = self.local(&env.to) else { return self.not_running(env) };
        let _ = tx.send(VnodeCmd::Deliver(env)).await;
    }
}
