//! `GET /topology`: the tree as JSON. Every host derives the same static tree from the config
//! (`tree`: each vnode's parents and children), so a page served by any host can draw all of it;
//! `vnodes` adds what is live — the status of each vnode this host runs (the parent it follows,
//! the children it hears from, its terms), `secondary_parents` the ones started in place of a dead
//! parent (seed 004), and `root_term` the term the root orders in, if the root is among them.
//!
//! With `?scope=cluster` the host also asks every other host's `/topology` (in parallel, each
//! within `PEER_WAIT`) and merges their live parts, naming the hosts that did not answer: a
//! browser may only ask the host that served the page.

use crate::host::Shared;
use crate::status::DbKeys;
use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long a host waits for another's `/topology`: the page refreshes every 2 s.
const PEER_WAIT: Duration = Duration::from_millis(800);
/// Most bytes read of another host's answer.
const PEER_ANSWER_MAX_BYTES: u64 = 4 << 20;

#[derive(Deserialize)]
pub struct Scope {
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Serialize)]
struct TreeVnode {
    id: String,
    host: String,
    kind: &'static str,
    /// The primary parent first (empty at the root).
    parents: Vec<String>,
    children: Vec<String>,
}

#[derive(Serialize)]
struct HostEntry {
    name: String,
    admin: String,
}

/// The live part a host answers for itself.
#[derive(Default, Serialize, Deserialize)]
struct Live {
    vnodes: Vec<Value>,
    secondary_parents: Vec<Value>,
}

pub async fn topology(State(shared): State<Arc<Shared>>, Query(q): Query<Scope>) -> Json<Value> {
    let mut live = local(&shared).await;
    let mut unreachable = vec![];
    if q.scope.as_deref() == Some("cluster") {
        for (host, answer) in peers(&shared).await {
            match answer {
                Ok(theirs) => {
                    live.vnodes.extend(theirs.vnodes);
                    live.secondary_parents.extend(theirs.secondary_parents);
                }
                Err(e) => unreachable.push(serde_json::json!({ "host": host, "error": e.to_string() })),
            }
        }
    }
    let root_term = live.vnodes.iter().filter_map(|v| v["leading_term"].as_u64()).max();
    Json(serde_json::json!({
        "cluster": shared.cfg.cluster.name,
        "host": shared.cfg.host,
        "hosts": hosts(&shared),
        "tree": tree(&shared),
        "vnodes": live.vnodes,
        "secondary_parents": live.secondary_parents,
        "root_term": root_term,
        "unreachable": unreachable,
    }))
}

fn tree(shared: &Shared) -> Vec<TreeVnode> {
    let topology = &shared.topology;
    topology
        .tree
        .iter()
        .map(|c| TreeVnode {
            id: c.id.to_string(),
            host: c.id.host.clone(),
            kind: if topology.stores.contains(&c.id) { "store" } else { "manager" },
            parents: c.parents.iter().map(|p| p.to_string()).collect(),
            children: c.children.iter().map(|p| p.to_string()).collect(),
        })
        .collect()
}

fn hosts(shared: &Shared) -> Vec<HostEntry> {
    let hosts = &shared.cfg.cluster.hosts;
    hosts.iter().map(|h| HostEntry { name: h.name.clone(), admin: h.admin.to_string() }).collect()
}

/// This host's vnodes (with the host's name on each) and secondary parents.
async fn local(shared: &Shared) -> Live {
    let host = &shared.cfg.host;
    let mut live = Live::default();
    // `statuses` includes the secondary parents running here.
    for status in shared.statuses().await {
        live.vnodes.push(with_host(serde_json::json!(status), host));
    }
    for (id, of) in shared.secondary_parents() {
        live.secondary_parents.push(serde_json::json!({ "id": id.to_string(), "of": of.to_string(), "host": host }));
    }
    live
}

/// The keys of the partitions each vnode serves as primary, summed over the cluster: this host's
/// from its vnodes, every other host's from its `/topology` (`DBSIZE`, `INFO keyspace`). A host
/// that does not answer within `PEER_WAIT` counts none; during a failover a partition may be
/// counted by its old primary and its new one alike.
pub async fn cluster_primary_keys(shared: &Shared) -> u64 {
    cluster_dbs(shared).await.iter().map(|d| d.keys).sum()
}

/// The cluster's keys per database, 0 to 15, as its primaries count them (a host of an older
/// version, which does not count databases, has its keys counted in database 0).
pub async fn cluster_dbs(shared: &Shared) -> Vec<DbKeys> {
    let mut dbs = vec![DbKeys::default(); waymark_core::database::DATABASES as usize];
    let mut add = |counts: &[DbKeys], all: u64| match counts.len() == dbs.len() {
        true => dbs.iter_mut().zip(counts).for_each(|(sum, c)| sum.add(c, c.mean_deadline_ms * c.expires as f64)),
        false => dbs[0].keys += all,
    };
    for s in shared.statuses().await {
        add(&s.primary_dbs, s.primary_keys as u64);
    }
    for v in peers(shared).await.into_iter().filter_map(|(_, live)| live.ok()).flat_map(|live| live.vnodes) {
        let counts: Vec<DbKeys> = serde_json::from_value(v["primary_dbs"].clone()).unwrap_or_default();
        add(&counts, v["primary_keys"].as_u64().unwrap_or(0));
    }
    dbs
}

fn with_host(mut v: Value, host: &str) -> Value {
    v["host"] = Value::from(host);
    v
}

/// Every other host's live part, or why it is missing.
async fn peers(shared: &Shared) -> Vec<(String, Result<Live, AskError>)> {
    let others = shared.cfg.cluster.hosts.iter().filter(|h| h.name != shared.cfg.host);
    let http = shared.admin_http(PEER_WAIT);
    let asks: Vec<_> = others
        .map(|h| {
            let (name, url, http) = (h.name.clone(), http.url(h.admin, "/topology"), http.clone());
            (name, tokio::task::spawn_blocking(move || ask(&http.agent, &url)))
        })
        .collect();
    let mut out = vec![];
    for (name, ask) in asks {
        let answer = ask.await.unwrap_or_else(|e| Err(AskError::Task(e)));
        out.push((name, answer));
    }
    out
}

/// Why another host's live part is missing from the page (shown there, by host).
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("asking failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    #[error("{0}")]
    Call(#[source] Box<ureq::Error>),
    #[error("{0}")]
    Read(#[source] std::io::Error),
    #[error("not a topology: {0}")]
    NotATopology(#[source] serde_json::Error),
}

fn ask(agent: &ureq::Agent, url: &str) -> Result<Live, AskError> {
    use std::io::Read;
    let answer = agent.get(url).call().map_err(|e| AskError::Call(Box::new(e)))?;
    let mut body = String::new();
    answer.into_reader().take(PEER_ANSWER_MAX_BYTES).read_to_string(&mut body).map_err(AskError::Read)?;
    serde_json::from_str(&body).map_err(AskError::NotATopology)
}
