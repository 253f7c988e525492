//! `waymark cluster status`: what the running cluster says of itself, not only which pid files
//! name a live process — each host asked over its admin API (`GET /status`), the root and the term
//! it leads, and every partition's replicas with the ones on hosts that do not answer. A partition
//! with fewer live copies than the cluster's replica count is *degraded*; one with none is
//! *unavailable*. A partition's replicas are those of the newest chain the answering store vnodes
//! route it by (a failover drops a dead host's replicas and raises the chain's epoch); while no
//! failover changed it, the configured chain, with the replicas on silent hosts marked down.

use super::cluster::{hosts_of, running_pid};
use anyhow::Result;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;
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
}

/// One host as the status found it.
struct Seen {
    cfg: NodeConfig,
    pid: Option<u32>,
    answer: Result<HostStatus, String>,
}

pub fn run(dir: &Path) -> Result<()> {
    let hosts = hosts_of(dir)?;
    let topology = Topology::new(&hosts[0].1.cluster)?;
    let seen: Vec<Seen> = hosts
        .into_iter()
        .map(|(host_dir, cfg)| {
            let answer = ask(&cfg);
            Seen { pid: running_pid(&host_dir), cfg, answer }
        })
        .collect();
    print_hosts(&seen);
    print_root(&seen);
    print_partitions(&topology, &seen, seen[0].cfg.cluster.replicas);
    Ok(())
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

fn print_partitions(topology: &Topology, seen: &[Seen], replicas: usize) {
    let live: BTreeSet<VnodeId> = seen
        .iter()
        .filter_map(|s| s.answer.as_ref().ok())
        .flat_map(|st| &st.vnodes)
        .filter(|v| v.kind == "store")
        .filter_map(|v| VnodeId::parse(&v.id))
        .collect();
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
    let n = placement.partitions() as usize;
    say!(
        "partitions: {n}, {replicas} copies each: {} whole, {} degraded, {unavailable} unavailable",
        n - degraded.len(),
        degraded.len()
    );
    for line in degraded.iter().take(LISTED_MAX) {
        say!("  degraded {line}");
    }
    if degraded.len() > LISTED_MAX {
        say!("  … and {} more degraded", degraded.len() - LISTED_MAX);
    }
    let learning: Vec<String> = seen
        .iter()
        .filter_map(|s| s.answer.as_ref().ok())
        .flat_map(|st| &st.vnodes)
        .filter(|v| !v.learning.is_empty())
        .map(|v| format!("{} ({} partitions)", v.id, v.learning.len()))
        .collect();
    if !learning.is_empty() {
        say!("catching up: {}", learning.join(", "));
    }
}
