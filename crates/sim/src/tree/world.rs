//! The tree world: `AlterNode`s for every vnode of the tree, a network with latency and partitions,
//! a disk per vnode (what survives a crash), and the operator's proposals and cut processes.

use super::build::build;
use super::followed::FollowedParents;
use super::genesis::genesis;
use super::host::TreeHost;
use super::stats::TreeStats;
use super::timing::{timing, HOP_US};
use super::vnode::TreeVnode;
pub use crate::checkers::tree_alterations::ProposalOutcome;
use crate::checkers::tree_applied::{self, AppliedRecord};
use crate::checkers::{tree_alterations, tree_convergence, tree_parents, tree_states, Violation};
use crate::hash::Fnv;
use crate::queue::EventQueue;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use waymark_core::alter::cluster::Setting;
use waymark_core::alter::{
    AlterConfig, AlterInput, AlterMsg, AlterNode, AlterOutput, AlterRecord, AlterSeq, AlterTimer, MetaVersion,
    Metadata, ProposalId,
};
use waymark_core::cut::operator::Phase;
use waymark_core::{CutId, TreeImage, VnodeId};

#[derive(Clone, Debug)]
pub struct TreeConfig {
    pub seed: u64,
    pub leaves: usize,
    pub fanout: usize,
    pub faults: bool,
    /// Plain metadata changes proposed by random vnodes.
    pub proposals: usize,
    /// Cut processes (START, STARTED, FINISH, END) run by the operator.
    pub cut_processes: usize,
    pub duration_us: u64,
    /// Heartbeats off (scale runs): no failure detection, fewer messages to count.
    pub heartbeats: bool,
    pub breaks: waymark_core::Breaks,
    /// Print every event (without metadata bodies) to stderr.
    pub trace: bool,
    /// Proposals and cut processes start after this (the scale run lets the start-up settle).
    pub first_proposal_us: u64,
    /// Events placed by hand (scenarios), on top of the random plan.
    pub scenario: Vec<(u64, Scripted)>,
}

/// A scenario's event, naming vnodes by id.
#[derive(Clone, Debug)]
pub enum Scripted {
    Crash {
        vnode: VnodeId,
        down_us: u64,
    },
    /// Every vnode of the host crashes at once (secondary parents it runs stop with it).
    CrashHost {
        host: String,
        down_us: u64,
    },
    /// Cut these vnodes off from all others until `heal_us` later.
    Split {
        side: Vec<VnodeId>,
        heal_us: u64,
    },
    /// The next alteration this vnode reads back is damaged.
    Corrupt {
        vnode: VnodeId,
    },
    Propose {
        vnode: VnodeId,
        record: AlterRecord,
    },
}

impl TreeConfig {
    pub fn new(seed: u64) -> Self {
        TreeConfig {
            seed,
            leaves: 24,
            fanout: 4,
            faults: true,
            proposals: 12,
            cut_processes: 3,
            duration_us: 3_000_000,
            heartbeats: true,
            breaks: Default::default(),
            trace: false,
            first_proposal_us: 10_000,
            scenario: vec![],
        }
    }
}

#[derive(Clone, Debug, Hash)]
enum Ev {
    Deliver {
        from: usize,
        to: usize,
        msg: AlterMsg,
    },
    Timer {
        node: usize,
        instance: u32,
        timer: AlterTimer,
    },
    Persisted {
        node: usize,
        instance: u32,
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    Applied {
        node: usize,
        instance: u32,
        seq: AlterSeq,
    },
    Propose {
        node: usize,
        record: AlterRecord,
        cut: Option<CutStep>,
    },
    Crash {
        node: usize,
        down_us: u64,
    },
    CrashHost {
        host: String,
        down_us: u64,
    },
    /// The crashed vnode's host is back: its agent asks the vnode's parent what to start.
    HostBack {
        node: usize,
    },
    Split {
        side: Vec<usize>,
        heal_us: u64,
        one_way: bool,
    },
    Heal,
    Corrupt {
        node: usize,
    },
}

#[derive(Clone, Debug, Default)]
pub struct TreeReport {
    pub seed: u64,
    pub trace_hash: u64,
    pub messages: u64,
    /// Counters shared with the bank world's tree mode.
    pub tree: TreeStats,
    pub splits: u64,
    /// Of the splits, how many blocked one direction only (an asymmetric partition).
    pub one_way_splits: u64,
    /// Whole hosts crashed at once (every vnode they run).
    pub host_crashes: u64,
    /// Messages delivered twice, and messages held back far longer than a hop.
    pub duplicates: u64,
    pub long_delays: u64,
    /// Root restarts (the root has no parent: its host starts it from its own log).
    pub root_restarts: u64,
    pub cuts_ok: u64,
    pub cuts_failed: u64,
    /// Virtual time from the first START proposal to the END outcome, per successful cut.
    pub cut_latencies_us: Vec<u64>,
    /// Messages sent (heartbeats and liveness probes aside) from the first START proposal to the
    /// END outcome, per successful cut; exact when nothing else runs meanwhile (the scale run).
    pub cut_messages: Vec<u64>,
    /// Every proposal and how it ended.
    pub outcomes: Vec<ProposalOutcome>,
    /// The primary root's metadata at the end.
    pub root_metadata: Metadata,
    pub violations: Vec<Violation>,
}

pub struct TreeWorld {
    pub cfg: TreeConfig,
    rng: ChaCha8Rng,
    now_us: u64,
    events: EventQueue<Ev>,
    nodes: Vec<TreeVnode>,
    /// Which parent each vnode followed at its last step (failovers, switch-backs).
    followed: FollowedParents,
    index: BTreeMap<VnodeId, usize>,
    /// Directions a split cuts: what `from` sends to `to` is lost.
    blocked: BTreeSet<Link>,
    first_manager: usize,
    root: usize,
    hasher: Fnv,
    pub report: TreeReport,
    /// Proposals made and how they ended: record, initiator, outcome.
    proposals: BTreeMap<ProposalId, ProposalOutcome>,
    /// The operator's cut phases in flight, by proposal, with the vnode that proposed each.
    cut_runs: BTreeMap<ProposalId, CutRun>,
    /// When each proposal was answered.
    /// Messages sent before each cut process began.
    cut_messages_before: BTreeMap<CutId, u64>,
    stopping: bool,
    /// What a root ordered at each `(term, seq)`, and what every vnode applied.
    ordered: BTreeMap<MetaVersion, AlterRecord>,
    applied: Vec<AppliedRecord>,
}

/// A direction between two tree vnodes, by index in `TreeWorld::nodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Link {
    from: usize,
    to: usize,
}

/// A phase of a cut process the tree world's operator proposed.
#[derive(Clone, Copy, Debug, Hash)]
struct CutStep {
    cut: CutId,
    phase: Phase,
    started_us: u64,
}

/// A cut phase in flight: the vnode that proposed it (and proposes the next one) and the step.
#[derive(Clone, Copy, Debug)]
struct CutRun {
    node: usize,
    step: CutStep,
}

impl TreeWorld {
    pub fn new(cfg: TreeConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let shape = build(cfg.leaves, cfg.fanout, &timing(0, cfg.heartbeats, cfg.breaks));
        let index: BTreeMap<VnodeId, usize> =
            shape.configs.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect();
        let root = shape.configs.len() - 1;
        let followed = FollowedParents::new(shape.configs.len());
        let nodes = shape.configs.into_iter().map(TreeVnode::new).collect();
        let report = TreeReport { seed: cfg.seed, ..TreeReport::default() };
        TreeWorld {
            cfg,
            rng,
            now_us: 0,
            events: EventQueue::default(),
            nodes,
            followed,
            index,
            blocked: BTreeSet::new(),
            first_manager: shape.first_manager,
            root,
            hasher: Fnv::default(),
            report,
            proposals: BTreeMap::new(),
            cut_runs: BTreeMap::new(),
            cut_messages_before: BTreeMap::new(),
            stopping: false,
            ordered: BTreeMap::new(),
            applied: vec![],
        }
    }

    fn schedule(&mut self, at_us: u64, ev: Ev) {
        self.events.push(at_us.max(self.now_us), ev);
    }

    /// The primary root: the last vnode built (secondary parents are appended after it).
    fn root(&self) -> usize {
        self.root
    }

    pub fn run(mut self) -> TreeReport {
        let genesis = self.genesis();
        for n in 0..self.nodes.len() {
            self.nodes[n].disk = genesis.clone();
            self.restart(n);
            // What the vnode keeps (a store vnode only its leaf view) is what its log holds.
            self.nodes[n].disk = self.nodes[n].alter.as_ref().map(|a| a.metadata().clone()).unwrap_or_default();
        }
        self.plan();
        let end = self.cfg.duration_us;
        while let Some((key, ev)) = self.events.pop() {
            let at = key.at_us;
            if !self.stopping && at >= end {
                self.events.put_back(key, ev);
                self.now_us = end;
                self.heal_all();
                continue;
            }
            if at > end * 2 {
                break;
            }
            self.now_us = at;
            (at, &ev).hash(&mut self.hasher);
            self.handle(ev);
        }
        self.report.trace_hash = self.hasher.finish();
        self.report.tree.relayed +=
            self.nodes.iter().filter_map(|v| v.alter.as_ref()).map(|a| a.relayed()).sum::<u64>();
        self.check();
        self.report
    }

    fn plan(&mut self) {
        let n = self.nodes.len();
        let window = self.cfg.duration_us / 2;
        for i in 0..self.cfg.proposals {
            let (at, node) = (self.rng.gen_range(self.cfg.first_proposal_us..window), self.rng.gen_range(0..n));
            let record = AlterRecord::set(format!("config/k{i}"), format!("v{i}"));
            self.schedule(at, Ev::Propose { node, record, cut: None });
        }
        for c in 1..=self.cfg.cut_processes as u64 {
            let at = self.rng.gen_range(self.cfg.first_proposal_us..window);
            self.start_cut(at, c);
        }
        if self.cfg.faults {
            self.plan_faults(window);
        }
        for (at, s) in self.cfg.scenario.clone() {
            let ev = match s {
                Scripted::Crash { vnode, down_us } => Ev::Crash { node: self.index[&vnode], down_us },
                Scripted::CrashHost { host, down_us } => Ev::CrashHost { host, down_us },
                Scripted::Split { side, heal_us } => {
                    Ev::Split { side: side.iter().map(|v| self.index[v]).collect(), heal_us, one_way: false }
                }
                Scripted::Corrupt { vnode } => Ev::Corrupt { node: self.index[&vnode] },
                Scripted::Propose { vnode, record } => Ev::Propose { node: self.index[&vnode], record, cut: None },
            };
            self.schedule(at, ev);
        }
    }

    /// The vnode ids of the tree as built, leaves first and the root last.
    pub fn ids(&self) -> Vec<VnodeId> {
        self.nodes.iter().map(|v| v.cfg.id.clone()).collect()
    }

    /// The operator runs cut `c` from the root vnode: four alterations, each after the last.
    fn start_cut(&mut self, at: u64, c: u64) {
        let step = CutStep { cut: CutId(c), phase: Phase::Start, started_us: at };
        self.schedule(at, Ev::Propose { node: self.root(), record: Phase::Start.record(step.cut), cut: Some(step) });
    }

    fn plan_faults(&mut self, window: u64) {
        let managers: Vec<usize> = (self.first_manager..=self.root()).collect();
        if !managers.is_empty() {
            for _ in 0..self.rng.gen_range(1..=2) {
                let node = managers[self.rng.gen_range(0..managers.len())];
                let (at, down_us) = (self.rng.gen_range(10_000..window), self.rng.gen_range(50_000..400_000));
                self.schedule(at, Ev::Crash { node, down_us });
            }
        }
        if self.rng.gen_bool(0.7) {
            let n = self.nodes.len();
            let side: Vec<usize> = (0..n).filter(|_| self.rng.gen_bool(0.3)).collect();
            let (at, heal_us) = (self.rng.gen_range(10_000..window), self.rng.gen_range(20_000..300_000));
            let one_way = self.rng.gen_bool(0.5);
            self.schedule(at, Ev::Split { side, heal_us, one_way });
        }
        if self.rng.gen_bool(0.3) {
            let host = self.nodes[self.rng.gen_range(0..self.nodes.len())].cfg.id.host.clone();
            let (at, down_us) = (self.rng.gen_range(10_000..window), self.rng.gen_range(50_000..400_000));
            self.schedule(at, Ev::CrashHost { host, down_us });
        }
        if self.rng.gen_bool(0.5) {
            let node = self.rng.gen_range(0..self.nodes.len());
            let at = self.rng.gen_range(10_000..window);
            self.schedule(at, Ev::Corrupt { node });
        }
    }

    fn handle(&mut self, ev: Ev) {
        if self.cfg.trace {
            self.print(&ev);
        }
        match ev {
            Ev::Deliver { to, msg: AlterMsg::StartVnodes { vnodes }, .. } if self.nodes[to].alter.is_none() => {
                self.boot_by_parent(&vnodes)
            }
            Ev::Deliver { from, to, msg } => {
                let from_id = self.nodes[from].cfg.id.clone();
                self.step(to, AlterInput::Message { from: from_id, msg });
            }
            Ev::HostBack { node } => self.host_back(node),
            Ev::Timer { node, instance, timer } if self.nodes[node].instance == instance => {
                self.step(node, AlterInput::Timer(timer))
            }
            Ev::Persisted { node, instance, seq, bytes } if self.nodes[node].instance == instance => {
                self.step(node, AlterInput::Persisted { seq, bytes })
            }
            Ev::Applied { node, instance, seq } if self.nodes[node].instance == instance => {
                self.step(node, AlterInput::Applied { seq, ok: true })
            }
            Ev::Timer { .. } | Ev::Persisted { .. } | Ev::Applied { .. } => {}
            Ev::Propose { node, record, cut } => self.propose(node, record, cut),
            Ev::Crash { node, down_us } => self.crash(node, down_us),
            Ev::CrashHost { host, down_us } => self.crash_host(&host, down_us),
            Ev::Split { side, heal_us, one_way } => self.split(&side, heal_us, one_way),
            Ev::Heal => self.blocked.clear(),
            Ev::Corrupt { node } => {
                self.report.tree.md5_corruptions += 1;
                self.nodes[node].corrupt_next = true;
            }
        }
    }

    fn print(&self, ev: &Ev) {
        let name = |i: &usize| self.nodes.get(*i).map(|v| v.cfg.id.to_string()).unwrap_or_default();
        match ev {
            Ev::Deliver { from, to, msg } => {
                let mut text = format!("{msg:?}");
                text.truncate(160);
                eprintln!("{:>9} {} -> {}: {text}", self.now_us, name(from), name(to));
            }
            other => eprintln!("{:>9} {other:?}", self.now_us),
        }
    }

    fn step(&mut self, node: usize, input: AlterInput) {
        let now = self.now_us;
        let Some(a) = self.nodes[node].alter.as_mut() else { return };
        let outputs = a.step(now, input);
        let primary = a.follows_primary_parent();
        self.followed.note(node, primary, &mut self.report.tree);
        for o in outputs {
            self.nodes[node].keep(&o);
            self.carry_out(node, o);
        }
    }

    fn carry_out(&mut self, node: usize, o: AlterOutput) {
        let instance = self.nodes[node].instance;
        match o {
            AlterOutput::Send { to, msg } => self.send(node, &to, msg),
            AlterOutput::Persist { seq, bytes } => {
                let bytes = self.nodes[node].written(bytes);
                let at = self.now_us + self.rng.gen_range(200..2_000);
                self.schedule(at, Ev::Persisted { node, instance, seq, bytes });
            }
            AlterOutput::PersistApplied { .. } | AlterOutput::PersistClone { .. } | AlterOutput::PersistTerm { .. } => {
            } // kept in `step`
            AlterOutput::Apply { term, seq, record } => {
                let cfg = &self.nodes[node].cfg;
                if cfg.parents.is_empty() {
                    self.ordered.insert(MetaVersion { term, seq }, record.clone());
                    if record.key == "root" {
                        self.report.tree.root_terms += 1;
                        self.report.tree.secondary_root_terms += cfg.secondary_of.is_some() as u64;
                    }
                }
                let vnode = self.nodes[node].cfg.id.clone();
                self.applied.push(AppliedRecord { vnode, at: MetaVersion { term, seq }, record: record.clone() });
                // A store vnode's local cut finishes after a while; everything else acts at once.
                let leaf = node < self.first_manager;
                let finish = Phase::parse(&record.value) == Some(Phase::Finish);
                let work = if leaf && finish { self.rng.gen_range(100..5_000) } else { 10 };
                self.schedule(self.now_us + work, Ev::Applied { node, instance, seq });
            }
            AlterOutput::Done { id, ok, attempts, .. } => self.on_done(node, id, ok, attempts),
            AlterOutput::StartSecondaryParent { id, of, metadata, term } => {
                self.start_secondary(id, &of, TreeImage { metadata, term })
            }
            AlterOutput::StopSecondaryParent { id } => self.stop_secondary(&id),
            AlterOutput::SetTimer { timer, at_us } => self.schedule(at_us, Ev::Timer { node, instance, timer }),
        }
    }

    fn send(&mut self, from: usize, to: &VnodeId, msg: AlterMsg) {
        let to = self.index[to];
        if !matches!(msg, AlterMsg::Heartbeat { .. } | AlterMsg::Alive { .. }) {
            self.report.messages += 1;
        }
        if self.blocked.contains(&Link { from, to }) {
            return;
        }
        let mut at = self.now_us + self.rng.gen_range(HOP_US / 10..HOP_US);
        if self.cfg.faults && !self.stopping {
            // The bank world's network mishaps (`world.rs`), at the same rates.
            if self.rng.gen_ratio(1, 2000) {
                at += self.rng.gen_range(50_000..300_000);
                self.report.long_delays += 1;
            }
            if self.rng.gen_ratio(1, 500) {
                let again = at + self.rng.gen_range(0..20_000);
                self.schedule(again, Ev::Deliver { from, to, msg: msg.clone() });
                self.report.duplicates += 1;
            }
        }
        self.schedule(at, Ev::Deliver { from, to, msg });
    }

    fn on_done(&mut self, _node: usize, id: ProposalId, ok: bool, attempts: u32) {
        if attempts > 1 {
            self.report.tree.retried += 1;
        }
        if ok {
            self.report.tree.alterations_ok += 1;
        } else {
            self.report.tree.alterations_failed += 1;
        }
        if let Some(p) = self.proposals.get_mut(&id) {
            (p.ok, p.answered_us) = (Some(ok), self.now_us);
        }
        self.advance_cut(&id, ok);
    }

    fn advance_cut(&mut self, id: &ProposalId, ok: bool) {
        let Some(CutRun { node, step }) = self.cut_runs.remove(id) else { return };
        match (ok, step.phase) {
            // An `END:failed` answered ok ends a failed cut (before, it was counted a success).
            (true, Phase::End { ok: true }) => {
                self.report.cuts_ok += 1;
                self.report.cut_latencies_us.push(self.now_us - step.started_us);
                let before = self.cut_messages_before.get(&step.cut).copied().unwrap_or(0);
                self.report.cut_messages.push(self.report.messages - before);
            }
            (_, Phase::End { .. }) => self.report.cuts_failed += 1,
            _ => {
                // A failed phase ends the cut as failed; otherwise go on to the next phase.
                let phase = step.phase.after(ok);
                let next = CutStep { phase, ..step };
                self.propose(node, phase.record(step.cut), Some(next));
            }
        }
    }

    /// Every proposal gets a number unique in the whole run, so restarts never reuse one.
    fn propose(&mut self, node: usize, record: AlterRecord, cut: Option<CutStep>) {
        let n = self.proposals.len() as u64;
        let id = ProposalId { initiator: self.nodes[node].cfg.id.clone(), n };
        self.proposals.insert(id.clone(), ProposalOutcome { record: record.clone(), ok: None, answered_us: 0 });
        if let Some(step) = cut {
            self.cut_messages_before.entry(step.cut).or_insert(self.report.messages);
            self.cut_runs.insert(id, CutRun { node, step });
        }
        if self.nodes[node].alter.is_none() {
            // The initiator is down: the proposal is lost with it, and reported failed.
            let id = ProposalId { initiator: self.nodes[node].cfg.id.clone(), n };
            return self.on_done(node, id, false, 1);
        }
        self.step(node, AlterInput::Propose { n, record });
    }

    /// A whole host goes down: its configured vnodes crash (and come back by boot loading), the
    /// secondary parents it runs stop.
    fn crash_host(&mut self, host: &str, down_us: u64) {
        self.report.host_crashes += 1;
        let on_host: Vec<usize> = (0..self.nodes.len()).filter(|n| self.nodes[*n].cfg.id.host == host).collect();
        for node in on_host {
            match self.nodes[node].cfg.secondary_of {
                Some(_) => self.stop_secondary(&self.nodes[node].cfg.id.clone()),
                None => self.crash(node, down_us),
            }
        }
    }

    fn crash(&mut self, node: usize, down_us: u64) {
        if self.stop(node) {
            // An initiator's proposals die with it: nobody is left to be answered.
            let me = self.nodes[node].cfg.id.clone();
            for (id, outcome) in self.proposals.iter_mut() {
                if id.initiator == me && outcome.ok.is_none() {
                    outcome.ok = Some(false);
                }
            }
            self.cut_runs.retain(|id, _| id.initiator != me);
            self.report.tree.manager_crashes += 1;
            self.schedule(self.now_us + down_us, Ev::HostBack { node });
        }
    }

    fn restart(&mut self, node: usize) {
        if let Some(started) = self.nodes[node].start() {
            self.step(node, started);
        }
    }

    /// Stops the vnode, keeping what it relayed; whether it ran.
    fn stop(&mut self, node: usize) -> bool {
        let Some(a) = self.nodes[node].stop() else { return false };
        self.report.tree.relayed += a.relayed();
        true
    }

    /// The genesis: the tree's vnodes and its fan-out, no placement (no data here).
    fn genesis(&self) -> Metadata {
        let fanout = self.cfg.fanout.to_string();
        genesis(&[Setting::new("fanout", &fanout)], self.nodes.iter().map(|v| &v.cfg), None)
    }

    /// Cuts `side` off from the rest; `one_way`: only what `side` sends is lost (it still hears).
    fn split(&mut self, side: &[usize], heal_us: u64, one_way: bool) {
        let n = self.nodes.len();
        for &a in side {
            for b in (0..n).filter(|b| !side.contains(b)) {
                self.blocked.insert(Link { from: a, to: b });
                if !one_way {
                    self.blocked.insert(Link { from: b, to: a });
                }
            }
        }
        self.report.splits += 1;
        self.report.one_way_splits += one_way as u64;
        self.schedule(self.now_us + heal_us, Ev::Heal);
    }

    fn heal_all(&mut self) {
        self.stopping = true;
        self.blocked.clear();
        for node in 0..self.nodes.len() {
            if self.nodes[node].cfg.secondary_of.is_none() {
                self.restart(node);
            }
        }
    }
}

/// The tree world's vnodes live at their index in `TreeWorld::nodes`.
impl TreeHost for TreeWorld {
    type At = usize;

    fn tree_stats(&mut self) -> &mut TreeStats {
        &mut self.report.tree
    }

    fn tree_stopping(&self) -> bool {
        self.stopping
    }

    fn tree_vnode(&self, id: &VnodeId) -> Option<usize> {
        self.index.get(id).copied()
    }

    fn tree_config(&self, node: usize) -> &AlterConfig {
        &self.nodes[node].cfg
    }

    fn tree_running(&self, node: usize) -> bool {
        self.nodes[node].alter.is_some()
    }

    fn boot_tree_vnode(&mut self, node: usize) {
        self.restart(node);
    }

    fn boot_root(&mut self, root: usize) {
        self.report.root_restarts += 1;
        self.restart(root);
    }

    fn stop_secondary_at(&mut self, node: usize) -> bool {
        self.stop(node)
    }

    fn add_secondary(&mut self, cfg: AlterConfig) -> usize {
        self.index.insert(cfg.id.clone(), self.nodes.len());
        self.nodes.push(TreeVnode::new(cfg));
        self.followed.add();
        self.nodes.len() - 1
    }

    fn start_secondary_at(&mut self, node: usize, cfg: AlterConfig, image: TreeImage) {
        let v = &mut self.nodes[node];
        (v.cfg, v.disk, v.disk_term) = (cfg, image.metadata, image.term);
        self.restart(node);
    }

    fn send_alter(&mut self, from: usize, to: &VnodeId, msg: AlterMsg) {
        self.send(from, to, msg);
    }

    fn host_back_later(&mut self, node: usize, after_us: u64) {
        self.schedule(self.now_us + after_us, Ev::HostBack { node });
    }
}

impl TreeWorld {
    fn check(&mut self) {
        let live: Vec<&AlterNode> =
            self.nodes.iter().filter(|v| v.cfg.secondary_of.is_none()).filter_map(|v| v.alter.as_ref()).collect();
        let metadata: Vec<(VnodeId, Metadata)> = live.iter().map(|a| (a.id().clone(), a.metadata().clone())).collect();
        let mut v = tree_convergence::check(&metadata);
        v.extend(tree_alterations::check(&self.proposals, &metadata));
        v.extend(tree_parents::check(&live));
        v.extend(tree_applied::check(&self.ordered, &self.applied));
        v.extend(tree_states::check(&metadata, None));
        let primaries = self.nodes.iter().filter(|v| v.cfg.secondary_of.is_none()).count();
        if live.len() != primaries {
            v.push(
                tree_convergence::CHECKER.violation(format!("{} vnodes still down at the end", primaries - live.len())),
            );
        }
        let secondaries: Vec<VnodeId> = self
            .nodes
            .iter()
            .filter(|v| v.cfg.secondary_of.is_some() && v.alter.is_some())
            .map(|s| s.cfg.id.clone())
            .collect();
        v.extend(tree_parents::secondaries_given_up(&secondaries));
        self.report.violations = v;
        self.report.outcomes = self.proposals.values().cloned().collect();
        let root = self.root();
        self.report.root_metadata = self.nodes[root].alter.as_ref().map(|a| a.metadata().clone()).unwrap_or_default();
    }
}
