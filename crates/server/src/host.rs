//! A host's vnodes (DESIGN §7) and what its front ends share (`Shared`): the vnodes are started
//! from their checkpoints and logs, secondary parents are started and stopped when a vnode asks
//! (seed 004), and a vnode whose log broke stops the host (fail-stop). `Shared` runs cut processes
//! and inspects vnodes for the Redis and admin front ends and for snapshot creation.
//!
//! Below the front ends, above the vnode driver: the front ends and the process (`node.rs`) use it,
//! it uses the driver, storage, the router and the peer links' counters.

use crate::config::NodeConfig;
use crate::driver::{self, DriverSetup, Machine, VnodeHandle};
use crate::net::peer::LinkStats;
use crate::router::Router;
use crate::status::{CutReport, VnodeStatus};
use crate::storage::checkpoint::Image;
use crate::storage::log_writer::{LogSetup, LogWriteError, LogWriter};
use crate::storage::recover::{self, StorageError};
use crate::topology::Topology;
use crate::vnode::{HostEvent, VnodeCmd};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use waymark_core::alter::{AlterConfig, ManagerVnode, Term};
use waymark_core::{TreeImage, Vnode, VnodeId, VnodeImage};

/// Why the host's vnodes could not be started, or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    #[error("{dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error("vnode {vnode}: {error}")]
    Fatal {
        vnode: VnodeId,
        #[source]
        error: LogWriteError,
    },
}

/// What the front ends share with the node: the local store vnodes, and how to see every vnode.
pub struct Shared {
    pub cfg: NodeConfig,
    pub topology: Topology,
    pub router: Arc<Router>,
    pub links: Arc<LinkStats>,
    /// This host's store vnodes: a client's transactions are coordinated by one of them.
    pub stores: Vec<(VnodeId, mpsc::Sender<VnodeCmd>)>,
    pub started: std::time::Instant,
    /// The secondary parents this host runs now (seed 004), each with the primary parent it
    /// stands in for: they are not in the static tree, and `/topology` shows them.
    pub secondaries: std::sync::Mutex<std::collections::BTreeMap<VnodeId, VnodeId>>,
    /// This host's data against `limits.maxmemory_bytes`.
    pub memory: Arc<crate::memory::MemoryGauge>,
    /// TLS on the host's ports and its calls to other hosts, when its config has `[tls]`.
    pub tls: Option<crate::tls::HostTls>,
    /// The cluster's ACL users as this host's vnodes last applied them (`acl.rs`).
    pub acl: Arc<crate::acl::AclState>,
    /// The Redis connections this host serves (`CLIENT LIST`, `CLIENT KILL`).
    pub clients: Arc<crate::clients::Clients>,
    /// Calls, time and refusals per command (`INFO commandstats`).
    pub command_stats: crate::command_stats::CommandStats,
    /// Redis's compact-encoding thresholds as `CONFIG SET` left them (they change nothing here).
    pub encoding_hints: crate::encoding_hints::EncodingHints,
    /// Bytes this host's vnodes appended to their logs since it started.
    pub log_appended_bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl Shared {
    /// How this host calls another host's admin API: over TLS with the cluster's CA if it has one.
    pub fn admin_http(&self, timeout: std::time::Duration) -> crate::tls::AdminHttp {
        crate::tls::AdminHttp::new(self.tls.as_ref().map(|t| t.dial.clone()), timeout)
    }
}

/// Why a cut process could not be run from this host.
#[derive(Debug, thiserror::Error)]
pub enum RunCutError {
    /// This host does not run what starts a cut; another host does (clients ask the next one).
    #[error(transparent)]
    NotHere(#[from] NotHere),
    #[error("no answer from the cut process within {timeout:?}")]
    NoAnswer { timeout: std::time::Duration },
    /// The vnode that runs cuts refused (the core's words).
    #[error("{through}: {why}")]
    Unavailable { through: VnodeId, why: &'static str },
    #[error("{through}: unexpected answer {answer:?}")]
    Unexpected { through: VnodeId, answer: Box<waymark_core::Response> },
}

/// Why this host cannot run a cut process now, and which one to ask instead.
#[derive(Debug, thiserror::Error)]
pub enum NotHere {
    #[error("{vnode} is not running")]
    NotRunning { vnode: VnodeId },
    /// A secondary parent stops when its primary answers again (often right after a host's
    /// cut-off heals): the client asks the next host, which runs the primary.
    #[error("{vnode} stopped{}: ask another host", if *during_the_cut { " during the cut" } else { "" })]
    Stopped { vnode: VnodeId, during_the_cut: bool },
    #[error("host {host} runs no manager vnode; ask one of: {}", hosts.join(", "))]
    NoManager { host: String, hosts: Vec<String> },
    #[error(
        "host {host} does not run the cut coordinator {coordinator} of the `versions` strategy; ask host {}",
        coordinator.host
    )]
    NotCoordinator { host: String, coordinator: VnodeId },
}

/// The first pause before asking again for a cut a vnode refused with `TRYAGAIN`; it doubles.
const CUT_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(50);
/// The longest pause between two asks.
const CUT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(1);
/// At most this many refused asks before the last one, whose answer stands.
const CUT_RETRIES_MAX: u32 = 64;

impl Shared {
    /// Runs one cut process, waiting at most `timeout`. Transactions go on meanwhile: nothing is
    /// paused (except by the `blocking` strategy, which is there to show what that costs).
    /// `consistent` and `blocking` run through a manager vnode on this host (the root if it runs
    /// here); `versions` through the cut coordinator, the cluster's first store vnode.
    ///
    /// A refusal the core words as `TRYAGAIN` (the vnode is starting, or settling a placement a
    /// returning host changed) is asked again, with backoff, until `timeout` is spent: it lasts
    /// milliseconds, and an operator's snapshot should not fail for it.
    pub async fn run_cut(&self, timeout: std::time::Duration) -> Result<CutReport, RunCutError> {
        let begun = std::time::Instant::now();
        let mut backoff = CUT_RETRY_FIRST;
        for _ in 0..CUT_RETRIES_MAX {
            let left = timeout.saturating_sub(begun.elapsed());
            match self.run_cut_once(left).await {
                Err(RunCutError::Unavailable { why, .. })
                    if why.starts_with("TRYAGAIN") && begun.elapsed() + backoff < timeout =>
                {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(CUT_RETRY_MAX);
                }
                done => return done,
            }
        }
        self.run_cut_once(timeout.saturating_sub(begun.elapsed())).await
    }

    async fn run_cut_once(&self, timeout: std::time::Duration) -> Result<CutReport, RunCutError> {
        let through = match self.cfg.cluster.strategy {
            waymark_core::CutStrategy::Versions => self.cut_coordinator()?,
            _ => self.cut_manager()?,
        };
        let tx = self.router.local(&through).ok_or_else(|| NotHere::NotRunning { vnode: through.clone() })?;
        let (reply, rx) = oneshot::channel();
        let begun = std::time::Instant::now();
        // The admin API is one client of the vnode; each request its own number.
        static REQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let req = REQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let client = waymark_core::ClientId(u64::MAX - 1);
        let cmd = VnodeCmd::Client { client, req, request: waymark_core::Request::Cut, reply };
        let stopped = |during_the_cut| NotHere::Stopped { vnode: through.clone(), during_the_cut };
        tx.send(cmd).await.map_err(|_| stopped(false))?;
        let response = tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| RunCutError::NoAnswer { timeout })?
            .map_err(|_| stopped(true))?;
        match response {
            waymark_core::Response::CutDone { cut, ok, phases_us, metadata_md5, failure, left_out } => {
                let report = CutReport {
                    cut: cut.0,
                    ok,
                    phases_ms: phases_us.iter().map(|us| *us as f64 / 1000.0).collect(),
                    took_ms: begun.elapsed().as_secs_f64() * 1000.0,
                    strategy: self.cfg.cluster.strategy,
                    through: through.to_string(),
                    metadata_md5: metadata_md5
                        .map(|m| m.iter().map(|b| format!("{b:02x}")).collect())
                        .unwrap_or_default(),
                    // The core says why exactly when a cut failed (`CutFailure`, both processes).
                    why: failure.map(|f| f.to_string()),
                    left_out,
                };
                crate::telemetry::cut_done(&report);
                Ok(report)
            }
            waymark_core::Response::Unavailable { why } => Err(RunCutError::Unavailable { through, why }),
            other => Err(RunCutError::Unexpected { through, answer: Box::new(other) }),
        }
    }

    /// The manager vnode on this host whose operator runs the tree's cut process: the root or
    /// another manager of the configured tree, else a secondary parent this host started in place
    /// of one on a dead host (with 3 hosts the root is the only manager).
    fn cut_manager(&self) -> Result<VnodeId, NotHere> {
        let host = &self.cfg.host;
        let mut managers: Vec<&AlterConfig> = self.topology.managers_on(host).collect();
        managers.sort_by_key(|c| !c.parents.is_empty()); // the root first
        let standing_in = self.secondary_parents().into_iter().map(|(id, _)| id).next();
        match managers.first() {
            Some(manager) => Ok(manager.id.clone()),
            None if standing_in.is_some() => Ok(standing_in.expect("checked")),
            None => {
                let hosts: std::collections::BTreeSet<&str> =
                    self.topology.tree.iter().filter(|c| !c.children.is_empty()).map(|c| c.id.host.as_str()).collect();
                let hosts = hosts.into_iter().map(String::from).collect();
                Err(NotHere::NoManager { host: host.clone(), hosts })
            }
        }
    }

    /// The `versions` strategy's coordinator, if this host runs it.
    fn cut_coordinator(&self) -> Result<VnodeId, NotHere> {
        let coordinator = self.topology.cut_coordinator();
        if coordinator.host != self.cfg.host {
            let (host, coordinator) = (self.cfg.host.clone(), coordinator.clone());
            return Err(NotHere::NotCoordinator { host, coordinator });
        }
        Ok(coordinator.clone())
    }

    /// The status of every vnode this host runs now, the secondary parents it started included.
    pub async fn statuses(&self) -> Vec<VnodeStatus> {
        let mut ids: Vec<VnodeId> = self.topology.stores_on(&self.cfg.host).cloned().collect();
        ids.extend(self.topology.managers_on(&self.cfg.host).map(|c| c.id.clone()));
        ids.extend(self.secondary_parents().into_iter().map(|(id, _)| id));
        self.statuses_of(ids).await
    }

    /// The secondary parents this host runs, each with the primary parent it stands in for.
    pub fn secondary_parents(&self) -> Vec<(VnodeId, VnodeId)> {
        let running = self.secondaries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        running.iter().map(|(id, of)| (id.clone(), of.clone())).collect()
    }

    /// The status of each of `ids` that runs on this host now.
    pub async fn statuses_of(&self, ids: Vec<VnodeId>) -> Vec<VnodeStatus> {
        let mut out = vec![];
        for id in ids {
            let Some(tx) = self.router.local(&id) else { continue };
            let (reply, rx) = oneshot::channel();
            if tx.send(VnodeCmd::Inspect(reply)).await.is_ok() {
                if let Ok(s) = rx.await {
                    out.push(s);
                }
            }
        }
        out
    }
}

/// The vnodes this host runs.
pub struct Host {
    pub shared: Arc<Shared>,
    vnodes: HashMap<VnodeId, VnodeHandle>,
    events_tx: mpsc::UnboundedSender<HostEvent>,
    pub stop: CancellationToken,
}

impl Host {
    /// A host with no vnode started yet; its vnodes tell it what they need on `events_tx`.
    pub fn new(shared: Shared, events_tx: mpsc::UnboundedSender<HostEvent>, stop: CancellationToken) -> Host {
        Host { shared: Arc::new(shared), vnodes: HashMap::new(), events_tx, stop }
    }

    /// How many vnodes run now.
    pub fn vnode_count(&self) -> usize {
        self.vnodes.len()
    }

    fn cfg(&self) -> &NodeConfig {
        &self.shared.cfg
    }

    /// The tree configurations of this host's vnodes (its store vnodes' leaves, its managers).
    pub fn local_tree_configs(&self) -> Vec<AlterConfig> {
        let host = &self.cfg().host;
        self.shared.topology.tree.iter().filter(|c| &c.id.host == host).cloned().collect()
    }

    /// Starts the vnode `id` of this host's configuration from its checkpoint and log (nothing if
    /// it runs, or is none of this host's); its store vnodes reach the front ends once
    /// `publish_stores` ran.
    pub fn start_vnode(&mut self, id: &VnodeId) -> Result<(), HostError> {
        if self.vnodes.contains_key(id) || id.host != self.cfg().host {
            return Ok(());
        }
        if self.shared.topology.stores.contains(id) {
            return self.start_store(id);
        }
        let Some(cfg) = self.shared.topology.managers_on(&id.host).find(|c| &c.id == id).cloned() else {
            tracing::warn!(vnode = %id, "a parent named a vnode this host's configuration does not have");
            return Ok(());
        };
        self.start_manager(cfg)
    }

    fn start_store(&mut self, id: &VnodeId) -> Result<(), HostError> {
        let cfg = self.shared.topology.store_config(id, self.cfg());
        let genesis = cfg.tree.as_ref().map(|_| cfg.genesis.clone());
        let handle = self.start(id, false, |image, records| {
            let image = match image {
                Some(Image::Store(i)) => i,
                _ => VnodeImage::empty(genesis.as_ref()),
            };
            Vnode::recover_from(cfg, image, records)
        })?;
        self.vnodes.insert(id.clone(), handle);
        Ok(())
    }

    fn start_manager(&mut self, cfg: AlterConfig) -> Result<(), HostError> {
        let leaves = self.shared.topology.stores.len() as u64;
        let operator_timeout_us = self.shared.topology.timeouts.cut_phase_timeout_us * 4;
        let genesis = TreeImage { metadata: self.shared.topology.genesis.clone(), term: Term::ZERO };
        let id = cfg.id.clone();
        let handle = self.start(&id, false, |image, records| {
            let image = match image {
                Some(Image::Manager(i)) => i,
                _ => genesis,
            };
            ManagerVnode::recover(cfg, image, records).with_operator(leaves, operator_timeout_us)
        })?;
        self.vnodes.insert(id, handle);
        Ok(())
    }

    /// Hands the store vnodes started to the front ends (once, before they start): a client's
    /// transactions are coordinated by one of them.
    pub fn publish_stores(&mut self) {
        let stores: Vec<(VnodeId, mpsc::Sender<VnodeCmd>)> = (self.shared.topology.stores.iter())
            .filter_map(|id| Some((id.clone(), self.vnodes.get(id)?.tx.clone())))
            .collect();
        Arc::get_mut(&mut self.shared).expect("not shared yet").stores = stores;
    }

    /// Whether this host runs a store vnode.
    pub fn runs_a_store(&self) -> bool {
        self.shared.topology.stores.iter().any(|id| self.vnodes.contains_key(id))
    }

    /// Opens a vnode's storage (`fresh`: emptied first), rebuilds the machine and starts its threads.
    fn start<M: Machine>(
        &self,
        id: &VnodeId,
        fresh: bool,
        build: impl FnOnce(Option<Image>, &[waymark_core::Record]) -> M,
    ) -> Result<VnodeHandle, HostError> {
        let dir = self.cfg().data_dir.join("vnodes").join(id.to_string());
        if fresh && dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|source| HostError::Dir { dir: dir.clone(), source })?;
        }
        let options = waymark_wal::Options {
            max_record_bytes: self.cfg().limits.frame_max_bytes as u64,
            preallocate: self.cfg().wal_preallocate,
            ..waymark_wal::Options::default()
        };
        let opened = recover::open(&dir, options)?;
        if opened.truncated_bytes > 0 {
            tracing::warn!(vnode = %id, "cut a torn log tail of {} bytes", opened.truncated_bytes);
        }
        tracing::info!(vnode = %id, records = opened.records.len(), checkpoint = opened.image.is_some(), "recovered");
        let machine = build(opened.image, &opened.records);
        // The log writer counts appends from where the machine's log positions stand.
        let base = machine.appended();
        let limits = &self.cfg().limits;
        let appended_bytes = self.shared.log_appended_bytes.clone();
        let setup = LogSetup { wal: opened.wal, dir, base, fsync: self.cfg().fsync, appended_bytes };
        let (log, checkpoints) = LogWriter::open(setup);
        let setup = DriverSetup {
            id: id.clone(),
            log,
            checkpoints,
            router: self.shared.router.clone(),
            host_events: self.events_tx.clone(),
            checkpoint_every: self.cfg().checkpoint_every,
            queue_max: limits.vnode_queue_max,
            stop: self.stop.child_token(),
            memory: self.shared.memory.share(),
            acl: self.shared.acl.clone(),
        };
        driver::spawn(machine, setup).map_err(HostError::Thread)
    }

    pub fn on_event(&mut self, ev: HostEvent) -> Result<(), HostError> {
        match ev {
            HostEvent::StartSecondary { id, of, metadata, term } => self.start_secondary(id, of, metadata, term),
            HostEvent::StopSecondary { id } => self.stop_secondary(&id),
            HostEvent::Fatal { vnode, error } => return Err(HostError::Fatal { vnode, error }),
        }
        Ok(())
    }

    /// Seed 004: this host's vnode was elected assisting child; start the secondary parent `id`
    /// in place of `of`, from the assisting child's metadata, on a fresh log.
    fn start_secondary(&mut self, id: VnodeId, of: VnodeId, metadata: waymark_core::alter::Metadata, term: Term) {
        if self.vnodes.get(&id).is_some_and(|h| !h.join.is_finished()) {
            return;
        }
        let Some(cfg) = self.shared.topology.tree_config(&of).map(|c| c.secondary(id.clone())) else {
            return tracing::warn!(vnode = %id, "asked to stand in for {of}, which is not in the tree");
        };
        let image = TreeImage { metadata, term };
        // It may be the only manager left (3 hosts: the root stands alone): it runs cuts too.
        let leaves = self.shared.topology.stores.len() as u64;
        let operator_timeout_us = self.shared.topology.timeouts.cut_phase_timeout_us * 4;
        let build = |_: Option<Image>, records: &[waymark_core::Record]| {
            ManagerVnode::recover(cfg, image, records).with_operator(leaves, operator_timeout_us)
        };
        match self.start(&id, true, build) {
            Ok(handle) => {
                tracing::info!(vnode = %id, "secondary parent started in place of {of}");
                self.shared.secondaries.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), of);
                self.vnodes.insert(id, handle);
            }
            Err(e) => tracing::error!(vnode = %id, "cannot start secondary parent: {e}"),
        }
    }

    fn stop_secondary(&mut self, id: &VnodeId) {
        self.shared.secondaries.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        if let Some(handle) = self.vnodes.remove(id) {
            tracing::info!(vnode = %id, "secondary parent stopped");
            handle.stop.cancel();
        }
    }

    pub async fn stop_all(&mut self) {
        self.stop.cancel();
        let handles: Vec<VnodeHandle> = self.vnodes.drain().map(|(_, h)| h).collect();
        let _ = tokio::task::spawn_blocking(move || {
            for h in handles {
                let _ = h.join.join();
            }
        })
        .await;
    }
}
