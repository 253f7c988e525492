//! `waymark cluster status`: what the running cluster says of itself, not only which pid files
//! name a live process — each host asked over its admin API (`GET /status`), the root and the term
//! it leads, and every partition's replicas with the ones on hosts that do not answer. A partition
//! with fewer live copies than the cluster's replica count is *degraded*; one with none is
//! *unavailable*. A partition's replicas are those of the newest chain the answering store vnodes
//! route it by (a failover drops a dead host's replicas and raises the chain's epoch); while no
//! failover changed it, the configured chain, with the replicas on silent hosts marked down.

use super::cluster::{hosts_of, running_pid};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};
use waymark_core::{PartitionId, VnodeId};
use waymark_server::config::NodeConfig;
use waymark_server::topology::Topology;

/// How long a host may take to answer `GET /status` before it counts as down.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Degraded partitions listed one by one; the rest are counted.
const LISTED_MAX: usize = 8;

/// The part of a host's `/status` this reads.
#[derive(Deserialize)]
struct HostStatus {
    uptime_seconds: u64,
    vnodes: Vec<VnodeSeen>,
}

#[derive(Deserialize)]
struct VnodeSeen {
    id: String,
    kind: String,
    leading_term: Option<u64>,
    /// Partition → epoch of the chain this store vnode routes it by (the partitions it holds).
    #[serde(default)]
    epochs: BTreeMap<u32, u64>,
    /// Partitions it catches up on as a learner (not copies yet).
    #[serde(default)]
    learning: Vec<u32>,
    /// Entries its catch-up copied in from pages, since it started.
    #[serde(default)]
    copied_entries: u64,
}

/// One host as the status found it.
struct Seen {
    cfg: NodeConfig,
    pid: Option<u32>,
    answer: Result<HostStatus, String>,
}

pub fn run(dir: &Path) -> Result<()> {
    let (topology, seen) = look(dir)?;
    print_hosts(&seen);
    print_root(&seen);
    print_partitions(&count(&topology, &seen, seen[0].cfg.cluster.replicas));
    Ok(())
}

/// `cluster status --wait-whole`: asks every host again every `POLL`, with a progress bar of the
/// partitions that hold their replica count of live copies, until all do (then prints the status)
/// or `timeout` passes (an error naming what is still degraded). What an operator runs after a
/// host came back or was replaced, to see the copies catch up (issue 33).
pub fn wait_whole(dir: &Path, timeout: Duration) -> Result<()> {
    const POLL: Duration = Duration::from_millis(500);
    let begun = Instant::now();
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template("{spinner} partitions whole [{bar:40}] {pos}/{len} {elapsed} {msg}")
        .context("progress bar template")?;
    bar.set_style(style.progress_chars("=> "));
    if crate::cmd::quiet() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    loop {
        let (topology, seen) = look(dir)?;
        let counted = count(&topology, &seen, seen[0].cfg.cluster.replicas);
        bar.set_length(counted.partitions as u64);
        bar.set_position(counted.whole() as u64);
        bar.set_message(counted.catching_up_line());
        if counted.degraded.is_empty() {
            bar.finish_and_clear();
            print_hosts(&seen);
            print_root(&seen);
            print_partitions(&counted);
            return Ok(());
        }
        if begun.elapsed() >= timeout {
            bar.abandon();
            let first = counted.degraded.first().map_or("", String::as_str);
            bail!(
                "{} of {} partitions still lack copies after {} s (first: {first}); is every host up? (`waymark cluster status --dir {}`)",
                counted.degraded.len(),
                counted.partitions,
                timeout.as_secs(),
                dir.display()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Every host of `dir`, asked over its admin API.
fn look(dir: &Path) -> Result<(Topology, Vec<Seen>)> {
    let hosts = hosts_of(dir)?;
    let topology = Topology::new(&hosts[0].1.cluster)?;
    let seen: Vec<Seen> = hosts
        .into_iter()
        .map(|(host_dir, cfg)| {
            let answer = ask(&cfg);
            Seen { pid: running_pid(&host_dir), cfg, answer }
        })
        .collect();
    Ok((topology, seen))
}

fn ask(cfg: &NodeConfig) -> Result<HostStatus, String> {
    let tls = match &cfg.tls {
        Some(files) => Some(waymark_server::tls::client_config(&files.ca).map_err(|e| e.to_string())?),
        None => None,
    };
    let http = waymark_server::tls::AdminHttp::new(tls, ANSWER_TIMEOUT);
    let url = http.url(cfg.this_host().admin, "/status");
    let resp = http.agent.get(&url).call().map_err(|e| e.to_string())?;
    resp.into_json().map_err(|e| format!("{url}: unreadable answer: {e}"))
}

fn print_hosts(seen: &[Seen]) {
    let up = seen.iter().filter(|s| s.answer.is_ok()).count();
    say!("hosts: {} of {} up", up, seen.len());
    for s in seen {
        let h = s.cfg.this_host();
        let pid = s.pid.map_or_else(|| "-".to_string(), |p| p.to_string());
        match &s.answer {
            Ok(st) => say!(
                "  {:<8} up    pid {:<7} uptime {:>6} s  redis {}  admin {}://{}",
                h.name,
                pid,
                st.uptime_seconds,
                h.redis,
                if s.cfg.tls.is_some() { "https" } else { "http" },
                h.admin
            ),
            Err(why) => say!("  {:<8} down  pid {:<7} ({why})", h.name, pid),
        }
    }
}

/// The root, as the host that runs it says (the term it won), or that none answers for it.
fn print_root(seen: &[Seen]) {
    let leading = seen
        .iter()
        .filter_map(|s| s.answer.as_ref().ok())
        .flat_map(|st| &st.vnodes)
        .filter(|v| v.kind == "manager")
        .filter_map(|v| v.leading_term.filter(|t| *t > 0).map(|t| (v.id.as_str(), t)))
        .max_by_key(|(_, t)| *t);
    match leading {
        Some((id, term)) => say!("root: {id} leads term {term}"),
        None => say!("root: no host that answers leads a term now (no metadata change can be made)"),
    }
}

/// The partitions as the answering hosts route them.
struct Counted {
    partitions: usize,
    replicas: usize,
    /// One line per partition with fewer live copies than `replicas`: `p<N>: <its chain>`.
    degraded: Vec<String>,
    /// Partitions with no live copy.
    unavailable: usize,
    /// The store vnodes catching up: `<id> (<N> partitions)`.
    learning: Vec<String>,
    /// Entries copied in by catch-up, summed over the answering hosts.
    copied_entries: u64,
}

impl Counted {
    fn whole(&self) -> usize {
        self.partitions - self.degraded.len()
    }

    fn catching_up_line(&self) -> String {
        match self.learning.is_empty() {
            true => String::new(),
            false => format!("catching up: {}; {} entries copied", self.learning.join(", "), self.copied_entries),
        }
    }
}

fn count(topology: &Topology, seen: &[Seen], replicas: usize) -> Counted {
    let answers = || seen.iter().filter_map(|s| s.answer.as_ref().ok());
    let live: BTreeSet<VnodeId> = answers()
        .flat_map(|st| &st.vnodes)
        .filter(|v| v.kind == "store")
        .filter_map(|v| VnodeId::parse(&v.id))
        .collect();
    let newest = newest_chains(seen);
    let placement = &topology.placement;
    let (mut degraded, mut unavailable) = (vec![], 0);
    for p in (0..placement.partitions()).map(PartitionId) {
        let chain = match newest.get(&p.0) {
            Some((epoch, holders)) if *epoch > 0 => holders.clone(),
            _ => placement.chain(p).to_vec(),
        };
        let copies = chain.iter().filter(|v| live.contains(v)).count();
        if copies == 0 {
            unavailable += 1;
        }
        if copies < replicas {
            let shown: Vec<String> =
                chain.iter().map(|v| if live.contains(v) { v.to_string() } else { format!("{v} (down)") }).collect();
            degraded.push(format!("p{}: {}", p.0, shown.join(", ")));
        }
    }
    let stores = || answers().flat_map(|st| &st.vnodes).filter(|v| v.kind == "store");
    let learning = stores()
        .filter(|v| !v.learning.is_empty())
        .map(|v| format!("{} ({} partitions)", v.id, v.learning.len()))
        .collect();
    Counted {
        partitions: placement.partitions() as usize,
        replicas,
        degraded,
        unavailable,
        learning,
        copied_entries: stores().map(|v| v.copied_entries).sum(),
    }
}

/// Partition → the newest epoch any answering store vnode routes it by, and the vnodes that hold
/// it at that epoch.
fn newest_chains(seen: &[Seen]) -> BTreeMap<u32, (u64, Vec<VnodeId>)> {
    let mut newest: BTreeMap<u32, (u64, Vec<VnodeId>)> = BTreeMap::new();
    for st in seen.iter().filter_map(|s| s.answer.as_ref().ok()) {
        for v in st.vnodes.iter().filter(|v| v.kind == "store") {
            let Some(id) = VnodeId::parse(&v.id) else { continue };
            for (p, e) in &v.epochs {
                let held = newest.entry(*p).or_insert((*e, vec![]));
                if *e > held.0 {
                    *held = (*e, vec![]);
                }
                if *e == held.0 {
                    held.1.push(id.clone());
                }
            }
        }
    }
    newest
}

fn print_partitions(c: &Counted) {
    say!(
        "partitions: {}, {} copies each: {} whole, {} degraded, {} unavailable",
        c.partitions,
        c.replicas,
        c.whole(),
        c.degraded.len(),
        c.unavailable
    );
    for line in c.degraded.iter().take(LISTED_MAX) {
        say!("  degraded {line}");
    }
    if c.degraded.len() > LISTED_MAX {
        say!("  … and {} more degraded", c.degraded.len() - LISTED_MAX);
    }
    if !c.learning.is_empty() {
        say!("catching up: {}", c.learning.join(", "));
    }
}
