//! One host's process (DESIGN §7), the top of the crate: it binds the host's ports, starts its
//! vnodes (`host.rs`: each a driver thread that also writes and syncs the vnode's log), then the
//! peer links, the Redis front end, the admin API and the snapshot schedule, and serves until
//! shutdown — or until a vnode's log breaks (fail-stop).

use crate::admin;
use crate::config::NodeConfig;
use crate::host::{Host, HostError, Shared};
use crate::net::auth::Identity;
use crate::net::outgoing::Outgoing;
use crate::net::peer::{self, LinkContext, LinkStats, Peer};
use crate::resp;
use crate::router::Router;
use crate::snapshot::schedule;
use crate::tls::{HostTls, TlsError};
use crate::topology::{Topology, TopologyError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("cannot listen on {addr} ({what}): {source}")]
    Listen { addr: std::net::SocketAddr, what: &'static str, source: std::io::Error },
    #[error("cannot write {file}: {source}")]
    Listening { file: PathBuf, source: std::io::Error },
    #[error("{dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error("TLS ([tls] of {file}): {source}")]
    Tls { file: PathBuf, source: TlsError },
}

/// The file in the data directory where a node says, once it holds all three of its ports, which
/// process holds them: `cluster start` trusts a probe's answer only from its own process, since a
/// port it was given may have been taken by another program before the node could bind it.
pub const LISTENING_FILE: &str = "listening";

/// The host's three listening sockets, bound before anything else starts: a port that is taken
/// stops the node at once, before it recovers a log or links to a peer.
struct Listeners {
    peer: tokio::net::TcpListener,
    redis: tokio::net::TcpListener,
    admin: tokio::net::TcpListener,
}

impl Listeners {
    async fn bind(cfg: &NodeConfig) -> Result<Listeners, NodeError> {
        let me = cfg.this_host();
        let bind = |addr, what| async move {
            tokio::net::TcpListener::bind(addr).await.map_err(|source| NodeError::Listen { addr, what, source })
        };
        Ok(Listeners {
            peer: bind(me.peer, "peer links").await?,
            redis: bind(me.redis, "redis clients").await?,
            admin: bind(me.admin, "admin http").await?,
        })
    }

    /// Writes `LISTENING_FILE`: this process's pid, then the three addresses it holds.
    fn publish(&self, data_dir: &std::path::Path) -> Result<(), NodeError> {
        let file = data_dir.join(LISTENING_FILE);
        let addr = |l: &tokio::net::TcpListener| l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let text = format!(
            "pid {}\npeer {}\nredis {}\nadmin {}\n",
            std::process::id(),
            addr(&self.peer),
            addr(&self.redis),
            addr(&self.admin)
        );
        let partial = data_dir.join(format!("{LISTENING_FILE}.partial"));
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, &file))
            .map_err(|source| NodeError::Listening { file, source })
    }
}

/// Runs the host until `shutdown` (or a fatal error).
pub async fn run(cfg: NodeConfig, shutdown: CancellationToken) -> Result<(), NodeError> {
    let topology = Topology::new(&cfg.cluster)?;
    let tls = match &cfg.tls {
        Some(files) => Some(HostTls::load(files).map_err(|source| NodeError::Tls { file: cfg.file.clone(), source })?),
        None => None,
    };
    let vnodes_dir = cfg.data_dir.join("vnodes");
    std::fs::create_dir_all(&vnodes_dir).map_err(|source| NodeError::Dir { dir: vnodes_dir.clone(), source })?;
    let _ = std::fs::remove_file(cfg.data_dir.join(LISTENING_FILE));
    let listeners = Listeners::bind(&cfg).await?;
    listeners.publish(&cfg.data_dir)?;
    let (peers, senders) = peer_queues(&cfg);
    let router = Arc::new(Router::new(cfg.host.clone(), senders));
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let stop = shutdown.child_token();
    let links = Arc::new(LinkStats::default());
    if let Err(e) = crate::telemetry::install() {
        tracing::warn!("{e}; /metrics will say so");
    }
    let started = std::time::Instant::now();
    let memory = crate::memory::MemoryGauge::new(cfg.limits.maxmemory_bytes);
    let acl = Arc::new(crate::acl::AclState::new(cfg.password.is_some()));
    let secondaries = Default::default();
    let clients = Arc::default();
    let (command_stats, log_appended_bytes, stores) = (Default::default(), Default::default(), vec![]);
    let shared = Shared {
        cfg,
        topology,
        router,
        links,
        stores,
        started,
        secondaries,
        memory,
        tls,
        acl,
        clients,
        command_stats,
        encoding_hints: Default::default(),
        log_appended_bytes,
    };
    let router = shared.router.clone();
    let mut host = Host::new(shared, events_tx, stop);
    // The peer links first: the parents this host asks which vnodes to start may be elsewhere.
    let (boot_tx, mut boot_inbox) = mpsc::channel(crate::boot::INBOX_MAX);
    router.set_boot_inbox(Some(boot_tx));
    start_peer_links(&host, listeners.peer, peers);
    crate::boot::run(&mut host, &mut boot_inbox, &mut events, &shutdown).await?;
    router.set_boot_inbox(None);
    if shutdown.is_cancelled() {
        host.stop_all().await;
        return Ok(());
    }
    host.publish_stores();
    start_front_ends(&host, listeners.redis, listeners.admin);
    tracing::info!(host = %host.shared.cfg.host, "node started: {} vnodes", host.vnode_count());
    if host.shared.cfg.breaks != waymark_core::Breaks::default() {
        tracing::warn!(breaks = ?host.shared.cfg.breaks, "node.breaks: deliberate protocol bugs are on (tests only)");
    }
    let result = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break Ok(()),
            Some(ev) = events.recv() => if let Err(e) = host.on_event(ev) { break Err(e.into()) },
        }
    };
    host.stop_all().await;
    result
}

fn peer_queues(cfg: &NodeConfig) -> (Vec<Peer>, HashMap<String, Arc<Outgoing>>) {
    let mut peers = vec![];
    let mut senders = HashMap::new();
    for h in cfg.cluster.hosts.iter().filter(|h| h.name != cfg.host) {
        let out = Arc::new(Outgoing::new(cfg.limits.peer_queue_max, cfg.limits.frame_max_bytes));
        senders.insert(h.name.clone(), out.clone());
        peers.push(Peer { host: h.name.clone(), addr: h.peer, out });
    }
    (peers, senders)
}

/// The peer links: to every other host, over TLS when the host has it.
fn start_peer_links(host: &Host, listener: tokio::net::TcpListener, peers: Vec<Peer>) {
    let cfg = &host.shared.cfg;
    let identity = Identity { cluster: cfg.cluster.name.clone(), host: cfg.host.clone(), secret: cfg.secret.clone() };
    let ctx = LinkContext {
        me: identity,
        hosts: cfg.cluster.hosts.iter().map(|h| h.name.clone()).collect(),
        frame_max_bytes: cfg.limits.frame_max_bytes,
        router: host.shared.router.clone(),
        stats: host.shared.links.clone(),
        shutdown: host.stop.clone(),
        tls: host.shared.tls.as_ref().map(peer::PeerTls::new),
    };
    peer::start(ctx, listener, peers);
}

/// The front ends, once the store vnodes run: the Redis server, the admin API and the snapshot
/// schedule.
fn start_front_ends(host: &Host, redis: tokio::net::TcpListener, admin: tokio::net::TcpListener) {
    match host.runs_a_store() {
        true => resp::server::start(host.shared.clone(), redis, host.stop.clone()),
        // Its parents placed none of its store vnodes here: no client transaction can start here.
        false => tracing::error!("this host runs no store vnode: its Redis port serves no client"),
    }
    admin::start(host.shared.clone(), admin, host.stop.clone());
    if let Some(schedule) = host.shared.cfg.schedule {
        tokio::spawn(schedule::run(host.shared.clone(), schedule, host.stop.clone()));
    }
}
