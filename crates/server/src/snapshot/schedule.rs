//! Snapshots on a schedule (`[snapshots] every = "1s"`, `full_every = "1h"`): the host that runs
//! the tree's root takes an increment every `every` and starts a new chain (`auto-<unix ms>`, a
//! full snapshot) every `full_every`. One host only, so that two operators never race for cuts;
//! while that host is down, no scheduled snapshot is taken (and `waymark snapshot create` still
//! works through any host running a manager).
//!
//! A failed increment (a host down: the cut fails) is retried at the next tick; one that cannot
//! be exported any more (its log was removed) starts a new chain.

use super::create::{self, CreateRequest};
use crate::config::Schedule;
use crate::host::Shared;
use std::sync::Arc;
use std::time::Instant;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// The chain increments go into, and when it was started.
struct Chain {
    name: String,
    since: Instant,
}

/// Runs the schedule until `stop`, if this host runs the root.
pub async fn run(shared: Arc<Shared>, schedule: Schedule, stop: CancellationToken) {
    if !starts_cuts(&shared) {
        return;
    }
    tracing::info!(every = ?schedule.every, full_every = ?schedule.full_every, "snapshot schedule started");
    let mut tick = tokio::time::interval(schedule.every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut chain: Option<Chain> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let full = chain.as_ref().is_none_or(|c| c.since.elapsed() >= schedule.full_every);
        let name = match (&chain, full) {
            (Some(c), false) => c.name.clone(),
            _ => format!("auto-{}", crate::clock::now_ms()),
        };
        match create::create(&shared, CreateRequest { name: name.clone(), incremental: !full }).await {
            Ok(c) if full => {
                tracing::info!(name = %c.name, cut = c.cut, "scheduled full snapshot");
                chain = Some(Chain { name, since: Instant::now() });
            }
            Ok(c) => tracing::debug!(name = %c.name, increment = c.increment, cut = c.cut, "scheduled increment"),
            Err(e) if e.wants_full_snapshot() => {
                tracing::warn!("scheduled increment of {name} impossible ({e}); starting a new chain");
                chain = None;
            }
            Err(e) => tracing::warn!("scheduled snapshot of {name} failed (retried at the next tick): {e}"),
        }
    }
}

/// Whether this host starts the cluster's cuts: it runs the root manager (`consistent`,
/// `blocking`), or the cut coordinator (`versions`). One host of the cluster does.
fn starts_cuts(shared: &Shared) -> bool {
    if shared.cfg.cluster.strategy == waymark_core::CutStrategy::Versions {
        return shared.topology.cut_coordinator().host == shared.cfg.host;
    }
    let root = shared.topology.tree.iter().find(|c| c.parents.is_empty() && !c.children.is_empty());
    root.is_some_and(|r| r.id.host == shared.cfg.host)
}
