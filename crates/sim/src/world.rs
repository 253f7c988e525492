//! The simulated world: one thread, virtual time, one seeded RNG for every decision, an ordered
//! event queue. Vnodes are the real `waymark-core` state machines; the world plays their drivers
//! (WAL with group commit, network, clients) and the faults.

use crate::checkers::tree_answered::Incarnation;
use crate::client::Client;
use crate::config::{SimConfig, WorkloadKind};
use crate::faults::{Fault, Faults};
use crate::history::{CutRun, CutWindow, DeclaredCut, History};
use crate::net::{Mishap, Network};
use crate::queue::EventQueue;
use crate::slot::{Resident, Slot};
use crate::trace::Trace;
use crate::tree::followed::FollowedParents;
use crate::tree::host::TreeHost;
use crate::tree::stats::TreeStats;
use crate::workloads::{append::Append, bank::Bank, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use waymark_core::alter::{AlterSeq, MetaVersion};
use waymark_core::{
    Body, ClientId, CutMsg, Envelope, Input, Lsn, Output, Placement, Record, Request, Response, Timer, Vnode,
    VnodeConfig, VnodeId, VnodeImage,
};

/// A log's fsync takes up to this long (store vnodes and managers alike).
pub(crate) const SYNC_MAX_US: u64 = 3_000;

/// After healing, the operator waits this long — restarted vnodes resolve what they recovered in
/// doubt, held replies and cuts begun under faults end — then asks for `AFTER_HEAL_CUTS` cuts, one
/// every `AFTER_HEAL_INTERVAL_US` (`checkers::liveness` judges them).
pub const AFTER_HEAL_GRACE_US: u64 = 1_000_000;
pub const AFTER_HEAL_CUTS: u32 = 4;
pub const AFTER_HEAL_INTERVAL_US: u64 = 250_000;
/// With `--failover`, an ask refused with TRYAGAIN (a dead host's partitions still moving) or let
/// go while a cut runs does not count towards `AFTER_HEAL_CUTS`, up to this many asks: after
/// healing, the failure detector's late observations are still being ordered (host records dead
/// and alive again, promotions), and a cut started over the live hosts fails cleanly across each
/// such change (`--seed 272 --vnodes 12 --fanout 2 --failover`: two refusals, one failed, settled
/// after the fourth ask). An operator retries as well.
pub const AFTER_HEAL_ASKS_MAX: u32 = 12;

/// The client id the cut process's operator uses.
pub const OPERATOR: u64 = u64::MAX;
/// How long a client waits for any answer before calling the outcome unknown.
pub(crate) const CLIENT_TIMEOUT_US: u64 = 1_500_000;
pub(crate) const SETUP_CLIENT: usize = 0;

/// Events are moved in and out of the queue once each; boxing the envelope would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Hash)]
pub enum Event {
    Deliver {
        from: Slot,
        to: Slot,
        epoch: u64,
        env: Envelope,
    },
    Timer {
        node: usize,
        instance: u32,
        timer: Timer,
    },
    SyncDone {
        node: usize,
        instance: u32,
        upto: usize,
    },
    /// A client's request arrives at a vnode (a store vnode, or a manager for a cut).
    ToVnode {
        node: Slot,
        client: u64,
        req: u64,
        request: Request,
    },
    ToClient {
        client: u64,
        req: u64,
        response: Response,
    },
    ClientWake {
        client: usize,
    },
    ClientTimeout {
        client: usize,
        req: u64,
    },
    CutTick,
    Fault(Fault),
    ManagerTimer {
        m: usize,
        instance: u32,
        timer: Timer,
    },
    ManagerSync {
        m: usize,
        instance: u32,
        upto: usize,
    },
    /// An alteration a manager wrote, as read back after the sync (damaged by a `Corrupt` fault).
    ManagerReadBack {
        m: usize,
        instance: u32,
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    /// A crashed tree vnode's host is back (`tree::host::TreeHost::host_back`).
    HostBack {
        tree_node: Slot,
    },
    AlterReadBack {
        node: usize,
        instance: u32,
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    /// A client's back-off after a conflict is over.
    ClientResume {
        client: usize,
    },
}

/// One host's share of the world: its vnode (absent while crashed) and its log.
pub struct Node {
    pub vnode: Option<Vnode>,
    pub cfg: VnodeConfig,
    /// Invariant: `log[..durable]` survives any crash.
    pub log: Vec<Record>,
    pub durable: usize,
    /// Bumped at every crash so that timers and syncs of a dead instance are ignored.
    pub instance: u32,
    sync_pending: bool,
    /// Fault: the next alteration read back from this log comes back damaged.
    pub corrupt_next: bool,
    /// The newest checkpoint. A restart rebuilds from it and the records after it, as the server
    /// does.
    pub checkpoint: Option<Checkpoint>,
}

/// A vnode's image when `log[..log_len]` was all it had appended, all of it durable.
pub struct Checkpoint {
    pub image: VnodeImage,
    pub log_len: usize,
}

/// A checkpoint is taken at the first sync after the log grew by this many records.
const CHECKPOINT_EVERY_RECORDS: usize = 64;

/// The operator's request for a cut, in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CutRequest {
    /// Its number among the operator's requests.
    pub(crate) req: u64,
    /// When it was sent (on the tree: when it reached the manager that runs the operator).
    pub(crate) begun_us: u64,
}

pub struct World {
    pub cfg: SimConfig,
    pub rng: ChaCha8Rng,
    /// Draws the network's mishaps only, so that a run without them follows the same events.
    mishap_rng: ChaCha8Rng,
    pub now_us: u64,
    events: EventQueue<Event>,
    pub nodes: Vec<Node>,
    pub index: BTreeMap<VnodeId, Slot>,
    pub net: Network,
    pub placement: Arc<Placement>,
    pub(crate) clients: Vec<Client>,
    pub(crate) workload: Box<dyn Workload>,
    pub history: History,
    /// Each client's scan in progress (`--scans`).
    pub(crate) scans_running: BTreeMap<usize, crate::history::ScanRun>,
    pub faults: Faults,
    pub trace: Trace,
    /// When each client's operation started waiting on the near (for latency metrics).
    pub(crate) setup_done: bool,
    pub(crate) stopping: bool,
    /// When every fault healed (the end of the workload); cuts begun after it face no fault.
    pub healed_us: Option<u64>,
    /// Cuts the operator asked for after healing (`AFTER_HEAL_CUTS` at most).
    pub(crate) after_heal_asks: u32,
    /// The operator's request for a cut in flight.
    pub(crate) cut_request: Option<CutRequest>,
    pub(crate) operator_requests: u64,
    pub messages_sent: u64,
    pub messages_lost: u64,
    /// Messages of the cut process (`Body::Cut`), for the strategies' comparison.
    pub cut_messages: u64,
    /// Transactions refused because they would cross a running `versions` snapshot
    /// (`AbortReason::SnapshotOrder`): what the guard costs.
    pub snapshot_order_aborts: u64,
    /// How long each reply held for real-time safety waited.
    pub held_replies_us: Vec<u64>,
    /// How long each transaction was held back by a cut before it could start.
    pub commit_stalls_us: Vec<u64>,
    /// Checkpoints whose image differed from the replay of the log they stand for.
    pub checkpoint_mismatches: Vec<String>,
    /// `--tree`: the manager vnodes (the operator runs on one of them).
    pub managers: Vec<crate::tree::manager::ManagerNode>,
    /// `--tree`: which parent each tree vnode followed, by slot.
    pub(crate) followed: FollowedParents,
    pub tree_stats: TreeStats,
    /// `--tree`: the manager the cut request in flight was sent to.
    pub(crate) cut_entry: Option<usize>,
    /// `--tree`: what the checkers at the moment of an answer or a term need (`tree_answered`).
    pub answers: crate::checkers::tree_answered::Answers,
    /// `--tree`: the chains store vnodes routed by, per partition and epoch (`placement_epochs`).
    pub epochs: crate::checkers::placement_epochs::EpochsSeen,
    /// `--tree`: every whole host crash, and when (the failover windows are measured from them).
    pub host_downs: Vec<(String, u64)>,
    /// `--failover`: up to when availability was counted (`count_availability`).
    availability_upto_us: u64,
    /// `--failover`: hosts cut off from every other host (`Fault::Isolate`), each with how many
    /// isolations hold it; no message crosses between one of them and another host.
    pub isolated: BTreeMap<String, u32>,
    pub after_decision: Option<crate::faults::AfterDecision>,
    /// Cuts declared successful whose snapshot export is still to be observed, with when
    /// (`observe_exports`).
    exports_due: Vec<(waymark_core::CutId, u64)>,
}

/// How long after the operator hears a cut succeed its snapshot asks the vnodes what they held
/// at it: a real export is asked over HTTP after the cut's answer, and a placement may change
/// meanwhile (`checkers::cut_exports`).
pub const EXPORT_AFTER_US: u64 = 300_000;

impl World {
    pub fn new(cfg: SimConfig) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let ids: Vec<VnodeId> = (0..cfg.vnodes).map(|i| VnodeId::new("store0", format!("node{i:03}"))).collect();
        let placement = Arc::new(Placement::round_robin(&ids, cfg.partitions, cfg.replicas));
        let (leaves, managers) = match cfg.tree {
            true => crate::tree_mode::shape(&ids, cfg.fanout.max(2), cfg.breaks),
            false => (vec![], vec![]),
        };
        let genesis = crate::tree_mode::bank_genesis(leaves.iter().chain(&managers), &placement, &cfg);
        let nodes: Vec<Node> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let mut v = vnode_config(&cfg, id, &ids, &placement);
                v.tree = leaves.get(i).cloned();
                v.genesis = genesis.clone();
                Node::fresh(v)
            })
            .collect();
        let mut index: BTreeMap<VnodeId, Slot> =
            ids.iter().cloned().enumerate().map(|(i, id)| (id, Slot::store(i))).collect();
        for (m, cfg) in managers.iter().enumerate() {
            index.insert(cfg.id.clone(), Slot::manager(m, nodes.len()));
        }
        let leaves_count = nodes.len() as u64;
        let managers: Vec<crate::tree::manager::ManagerNode> = managers
            .into_iter()
            .map(|cfg| crate::tree::manager::ManagerNode::new(cfg, waymark_core::TreeImage::default(), leaves_count))
            .collect();
        let followed = FollowedParents::new(nodes.len() + managers.len());
        let workload: Box<dyn Workload> = match cfg.workload {
            WorkloadKind::Bank => Box::new(Bank),
            WorkloadKind::Append => Box::<Append>::default(),
            WorkloadKind::Expiry => Box::<crate::workloads::expiry::Expiry>::default(),
            WorkloadKind::Hash => Box::<crate::workloads::hash::Hashes>::default(),
            WorkloadKind::Sets => Box::<crate::workloads::sets::Sets>::default(),
            WorkloadKind::Lists => Box::<crate::workloads::lists::Lists>::default(),
        };
        let clients = (0..cfg.clients.max(1)).map(|id| Client::new(id, cfg.breaks)).collect();
        let trace = Trace::new(cfg.trace);
        let faults = Faults::default();
        // One draw before anything else: kept so that recorded regression seeds keep their scenario.
        let _ = rng.gen::<u64>();
        let mishap_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6d69_7368_6170);
        World {
            cfg,
            mishap_rng,
            rng,
            now_us: 0,
            events: EventQueue::default(),
            nodes,
            index,
            net: Network::default(),
            placement,
            clients,
            workload,
            history: History::default(),
            scans_running: BTreeMap::new(),
            faults,
            trace,
            setup_done: false,
            stopping: false,
            healed_us: None,
            after_heal_asks: 0,
            cut_request: None,
            operator_requests: 0,
            messages_sent: 0,
            messages_lost: 0,
            cut_messages: 0,
            snapshot_order_aborts: 0,
            held_replies_us: vec![],
            commit_stalls_us: vec![],
            checkpoint_mismatches: vec![],
            managers,
            followed,
            tree_stats: Default::default(),
            cut_entry: None,
            answers: Default::default(),
            epochs: Default::default(),
            host_downs: vec![],
            availability_upto_us: 0,
            isolated: BTreeMap::new(),
            after_decision: None,
            exports_due: vec![],
        }
    }

    pub fn schedule(&mut self, at_us: u64, event: Event) {
        debug_assert!(at_us >= self.now_us, "scheduling in the past");
        self.events.push(at_us, event);
    }

    /// Runs the whole scenario: boot, setup, workload with faults (and cuts), heal, settle.
    pub fn run(&mut self) {
        for node in 0..self.nodes.len() {
            self.step(node, Input::Restarted);
        }
        self.boot_managers();
        self.start_setup();
        if self.cfg.faults {
            crate::faults::plan(self);
        }
        if self.cfg.cuts {
            let at = self.rng.gen_range(100_000..200_000);
            self.schedule(at, Event::CutTick);
        }
        let end_us = self.cfg.duration_us;
        // Heartbeats never stop in tree mode: settle for a bounded time instead of until quiet.
        let settle_us = if self.cfg.tree { 3_000_000 } else { self.cfg.settle_max_us };
        let limit_us = end_us + settle_us;
        while let Some((key, event)) = self.events.pop() {
            let at = key.at_us;
            if at > limit_us {
                break;
            }
            if !self.stopping && at >= end_us {
                // Heal first; what healing schedules may come before this event.
                self.events.put_back(key, event);
                self.now_us = end_us;
                self.stop_and_heal();
                continue;
            }
            self.count_availability(at.min(end_us));
            self.observe_exports(at);
            self.now_us = at;
            self.trace.event(at, &event);
            self.handle(event);
        }
        if !self.stopping {
            self.stop_and_heal();
        }
        self.follow_placement();
    }

    /// A snapshot of each cut declared successful asks every running store vnode what it held at
    /// the cut, `EXPORT_AFTER_US` after the operator heard (`Vnode::holdings_at`, as the server's
    /// export does). Reads state only: the run is the same with or without it.
    fn observe_exports(&mut self, upto_us: u64) {
        let (due, later): (Vec<_>, Vec<_>) = self.exports_due.drain(..).partition(|(_, at)| *at <= upto_us);
        self.exports_due = later;
        for (cut, at_us) in due {
            let held = (0..self.nodes.len())
                .filter_map(|i| Some((i, self.nodes[i].vnode.as_ref()?.holdings_at(cut))))
                .collect();
            self.history.exports.push(crate::history::CutExport { cut, at_us, held });
        }
    }

    /// A cut declared successful to the operator: its snapshot's export is observed later.
    pub(crate) fn export_later(&mut self, cut: waymark_core::CutId) {
        self.exports_due.push((cut, self.now_us + EXPORT_AFTER_US));
    }

    /// `--failover`: the partitions that had a serving primary since the last event count as
    /// available for the time between. Reads state only: the run is the same with or without it.
    fn count_availability(&mut self, upto_us: u64) {
        if !(self.cfg.tree && self.cfg.failover) || upto_us <= self.availability_upto_us {
            return;
        }
        let partitions = self.placement.partitions();
        let served = (0..partitions)
            .filter(|p| {
                let p = waymark_core::PartitionId(*p);
                self.nodes.iter().any(|n| n.vnode.as_ref().is_some_and(|v| v.serves_primary_of(p)))
            })
            .count() as u64;
        let us = upto_us - self.availability_upto_us;
        self.tree_stats.availability.add(us, served, u64::from(partitions));
        self.availability_upto_us = upto_us;
    }

    /// The checkers judge the end state by the placement in force: after promotions, the one the
    /// newest copy of the metadata among the store vnodes records (the genesis one otherwise).
    fn follow_placement(&mut self) {
        let newest =
            self.nodes.iter().filter_map(|n| n.vnode.as_ref()).max_by_key(|v| v.tree().map(|t| t.metadata().version()));
        // The placement that copy records (a vnode may not route by it yet: `PlacementFollower`).
        let recorded =
            newest.and_then(|v| v.tree().and_then(|t| waymark_core::alter::cluster::placement(t.metadata())));
        if let Some(p) = recorded.or_else(|| newest.map(|v| v.placement().clone())) {
            self.placement = Arc::new(p);
        }
        self.tree_stats.promoted_partitions = self.epochs.promoted_partitions() as u64;
        let placement = self.placement.clone();
        for (node, n) in self.nodes.iter().enumerate() {
            let rejoined = crate::checkers::rejoined(&n.log);
            self.tree_stats.rejoined += rejoined.len() as u64;
            let copy = |p: &u32| placement.copies(waymark_core::PartitionId(*p)).contains(&self.nodes[node].cfg.id);
            self.tree_stats.rejoined_copies += rejoined.iter().filter(|p| copy(p)).count() as u64;
        }
        self.tree_stats.learners_at_end =
            (0..placement.partitions()).map(|p| placement.learners(waymark_core::PartitionId(p)).len() as u64).sum();
        for (host, at) in &self.host_downs {
            self.tree_stats.failover_windows_us.extend(self.epochs.windows_after(host, *at));
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Deliver { from, to, epoch, env } => self.deliver(from, to, epoch, env),
            Event::Timer { node, instance, timer } => {
                if self.nodes[node].is_up(instance) {
                    self.step(node, Input::Timer(timer));
                }
            }
            Event::SyncDone { node, instance, upto } => self.sync_done(node, instance, upto),
            Event::ToVnode { node, client, req, request } => self.arrive_at_vnode(node, client, req, request),
            Event::ToClient { client, req, response } => self.arrive_at_client(client, req, response),
            Event::ClientWake { client } => self.client_wake(client),
            Event::ClientTimeout { client, req } => self.client_timeout(client, req),
            Event::ClientResume { client } => self.client_resume(client),
            Event::CutTick => self.cut_tick(),
            Event::Fault(f) => crate::faults::apply(self, f),
            Event::ManagerTimer { m, instance, timer } if self.managers[m].is_up(instance) => {
                self.manager_step(m, Input::Timer(timer))
            }
            Event::ManagerSync { m, instance, upto } => self.manager_sync_done(m, instance, upto),
            Event::ManagerReadBack { m, instance, seq, bytes } if self.managers[m].is_up(instance) => {
                self.manager_step(m, Input::AlterPersisted { seq, bytes })
            }
            Event::ManagerTimer { .. } | Event::ManagerReadBack { .. } => {}
            Event::HostBack { tree_node } => self.host_back(tree_node),
            Event::AlterReadBack { node, instance, seq, bytes } => {
                if self.nodes[node].is_up(instance) {
                    self.alter_read_back(node, seq, bytes);
                }
            }
        }
    }

    /// Feeds one input to a vnode and carries out its outputs.
    pub fn step(&mut self, node: usize, input: Input) {
        let now = self.now_us;
        let Some(v) = self.nodes[node].vnode.as_mut() else { return };
        let before = v.config().placement.clone();
        let outputs = v.step(now, input);
        if !Arc::ptr_eq(&before, &v.config().placement) {
            self.epochs.note_change(v.id(), &before, v.placement(), now);
        }
        self.held_replies_us.extend(v.take_hold_durations_us());
        self.commit_stalls_us.extend(v.take_commit_stalls_us());
        if let Some(primary) = v.tree().map(|a| a.follows_primary_parent()) {
            self.followed.note(Slot::store(node).index(), primary, &mut self.tree_stats);
        }
        for out in outputs {
            self.carry_out(node, out);
        }
    }

    fn carry_out(&mut self, node: usize, out: Output) {
        match out {
            Output::Append(record) => {
                self.note_cut_window(&record);
                if matches!(record, Record::TxDecided { .. }) {
                    crate::faults::decided(self, node);
                }
                self.nodes[node].log.push(record);
                self.request_sync(node);
            }
            Output::Send(env) => self.send(Slot::store(node), env),
            Output::Reply { client, req, response } => {
                if let Response::Aborted { reason: waymark_core::AbortReason::SnapshotOrder { .. }, .. } = &response {
                    self.snapshot_order_aborts += 1;
                }
                let at = self.now_us + self.rng.gen_range(50..300);
                self.schedule(at, Event::ToClient { client: client.0, req, response });
            }
            Output::SetTimer { timer, at_us } => {
                let instance = self.nodes[node].instance;
                self.schedule(at_us.max(self.now_us), Event::Timer { node, instance, timer });
            }
            Output::StartSecondaryParent { id, of, metadata, term } => {
                self.start_secondary(id, &of, waymark_core::TreeImage { metadata, term })
            }
            Output::StopSecondaryParent { id } => self.stop_secondary(&id),
        }
    }

    pub(crate) fn send(&mut self, from: Slot, env: Envelope) {
        let to = self.index[&env.to];
        self.messages_sent += 1;
        self.cut_messages += matches!(env.body, Body::Cut(_)) as u64;
        if let Body::Alter(waymark_core::alter::AlterMsg::Alter { term, seq, .. }) = &env.body {
            if let Some(instance) = self.tree_node_instance(to) {
                let to = Incarnation { tree_node: to, instance };
                self.answers.forwarded(MetaVersion { term: *term, seq: *seq }, to);
            }
        }
        let extra_us = match &env.body {
            // Phase 1 of `versions` is its start: spread alike, so both meet the same windows.
            Body::Cut(CutMsg::Start { .. } | CutMsg::VersionsStart { .. }) => {
                self.rng.gen_range(0..self.cfg.cut_start_spread_us.max(1))
            }
            _ => 0,
        };
        let mishap = match self.cfg.faults && self.cfg.net_faults && !self.stopping {
            true => Mishap::draw(&mut self.mishap_rng),
            false => Mishap::None,
        };
        // A long delay is a fault like the others: it is over when every fault heals (at the end
        // of the workload), so that what the liveness floors judge after healing faces none.
        let held_us = match mishap {
            Mishap::LongDelay { us } => us.min(self.cfg.duration_us.saturating_sub(self.now_us)),
            _ => 0,
        };
        if self.cut_off(from, to) {
            self.messages_lost += 1;
            return;
        }
        match self.net.send(&mut self.rng, self.now_us + extra_us, from, to, held_us) {
            Some(f) => {
                match mishap {
                    Mishap::None => {}
                    Mishap::Duplicate { after_us } => {
                        self.faults.counts.duplicates += 1;
                        let copy = Event::Deliver { from, to, epoch: f.epoch, env: env.clone() };
                        self.schedule(f.at_us + after_us, copy);
                    }
                    Mishap::LongDelay { .. } => self.faults.counts.long_delays += 1,
                }
                self.schedule(f.at_us, Event::Deliver { from, to, epoch: f.epoch, env })
            }
            None => self.messages_lost += 1,
        }
    }

    fn deliver(&mut self, from: Slot, to: Slot, epoch: u64, env: Envelope) {
        if self.cut_off(from, to) {
            self.messages_lost += 1; // sent before the host was cut off
            return;
        }
        let current = self.net.is_current(from, to, epoch);
        match self.resident(to) {
            Resident::Manager(m) if current && self.managers[m].vnode.is_some() => {
                self.manager_step(m, Input::Message(env))
            }
            Resident::Manager(_) => self.deliver_to_host_agent(env),
            Resident::Store(i) if self.nodes[i].vnode.is_none() => self.deliver_to_host_agent(env),
            Resident::Store(_) if !current => self.messages_lost += 1,
            Resident::Store(i) => self.step(i, Input::Message(env)),
        }
    }

    /// Whether `from` and `to` run on different hosts, one of them isolated (`Fault::Isolate`).
    fn cut_off(&self, from: Slot, to: Slot) -> bool {
        if self.isolated.is_empty() {
            return false;
        }
        let (a, b) = (self.host_of(from), self.host_of(to));
        a != b && (self.isolated.contains_key(a) || self.isolated.contains_key(b))
    }

    fn host_of(&self, slot: Slot) -> &str {
        match self.resident(slot) {
            Resident::Store(i) => &self.nodes[i].cfg.id.host,
            Resident::Manager(m) => &self.managers[m].cfg.id.host,
        }
    }

    /// How many vnodes the world holds, store vnodes and managers: its slots.
    pub fn slots(&self) -> usize {
        self.nodes.len() + self.managers.len()
    }

    /// The index in `nodes` of store vnode `id`.
    pub fn store_index(&self, id: &VnodeId) -> usize {
        match self.resident(self.index[id]) {
            Resident::Store(i) => i,
            Resident::Manager(_) => panic!("{id} is a manager, not a store vnode"),
        }
    }

    /// What lives at `slot`.
    pub fn resident(&self, slot: Slot) -> Resident {
        slot.resident(self.nodes.len())
    }

    /// Group commit: one sync covers every record appended before it started.
    fn request_sync(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if n.sync_pending || n.vnode.is_none() {
            return;
        }
        n.sync_pending = true;
        let (instance, upto) = (n.instance, n.log.len());
        let at = self.now_us + self.rng.gen_range(200..SYNC_MAX_US);
        self.schedule(at, Event::SyncDone { node, instance, upto });
    }

    fn sync_done(&mut self, node: usize, instance: u32, upto: usize) {
        let n = &mut self.nodes[node];
        if !n.is_up(instance) {
            return;
        }
        n.sync_pending = false;
        let before = n.durable;
        n.durable = n.durable.max(upto);
        let more = n.log.len() > n.durable;
        self.read_back(node, before, upto);
        self.step(node, Input::WalDurable(Lsn(upto as u64)));
        self.maybe_checkpoint(node);
        if more {
            self.request_sync(node);
        }
    }

    /// Takes a checkpoint when the whole log is durable and has grown enough since the last one,
    /// and checks it against the replay of the log it stands for (`checkers::checkpoints`).
    /// Draws nothing from the RNG: runs with and without it follow the same events.
    fn maybe_checkpoint(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        let last = n.checkpoint.as_ref().map_or(0, |c| c.log_len);
        let Some(v) = n.vnode.as_ref() else { return };
        if n.durable < n.log.len() || n.log.len() < last + CHECKPOINT_EVERY_RECORDS {
            return;
        }
        let image = v.image();
        let genesis = n.cfg.tree.as_ref().map(|_| &n.cfg.genesis);
        let replayed = VnodeImage::replay(genesis, &n.log);
        if let Some(part) = image.first_difference(&replayed) {
            let at = format!("{} at {}us after {} records", n.cfg.id, self.now_us, n.log.len());
            self.checkpoint_mismatches.push(format!("{at}: its {part} differs from the log's replay"));
        }
        n.checkpoint = Some(Checkpoint { image, log_len: n.log.len() });
    }

    fn arrive_at_vnode(&mut self, node: Slot, client: u64, req: u64, request: Request) {
        let node = match self.resident(node) {
            Resident::Manager(m) => return self.arrive_at_manager(m, client, req, request),
            Resident::Store(i) => i,
        };
        if self.nodes[node].vnode.is_none() {
            let at = self.now_us + 100;
            let response = Response::Unavailable { why: "connection refused" };
            return self.schedule(at, Event::ToClient { client, req, response });
        }
        self.step(node, Input::Client { client: ClientId(client), req, request });
    }

    // ---- the operator, who takes cuts ----

    fn coordinator(&self) -> usize {
        0
    }

    /// Whether cuts run as the tree's alterations (the managers' operator). `versions` runs on the
    /// cut coordinator even when the tree runs (seed 002's own shape: one process gathers every
    /// vnode's versions and hands the map back), as a node of the server runs it.
    pub(crate) fn cuts_on_tree(&self) -> bool {
        self.cfg.tree && self.cfg.strategy != waymark_core::CutStrategy::Versions
    }

    /// Cuts begun since healing.
    fn cuts_begun_after_heal(&self) -> usize {
        let healed = self.healed_us.unwrap_or(u64::MAX);
        self.history.cut_windows.values().filter(|w| w.begun_us >= healed).count()
    }

    fn cut_tick(&mut self) {
        let next = match self.healed_us {
            None => self.now_us + self.rng.gen_range(20_000..120_000),
            // A tick left from the workload, or every cut after healing asked for.
            Some(healed) if self.now_us < healed + AFTER_HEAL_GRACE_US => return,
            Some(_) if self.after_heal_asks >= AFTER_HEAL_CUTS && !self.cfg.failover => return,
            Some(_) if self.cuts_begun_after_heal() >= AFTER_HEAL_CUTS as usize => return,
            Some(_) if self.after_heal_asks >= AFTER_HEAL_ASKS_MAX => return,
            Some(_) => {
                self.after_heal_asks += 1;
                self.now_us + AFTER_HEAL_INTERVAL_US
            }
        };
        if self.cuts_on_tree() {
            self.tree_cut_tick();
            return self.schedule(next, Event::CutTick);
        }
        if self.cut_request.is_none() {
            self.operator_requests += 1;
            let req = self.operator_requests;
            self.cut_request = Some(CutRequest { req, begun_us: self.now_us });
            let node = Slot::store(self.coordinator());
            let at = self.now_us + 100;
            self.schedule(at, Event::ToVnode { node, client: OPERATOR, req, request: Request::Cut });
        }
        self.schedule(next, Event::CutTick);
    }

    pub(crate) fn operator_reply(&mut self, req: u64, response: Option<Response>) {
        let Some(CutRequest { begun_us, .. }) = self.cut_request.filter(|c| c.req == req) else { return };
        self.cut_request = None;
        if self.cuts_on_tree() {
            return self.tree_operator_reply(begun_us, response);
        }
        if let Some(Response::CutDone { cut, ok, .. }) = response {
            self.history.cuts.push(CutRun { cut, ok, begun_us, ended_us: self.now_us });
            if ok {
                self.export_later(cut);
            }
        }
    }

    /// The coordinator's `CutBegin` and `CutEnd{ok}` bound the cut in time (`checkers::cut_bounds`).
    fn note_cut_window(&mut self, record: &Record) {
        let now = self.now_us;
        match record {
            // A `CutBegin` lost in a crash is written again with the same id: the later one counts.
            Record::CutBegin { cut } => {
                self.history.cut_windows.insert(*cut, CutWindow { begun_us: now, declared_us: None });
            }
            Record::CutEnd { cut, ok: true } => {
                if let Some(w) = self.history.cut_windows.get_mut(cut) {
                    w.declared_us.get_or_insert(now);
                }
            }
            _ => {}
        }
    }

    /// The coordinator crashed: the operator's connection to it breaks, and with it the request
    /// in flight (the restarted coordinator ends that cut as failed). The operator asks again at
    /// its next tick — before this, one crash stopped every later cut of the seed.
    pub(crate) fn coordinator_crashed(&mut self, node: usize) {
        if node != self.coordinator() || self.cuts_on_tree() {
            return;
        }
        if let Some(CutRequest { req, .. }) = self.cut_request {
            let response = Response::Unavailable { why: "connection reset" };
            self.schedule(self.now_us + 100, Event::ToClient { client: OPERATOR, req, response });
        }
    }

    // ---- the end ----

    /// Clients stop, faults heal, crashed vnodes restart: what follows must settle everything.
    fn stop_and_heal(&mut self) {
        self.stopping = true;
        crate::faults::heal_all(self);
        self.healed_us = Some(self.now_us);
        if self.cfg.cuts {
            self.schedule(self.now_us + AFTER_HEAL_GRACE_US, Event::CutTick);
        }
        for m in 0..self.managers.len() {
            if self.managers[m].cfg.secondary_of.is_none() {
                self.restart_manager(m);
            }
        }
        for c in 0..self.clients.len() {
            if let Some(flight) = &self.clients[c].in_flight {
                let (req, at) = (flight.first_req, flight.deadline_us.max(self.now_us));
                self.schedule(at, Event::ClientTimeout { client: c, req });
            }
        }
    }

    /// The cuts the coordinator's log declares successful (its `CutEnd{ok: true}` records).
    pub fn declared_cuts(&self) -> Vec<DeclaredCut> {
        if self.cuts_on_tree() {
            return self.catalog();
        }
        let log = &self.nodes[self.coordinator()].log[..];
        log.iter()
            .filter_map(|r| match r {
                Record::CutEnd { cut, ok } => Some(DeclaredCut { cut: *cut, ok: *ok }),
                _ => None,
            })
            .collect()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    pub fn restart(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if n.vnode.is_some() {
            return;
        }
        n.durable = n.log.len();
        n.sync_pending = false;
        n.vnode = Some(match &n.checkpoint {
            // A crash keeps every durable record, and a checkpoint covers only durable ones.
            Some(c) => Vnode::recover_from(n.cfg.clone(), c.image.clone(), &n.log[c.log_len..]),
            None => Vnode::recover(n.cfg.clone(), &n.log),
        });
        self.step(node, Input::Restarted);
    }
}

impl Node {
    fn fresh(cfg: VnodeConfig) -> Node {
        let vnode = Some(Vnode::new(cfg.clone()));
        Node {
            vnode,
            cfg,
            log: vec![],
            durable: 0,
            instance: 0,
            sync_pending: false,
            corrupt_next: false,
            checkpoint: None,
        }
    }

    fn is_up(&self, instance: u32) -> bool {
        self.vnode.is_some() && self.instance == instance
    }

    /// Loses the vnode's memory and whatever of its log was not durable — except that some
    /// unsynced records may have reached the disk anyway (a prefix of them), and the one after
    /// them may be torn. Returns whether a record was torn or lost.
    pub fn crash(&mut self, rng: &mut ChaCha8Rng) -> bool {
        self.vnode = None;
        self.instance += 1;
        self.sync_pending = false;
        lose_unsynced(&mut self.log, self.durable, rng)
    }
}

/// A crash's effect on a log: the durable prefix survives, and of the unsynced tail a random
/// prefix reached the disk anyway. Returns whether a record was lost. Store vnodes and managers
/// share it.
pub(crate) fn lose_unsynced(log: &mut Vec<Record>, durable: usize, rng: &mut ChaCha8Rng) -> bool {
    let unsynced = log.len() - durable;
    let kept = rng.gen_range(0..=unsynced);
    log.truncate(durable + kept);
    kept < unsynced
}

fn vnode_config(cfg: &SimConfig, id: &VnodeId, ids: &[VnodeId], placement: &Arc<Placement>) -> VnodeConfig {
    let mut v = VnodeConfig::new(id.clone(), placement.clone(), ids[0].clone());
    v.breaks = cfg.breaks;
    v.strategy = cfg.strategy;
    if cfg.strategy == waymark_core::CutStrategy::Versions {
        v.versions_unregistered = cfg.versions_unregistered;
    }
    v.real_time_safety = cfg.real_time_safety;
    v
}
