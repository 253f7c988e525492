//! A host that starts is told by its parents which vnodes to start (seed 004; the exchange is
//! `waymark_core::alter::boot`): the vnodes with no parent (the root) start from their logs at
//! once, and for the rest the host asks their parents over the peer links, again with a backoff
//! until every group is answered, starting what each answer names as it comes — a manager of this
//! host may be the parent its store vnodes wait for. Meanwhile it carries out what its running
//! vnodes ask of it (a secondary parent to start), since the answer may have to come from one.
//!
//! Between the process and the host: `node.rs` runs it after the peer links start and before the
//! front ends, which need the store vnodes.

use crate::host::{Host, HostError};
use crate::vnode::HostEvent;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use waymark_core::alter::boot::HostBoot;
use waymark_core::alter::AlterMsg;
use waymark_core::{Body, Envelope};

/// The first wait for an answer before asking again, doubled up to `ASK_AGAIN_MAX`.
const ASK_AGAIN_FIRST: Duration = Duration::from_millis(100);
const ASK_AGAIN_MAX: Duration = Duration::from_secs(1);
/// How often a host still waiting says whom it waits for.
const WAITING_WARN_EVERY: Duration = Duration::from_secs(10);
/// Answers held until the boot reads them; more are dropped, and asked for again.
pub const INBOX_MAX: usize = 64;

/// Boots `host` by parent; returns once every group of its vnodes was answered, or `shutdown`.
pub async fn run(
    host: &mut Host,
    inbox: &mut mpsc::Receiver<Envelope>,
    events: &mut mpsc::UnboundedReceiver<HostEvent>,
    shutdown: &CancellationToken,
) -> Result<(), HostError> {
    let name = host.shared.cfg.host.clone();
    let (mut boot, roots) = HostBoot::new(&name, &host.local_tree_configs());
    for id in &roots {
        tracing::info!(vnode = %id, "starting from its log (no parent to ask)");
        host.start_vnode(id)?;
    }
    let begun = Instant::now();
    let (mut wait, mut warned) = (ASK_AGAIN_FIRST, Instant::now());
    while !boot.done() {
        ask(host, &boot);
        let until = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep_until(until) => break,
                Some(ev) = events.recv() => host.on_event(ev)?,
                Some(env) = inbox.recv() => {
                    let Body::Alter(AlterMsg::StartVnodes { vnodes }) = &env.body else { continue };
                    let settled = boot.on_answer(&env.from, vnodes);
                    for id in &settled.start {
                        tracing::info!(vnode = %id, parent = %env.from, "starting: its parent named it");
                        host.start_vnode(id)?;
                    }
                    for id in &settled.not_named {
                        tracing::warn!(vnode = %id, parent = %env.from, "not started: its parent does not place it on this host");
                    }
                    if boot.done() {
                        break;
                    }
                }
            }
        }
        wait = (wait * 2).min(ASK_AGAIN_MAX);
        if !boot.done() && warned.elapsed() >= WAITING_WARN_EVERY {
            warned = Instant::now();
            let parents: Vec<String> = boot.waiting_for().iter().map(ToString::to_string).collect();
            tracing::warn!("booting for {:?}: no answer yet from any of {}", begun.elapsed(), parents.join(", "));
        }
    }
    tracing::info!("booted by parent in {:?}: {} vnodes run", begun.elapsed(), host.vnode_count());
    Ok(())
}

/// Sends every question the boot has now, from a vnode of this host that does not run yet.
fn ask(host: &Host, boot: &HostBoot) {
    let router = &host.shared.router;
    for env in boot.asks() {
        router.queue(env);
    }
    router.flush();
}
