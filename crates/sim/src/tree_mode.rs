//! The bank/append world with the cut process on the cluster tree (`--tree`): manager vnodes over
//! the store vnodes, alterations for START → STARTED → FINISH → END, manager crashes and md5
//! corruption among the faults. The operator proposes each phase at the root and requires every
//! store vnode to have applied START, STARTED and FINISH.

use crate::history::{CutRun, CutWindow};
use crate::tree::build::{build_over, Timing};
use crate::tree::vnode::{corrupt, TreeVnode};
use crate::world::{Event, World};
use rand::Rng;
use waymark_core::alter::cluster::{self, VnodeEntry};
use waymark_core::alter::{AlterConfig, AlterInput, AlterMsg, AlterOutput, AlterRecord, Metadata};
use waymark_core::{Body, Breaks, CutId, Envelope, Input, Placement, VnodeId};

pub const HOP_US: u64 = 1_000;
const PHASES: [&str; 4] = ["START", "STARTED", "FINISH", "END:ok"];
/// The operator gives up on a cut process that has not ended in this long.
const OPERATOR_TIMEOUT_US: u64 = 5_000_000;

#[derive(Clone, Debug, Default)]
pub struct TreeStats {
    pub failovers: u64,
    pub switch_backs: u64,
    pub retried: u64,
    pub alterations_ok: u64,
    pub alterations_failed: u64,
    pub manager_crashes: u64,
    pub md5_corruptions: u64,
    pub secondaries_started: u64,
    pub secondaries_stopped: u64,
    /// Vnodes restarted because their parent said so (boot loading by parent).
    pub boots_by_parent: u64,
    /// Root terms won (each new root orders `root` = its name and term first).
    pub root_terms: u64,
    /// Of those, won by a secondary root standing in for a dead primary.
    pub secondary_root_terms: u64,
    /// Messages sent around a dead link through the reachability graph.
    pub relayed: u64,
}

impl TreeStats {
    pub fn add(&mut self, o: &TreeStats) {
        self.failovers += o.failovers;
        self.switch_backs += o.switch_backs;
        self.retried += o.retried;
        self.alterations_ok += o.alterations_ok;
        self.alterations_failed += o.alterations_failed;
        self.manager_crashes += o.manager_crashes;
        self.md5_corruptions += o.md5_corruptions;
        self.secondaries_started += o.secondaries_started;
        self.secondaries_stopped += o.secondaries_stopped;
        self.boots_by_parent += o.boots_by_parent;
        self.root_terms += o.root_terms;
        self.secondary_root_terms += o.secondary_root_terms;
        self.relayed += o.relayed;
    }
}

/// The operator's cut process in flight: cut id, phase index, proposal number, start time, and
/// the manager it proposed the phase through.
#[derive(Clone, Copy, Debug)]
pub struct CutProcess {
    pub cut: u64,
    pub phase: usize,
    pub n: u64,
    pub begun_us: u64,
    pub entry: Option<usize>,
}

/// Leaf configs for the store vnodes (in order) and the managers above them.
pub fn shape(stores: &[VnodeId], fanout: usize, breaks: Breaks) -> (Vec<AlterConfig>, Vec<TreeVnode>) {
    let timing = Timing { hop_us: HOP_US, heartbeat_interval_us: 20 * HOP_US, breaks };
    let mut configs = build_over(stores.to_vec(), fanout, &timing).configs;
    let managers = configs.split_off(stores.len()).into_iter().map(TreeVnode::new).collect();
    (configs, managers)
}

impl World {
    pub(crate) fn manager_index(&self, m: usize) -> usize {
        self.nodes.len() + m
    }

    /// The root: the one primary manager without a parent.
    pub(crate) fn root_manager(&self) -> usize {
        self.managers.iter().position(|m| m.cfg.parents.is_empty() && m.cfg.secondary_of.is_none()).expect("a root")
    }

    /// The leaves every cut phase must reach: all store vnodes.
    pub(crate) fn tree_size(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// Seed 004: the assisting child's host starts a secondary parent in the primary's place.
    pub(crate) fn start_secondary(&mut self, id: VnodeId, of: &VnodeId, metadata: Metadata, term: u64) {
        let Some(of_m) = self.index.get(of).and_then(|i| i.checked_sub(self.nodes.len())) else { return };
        let cfg = self.managers[of_m].cfg.secondary(id.clone());
        let m = match self.index.get(&id).map(|i| i - self.nodes.len()) {
            Some(m) if self.managers[m].alter.is_some() => return,
            Some(m) => m,
            None => {
                self.managers.push(TreeVnode::new(cfg.clone()));
                self.was_primary.push(true);
                let m = self.managers.len() - 1;
                self.index.insert(id, self.manager_index(m));
                m
            }
        };
        self.tree_stats.secondaries_started += 1;
        let mg = &mut self.managers[m];
        (mg.cfg, mg.disk, mg.disk_term) = (cfg, metadata, term);
        self.restart_manager(m);
    }

    pub(crate) fn stop_secondary(&mut self, id: &VnodeId) {
        let Some(m) = self.index.get(id).and_then(|i| i.checked_sub(self.nodes.len())) else { return };
        if self.managers[m].stop().is_some() {
            self.tree_stats.secondaries_stopped += 1;
        }
    }

    /// Secondary parents still running (none may be, once every primary is back).
    pub fn running_secondaries(&self) -> Vec<VnodeId> {
        self.managers
            .iter()
            .filter(|m| m.cfg.secondary_of.is_some() && m.alter.is_some())
            .map(|m| m.cfg.id.clone())
            .collect()
    }

    pub(crate) fn boot_managers(&mut self) {
        let genesis = self.genesis();
        for m in 0..self.managers.len() {
            self.managers[m].disk = genesis.clone();
            self.restart_manager(m);
        }
    }

    pub(crate) fn genesis(&self) -> Metadata {
        let leaves: Vec<AlterConfig> = self.nodes.iter().filter_map(|n| n.cfg.tree.clone()).collect();
        genesis(&leaves, &self.managers, &self.placement, self.cfg.real_time_safety)
    }

    pub(crate) fn manager_step(&mut self, m: usize, input: AlterInput) {
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let now = self.now_us;
            let Some(a) = self.managers[m].alter.as_mut() else { return };
            let outputs = a.step(now, input);
            let primary = a.follows_primary_parent();
            self.note_parent(self.manager_index(m), primary);
            for o in outputs {
                self.managers[m].keep(&o);
                inputs.extend(self.manager_output(m, o));
            }
        }
    }

    fn manager_output(&mut self, m: usize, o: AlterOutput) -> Option<AlterInput> {
        let instance = self.managers[m].instance;
        match o {
            AlterOutput::Send { to, msg } => {
                let from = self.managers[m].cfg.id.clone();
                let env = Envelope { from, to, cut: None, body: Body::Alter(msg) };
                self.send(self.manager_index(m), env);
                None
            }
            AlterOutput::Persist { seq, bytes } => {
                let bytes = self.managers[m].written(bytes);
                let at = self.now_us + self.rng.gen_range(200..3_000);
                self.schedule(at, Event::ManagerPersisted { m, instance, seq, bytes });
                None
            }
            // Kept in `manager_step`.
            AlterOutput::PersistApplied { .. } | AlterOutput::PersistClone { .. } | AlterOutput::PersistTerm { .. } => {
                None
            }
            AlterOutput::Apply { term, seq, record } => {
                let root = &self.managers[m].cfg;
                if root.parents.is_empty() {
                    self.answers.ordered(term, seq, &record);
                }
                if root.parents.is_empty() && record.key == "root" && self.answers.wins(term) {
                    let found = crate::checkers::tree_root_term::check(&self.answers, &root.id, seq);
                    self.answers.violations.extend(found);
                    self.tree_stats.root_terms += 1;
                    self.tree_stats.secondary_root_terms += root.secondary_of.is_some() as u64;
                }
                Some(AlterInput::Applied { seq, ok: true })
            }
            AlterOutput::StartSecondaryParent { id, of, metadata, term } => {
                self.start_secondary(id, &of, metadata, term);
                None
            }
            AlterOutput::StopSecondaryParent { id } => {
                self.stop_secondary(&id);
                None
            }
            AlterOutput::Done { ok, attempts, applied, id, seq } => {
                if ok && self.cut_process.is_some_and(|p| p.n == id.n) {
                    let found = crate::checkers::tree_answered::check(self, id.n, seq);
                    self.answers.violations.extend(found);
                }
                self.on_operator_done(id.n, ok, attempts, applied);
                None
            }
            AlterOutput::SetTimer { timer, at_us } => {
                self.schedule(at_us, Event::ManagerTimer { m, instance, timer });
                None
            }
        }
    }

    pub(crate) fn note_parent(&mut self, tree_node: usize, primary: bool) {
        let was = std::mem::replace(&mut self.was_primary[tree_node], primary);
        match (was, primary) {
            (true, false) => self.tree_stats.failovers += 1,
            (false, true) => self.tree_stats.switch_backs += 1,
            _ => {}
        }
    }

    pub(crate) fn manager_deliver(&mut self, m: usize, env: Envelope) {
        if let Body::Alter(msg) = env.body {
            self.manager_step(m, AlterInput::Message { from: env.from, msg });
        }
    }

    /// After a store vnode's sync: read back the alteration records that became durable.
    pub(crate) fn read_back(&mut self, node: usize, from: usize, upto: usize) {
        let instance = self.nodes[node].instance;
        for i in from..upto.min(self.nodes[node].log.len()) {
            if let waymark_core::Record::Alteration { seq, bytes } = &self.nodes[node].log[i] {
                let (seq, mut bytes) = (*seq, bytes.clone());
                if std::mem::take(&mut self.nodes[node].corrupt_next) {
                    corrupt(&mut bytes);
                }
                let at = self.now_us + 50;
                self.schedule(at, Event::AlterReadBack { node, instance, seq, bytes });
            }
        }
    }

    pub(crate) fn alter_read_back(&mut self, node: usize, seq: u64, bytes: Vec<u8>) {
        self.step(node, Input::AlterPersisted { seq, bytes });
    }

    // ---- the operator ----

    pub(crate) fn tree_cut_tick(&mut self) {
        let stuck = self.cut_process.is_some_and(|p| self.now_us - p.begun_us > OPERATOR_TIMEOUT_US);
        if stuck {
            self.cut_process = None;
        }
        // A phase proposed while no manager was up went nowhere: propose it again once one is.
        // (Before, the operator waited out its 5 s timeout — longer than the settle — so a root
        // crash with no other manager stopped every later cut of the seed.)
        if let Some(p) = self.cut_process.filter(|p| p.entry.is_none()) {
            if self.operator_entry().is_some() {
                let value = PHASES.get(p.phase).copied().unwrap_or("END:failed");
                self.propose_phase(p, value);
            }
            return;
        }
        if self.cut_process.is_some() || self.operator_entry().is_none() {
            return;
        }
        self.next_cut += 1;
        let cut = self.next_cut;
        let window = CutWindow { begun_us: self.now_us, declared_us: None };
        self.history.cut_windows.insert(CutId(cut), window);
        self.propose_phase(CutProcess { cut, phase: 0, n: 0, begun_us: self.now_us, entry: None }, PHASES[0]);
    }

    fn propose_phase(&mut self, mut p: CutProcess, value: &str) {
        self.next_proposal += 1;
        p.n = self.next_proposal;
        p.entry = self.operator_entry();
        self.cut_process = Some(p);
        let record = AlterRecord::set(format!("cut/{}", p.cut), value);
        // With no manager up the proposal goes nowhere and the operator gives up after a timeout.
        let Some(m) = p.entry else { return };
        self.answers.proposed(p.n, &record);
        self.manager_step(m, AlterInput::Propose { n: p.n, record });
    }

    /// The manager the operator proposed through crashed, and the proposal with it: the phase's
    /// outcome is unknown. The operator ends the cut through another manager — `END:ok` again if
    /// FINISH was applied everywhere (phase 3), else `END:failed` — instead of waiting for an
    /// answer that cannot come (which stopped every later cut of the seed).
    fn operator_lost(&mut self, m: usize) {
        let Some(p) = self.cut_process.filter(|p| p.entry == Some(m)) else { return };
        let (phase, end) = if p.phase == 3 { (3, PHASES[3]) } else { (4, "END:failed") };
        self.propose_phase(CutProcess { phase, ..p }, end);
    }

    /// Where the operator proposes: the primary root, or while it is down any running manager
    /// (proposals go up to whichever root won the current term).
    fn operator_entry(&self) -> Option<usize> {
        let root = self.root_manager();
        let running = |m: &usize| self.managers[*m].alter.is_some() && self.managers[*m].cfg.secondary_of.is_none();
        std::iter::once(root).chain(0..self.managers.len()).find(running)
    }

    fn on_operator_done(&mut self, n: u64, ok: bool, attempts: u32, applied: u64) {
        if attempts > 1 {
            self.tree_stats.retried += 1;
        }
        if ok {
            self.tree_stats.alterations_ok += 1;
        } else {
            self.tree_stats.alterations_failed += 1;
        }
        let Some(p) = self.cut_process.filter(|p| p.n == n) else { return };
        let everywhere = ok && applied == self.tree_size();
        if p.phase == 2 && everywhere {
            // FINISH applied on every store vnode: each has written its `CutFinish`.
            if let Some(w) = self.history.cut_windows.get_mut(&CutId(p.cut)) {
                w.declared_us = Some(self.now_us);
            }
        }
        match p.phase {
            0..=2 if everywhere => self.propose_phase(CutProcess { phase: p.phase + 1, ..p }, PHASES[p.phase + 1]),
            0..=2 => self.propose_phase(CutProcess { phase: 4, ..p }, "END:failed"),
            _ => {
                self.cut_process = None;
                let ended =
                    CutRun { cut: CutId(p.cut), ok: ok && p.phase == 3, begun_us: p.begun_us, ended_us: self.now_us };
                self.history.cuts.push(ended);
            }
        }
    }

    /// The snapshot catalog: `cut/<id>` entries of the root's metadata that say how the cut ended.
    pub(crate) fn catalog(&self) -> Vec<(CutId, bool)> {
        let root = &self.managers[self.root_manager()];
        let metadata = root.alter.as_ref().map_or(&root.disk, |a| a.metadata());
        metadata
            .records()
            .filter_map(|(k, v)| {
                let cut = k.strip_prefix("cut/")?.parse().ok()?;
                match v.as_slice() {
                    b"END:ok" => Some((CutId(cut), true)),
                    b"END:failed" => Some((CutId(cut), false)),
                    _ => None,
                }
            })
            .collect()
    }

    pub(crate) fn crash_manager(&mut self, m: usize, down_us: u64) {
        if self.managers[m].stop().is_some() {
            self.tree_stats.manager_crashes += 1;
            let idx = self.manager_index(m);
            let total = self.nodes.len() + self.managers.len();
            self.net.break_all_of(idx, total);
            let tree_node = self.manager_index(m);
            self.schedule(self.now_us + down_us, Event::HostBack { tree_node });
            self.operator_lost(m);
        }
    }

    pub(crate) fn restart_manager(&mut self, m: usize) {
        if let Some(started) = self.managers[m].start() {
            self.manager_step(m, started);
        }
    }

    /// Seed 004, boot loading by parent: a crashed tree vnode's host comes back and asks the
    /// vnode's primary parent which vnodes to start on it; it asks again while no answer comes.
    /// The root has no parent: its host starts it from its own log.
    pub(crate) fn host_back(&mut self, tree_node: usize) {
        if self.is_stopping() || self.tree_node_up(tree_node) {
            return;
        }
        let (id, parent) = match tree_node.checked_sub(self.nodes.len()) {
            Some(m) => (self.managers[m].cfg.id.clone(), self.managers[m].cfg.parents.first().cloned()),
            None => {
                let cfg = self.nodes[tree_node].cfg.tree.as_ref().expect("a store vnode of the tree");
                (cfg.id.clone(), cfg.parents.first().cloned())
            }
        };
        let Some(parent) = parent else { return self.boot_tree_node(tree_node) };
        let msg = AlterMsg::HostAlive { host: id.host.clone() };
        self.send(tree_node, Envelope { from: id, to: parent, cut: None, body: Body::Alter(msg) });
        self.schedule(self.now_us + 100_000, Event::HostBack { tree_node });
    }

    /// A message for a vnode that is down reaches its host's agent: the parent's `StartVnodes`.
    pub(crate) fn deliver_to_host_agent(&mut self, env: Envelope) {
        let Body::Alter(AlterMsg::StartVnodes { vnodes }) = env.body else {
            self.messages_lost += 1;
            return;
        };
        for name in vnodes {
            let Some(&tree_node) = VnodeId::parse(&name).and_then(|id| self.index.get(&id)) else { continue };
            if !self.tree_node_up(tree_node) {
                self.tree_stats.boots_by_parent += 1;
                self.boot_tree_node(tree_node);
            }
        }
    }

    fn tree_node_up(&self, tree_node: usize) -> bool {
        match tree_node.checked_sub(self.nodes.len()) {
            Some(m) => self.managers[m].alter.is_some(),
            None => self.nodes[tree_node].vnode.is_some(),
        }
    }

    fn boot_tree_node(&mut self, tree_node: usize) {
        match tree_node.checked_sub(self.nodes.len()) {
            Some(m) => self.restart_manager(m),
            None => self.restart(tree_node),
        }
    }

    /// The incarnation of tree vnode `tree_node`, if it runs.
    pub(crate) fn tree_node_instance(&self, tree_node: usize) -> Option<u32> {
        match tree_node.checked_sub(self.nodes.len()) {
            Some(m) => self.managers[m].alter.as_ref().map(|_| self.managers[m].instance),
            None => self.nodes[tree_node].vnode.as_ref().map(|_| self.nodes[tree_node].instance),
        }
    }

    /// Tree vnode `tree_node`'s metadata, if it still runs as incarnation `instance`.
    pub(crate) fn tree_node_metadata(&self, tree_node: usize, instance: u32) -> Option<(&VnodeId, &Metadata)> {
        match tree_node.checked_sub(self.nodes.len()) {
            Some(m) => {
                let mg = &self.managers[m];
                let a = mg.alter.as_ref().filter(|_| mg.instance == instance)?;
                Some((a.id(), a.metadata()))
            }
            None => {
                let n = &self.nodes[tree_node];
                let a = n.vnode.as_ref().filter(|_| n.instance == instance)?.tree()?;
                Some((a.id(), a.metadata()))
            }
        }
    }

    /// Every tree vnode's metadata at the end, for the convergence checker.
    pub fn tree_metadata(&self) -> Vec<(VnodeId, Metadata)> {
        let stores =
            self.nodes.iter().filter_map(|n| n.vnode.as_ref()?.tree().map(|a| (a.id().clone(), a.metadata().clone())));
        let managers = self
            .managers
            .iter()
            .filter(|m| m.cfg.secondary_of.is_none())
            .filter_map(|m| m.alter.as_ref().map(|a| (a.id().clone(), a.metadata().clone())));
        stores.chain(managers).collect()
    }
}

/// The metadata the cluster is created with: vnodes with their parents, states, hosts, and the
/// partition placement in use.
pub fn genesis(leaves: &[AlterConfig], managers: &[TreeVnode], placement: &Placement, real_time: bool) -> Metadata {
    let all = leaves.iter().chain(managers.iter().map(|m| &m.cfg));
    let vnodes = all.map(VnodeEntry::of);
    let config = [("real_time_safety", if real_time { "on" } else { "off" })];
    cluster::genesis(&config, vnodes, Some(placement))
}
