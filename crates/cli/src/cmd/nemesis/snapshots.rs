//! The nemesis's snapshots: one taken every few seconds while the faults run (a full one, then
//! increments of its chain), and after the run the newest checked (`snapshot check`) and restored
//! into a cluster of its own, where the bank's total and the replicas are checked again.

use super::workload::Workload;
use crate::cmd::admin_client::Admin;
use crate::cmd::cluster;
use crate::cmd::started::Started;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use waymark_server::snapshot::create::{CreateRequest, Created};

/// The chain's name.
pub const NAME: &str = "nemesis";
/// Between two snapshots.
const EVERY: Duration = Duration::from_secs(4);
/// How long one snapshot may take (a paused host holds its cut until this passes).
const CREATE_TIMEOUT: Duration = Duration::from_secs(20);

/// One attempt: when it was asked (ms since the workload began) and what came of it.
pub struct Attempt {
    pub at_ms: u64,
    pub result: Result<Created, String>,
}

/// Takes a snapshot every `EVERY` until `stop`; the first that succeeds is full, the others
/// increments.
pub fn take_while_running(dir: &Path, started: Instant, stop: &AtomicBool) -> Result<Vec<Attempt>> {
    let admin = Admin::for_cluster(dir)?;
    let mut attempts: Vec<Attempt> = vec![];
    let mut next = started + EVERY;
    // Bounded by the run: `stop` is set when the faults end.
    while super::sleep_until(next) && !stop.load(Ordering::Relaxed) {
        let incremental = attempts.iter().any(|a| a.result.is_ok());
        let req = CreateRequest { name: NAME.into(), incremental };
        let at_ms = started.elapsed().as_millis() as u64;
        let result = admin.post("/snapshots", &req, CREATE_TIMEOUT).map_err(|e| format!("{e:#}"));
        attempts.push(Attempt { at_ms, result });
        next = Instant::now().max(next + EVERY);
    }
    Ok(attempts)
}

/// What the newest snapshot showed once checked and restored.
pub struct Verified {
    pub increment: u32,
    pub cut: u64,
    /// What the restored cluster holds: the bank's total, or every list.
    pub holds: Restored,
}

pub enum Restored {
    Bank { total: i64 },
    Lists(super::lists::Lists),
}

/// Checks the newest snapshot of the chain, restores it onto `hosts` hosts in `dir/restored`,
/// and reads the bank's total and the replicas' agreement there.
/// `lists`: how many lists the append workload may have touched.
pub fn verify(
    dir: &Path,
    hosts: u32,
    workload: Workload,
    (accounts, total): (&[String], i64),
    lists: u64,
) -> Result<Verified> {
    let root = dir.join("snapshots");
    let report = waymark_server::snapshot::check::check(&root, NAME, None);
    if let Some(p) = report.problems.first() {
        bail!("`snapshot check` found {} problems, the first: {p}", report.problems.len());
    }
    let (increment, cut) = report.target.context("the chain was not read")?;
    let to = dir.join("restored");
    crate::cmd::set_quiet(true);
    let restored = crate::cmd::snapshot::restore(&root, NAME, None, &to, Some(hosts), false);
    crate::cmd::set_quiet(false);
    restored?;
    let started = Started::default();
    started.add(&to);
    crate::cmd::set_quiet(true);
    let up = cluster::start(&to);
    crate::cmd::set_quiet(false);
    up?;
    let restored_hosts = cluster::hosts_of(&to)?;
    let first = restored_hosts[0].1.this_host().redis;
    let holds = match workload {
        Workload::Bank => Restored::Bank { total: crate::cmd::bank::read_total(first, accounts)? },
        Workload::Append => Restored::Lists(super::lists::read_lists(first, lists).map_err(anyhow::Error::msg)?),
    };
    let admins: Vec<String> = restored_hosts.iter().map(|(_, c)| c.this_host().admin.to_string()).collect();
    if let Some(d) = crate::cmd::replicas::disagreements(&admins)?.first() {
        bail!("the restored replicas differ: {d}");
    }
    if let Restored::Bank { total: found } = holds {
        if found != total {
            bail!("the restored bank holds {found}, not {total}");
        }
    }
    Ok(Verified { increment, cut, holds })
}
