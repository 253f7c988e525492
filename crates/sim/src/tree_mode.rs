//! The bank/append world with the cut process on the cluster tree (`--tree`): manager vnodes over
//! the store vnodes, alterations for START → STARTED → FINISH → END, manager and whole-host
//! crashes and md5 corruption among the faults.
//!
//! The managers are the core's `ManagerVnode`s, driven through `Input`/`Output` like the store
//! vnodes and like the server drives them: their logs lose unsynced records in a crash, and the
//! cut process is the core's operator (`cut::operator`), started by `Request::Cut` sent to the
//! root's manager, or to any running primary manager while the root is down.

use crate::checkers::tree_answered::Incarnation;
use crate::history::{CutRun, CutWindow, DeclaredCut};
use crate::slot::{Resident, Slot};
use crate::tree::build::build_over;
use crate::tree::genesis::genesis;
use crate::tree::host::TreeHost;
use crate::tree::manager::ManagerNode;
use crate::tree::stats::TreeStats;
use crate::tree::timing::timing;
use crate::tree::vnode::corrupt;
use crate::world::{CutRequest, Event, World, OPERATOR, SYNC_MAX_US};
use rand::Rng;
use waymark_core::alter::cluster::Setting;
use waymark_core::alter::{AlterConfig, AlterMsg, AlterSeq, Answered, MetaVersion, Metadata, Term};
use waymark_core::cut::operator::{CutPhase, Phase};
use waymark_core::cut::tree_process::cut_of;
use waymark_core::{
    Body, Breaks, CutId, Envelope, Input, Lsn, Output, Placement, Record, Request, Response, TreeImage, VnodeId,
};

/// Leaf configs for the store vnodes (in order) and the managers above them, down until booted.
pub fn shape(stores: &[VnodeId], fanout: usize, breaks: Breaks) -> (Vec<AlterConfig>, Vec<AlterConfig>) {
    let mut configs = build_over(stores.to_vec(), fanout, &timing(SYNC_MAX_US, true, breaks)).configs;
    let managers = configs.split_off(stores.len());
    (configs, managers)
}

impl World {
    pub(crate) fn manager_slot(&self, m: usize) -> Slot {
        Slot::manager(m, self.nodes.len())
    }

    /// The root: the one primary manager without a parent.
    pub(crate) fn root_manager(&self) -> usize {
        self.managers.iter().position(|m| m.cfg.parents.is_empty() && m.cfg.secondary_of.is_none()).expect("a root")
    }

    /// Secondary parents still running (none may be, once every primary is back).
    pub fn running_secondaries(&self) -> Vec<VnodeId> {
        self.managers
            .iter()
            .filter(|m| m.cfg.secondary_of.is_some() && m.vnode.is_some())
            .map(|m| m.cfg.id.clone())
            .collect()
    }

    pub(crate) fn boot_managers(&mut self) {
        let base = TreeImage { metadata: self.genesis(), term: Term::ZERO };
        for m in 0..self.managers.len() {
            self.managers[m].base = base.clone();
            self.restart_manager(m);
        }
    }

    pub(crate) fn genesis(&self) -> Metadata {
        let leaves = self.nodes.iter().filter_map(|n| n.cfg.tree.as_ref());
        let managers = self.managers.iter().map(|m| &m.cfg);
        bank_genesis(leaves.chain(managers), &self.placement, &self.cfg)
    }

    /// Feeds one input to manager `m` and carries out its outputs, as the server's driver does.
    pub(crate) fn manager_step(&mut self, m: usize, input: Input) {
        let now = self.now_us;
        let Some(v) = self.managers[m].vnode.as_mut() else { return };
        let outputs = v.step(now, input);
        let answered = v.take_answered();
        let leaves = v.running_cut().zip(v.running_cut_leaves());
        let primary = v.alter().follows_primary_parent();
        self.followed.note(self.manager_slot(m).index(), primary, &mut self.tree_stats);
        for a in answered {
            self.on_answered(a, leaves);
        }
        for o in outputs {
            self.manager_output(m, o);
        }
    }

    fn manager_output(&mut self, m: usize, o: Output) {
        match o {
            Output::Append(record) => {
                self.note_ordered(m, &record);
                self.managers[m].log.push(record);
                self.request_manager_sync(m);
            }
            Output::Send(env) => self.send(self.manager_slot(m), env),
            Output::Reply { client, req, response } => {
                let at = self.now_us + self.rng.gen_range(50..300);
                self.schedule(at, Event::ToClient { client: client.0, req, response });
            }
            Output::SetTimer { timer, at_us } => {
                let instance = self.managers[m].instance;
                self.schedule(at_us.max(self.now_us), Event::ManagerTimer { m, instance, timer });
            }
            Output::StartSecondaryParent { id, of, metadata, term } => {
                self.start_secondary(id, &of, TreeImage { metadata, term })
            }
            Output::StopSecondaryParent { id } => self.stop_secondary(&id),
        }
    }

    /// At the root, an applied alteration is one ordered: recorded for the checkers at the moment
    /// of an answer, and the first `root` record of a term is the moment the term is won.
    fn note_ordered(&mut self, m: usize, record: &Record) {
        let Record::AlterApplied { term, seq, record } = record else { return };
        let cfg = &self.managers[m].cfg;
        if !cfg.parents.is_empty() {
            return;
        }
        self.answers.ordered(MetaVersion::new(*term, *seq), record);
        if record.key == "root" && self.answers.wins(*term) {
            let found = crate::checkers::tree_root_term::check(&self.answers, &cfg.id, *seq);
            self.answers.violations.extend(found);
            self.tree_stats.root_terms += 1;
            self.tree_stats.secondary_root_terms += cfg.secondary_of.is_some() as u64;
        }
    }

    /// A manager's own proposal ended (a phase of the operator's cut, a child's state, a host's).
    /// `leaves`: the manager's running cut, if one runs, and how many store vnodes it must reach.
    fn on_answered(&mut self, a: Answered, leaves: Option<(CutId, u64)>) {
        self.tree_stats.retried += (a.attempts > 1) as u64;
        self.note_declared(&a, leaves);
        if !a.id.is_own() {
            let answered = &mut self.tree_stats.operator_alterations;
            *(if a.ok { &mut answered.answered_ok } else { &mut answered.answered_failed }) += 1;
        }
        if a.ok {
            self.tree_stats.alterations_ok += 1;
            let found = crate::checkers::tree_answered::check(self, &a.id, a.seq);
            self.answers.violations.extend(found);
        } else {
            self.tree_stats.alterations_failed += 1;
        }
    }

    /// Group commit, as for store vnodes: one sync covers every record appended before it began.
    fn request_manager_sync(&mut self, m: usize) {
        let mg = &mut self.managers[m];
        if mg.sync_pending || mg.vnode.is_none() {
            return;
        }
        mg.sync_pending = true;
        let (instance, upto) = (mg.instance, mg.log.len());
        let at = self.now_us + self.rng.gen_range(200..SYNC_MAX_US);
        self.schedule(at, Event::ManagerSync { m, instance, upto });
    }

    pub(crate) fn manager_sync_done(&mut self, m: usize, instance: u32, upto: usize) {
        let mg = &mut self.managers[m];
        if !mg.is_up(instance) {
            return;
        }
        mg.sync_pending = false;
        let before = mg.durable;
        mg.durable = mg.durable.max(upto);
        let more = mg.log.len() > mg.durable;
        // Seed 004 point 4: each alteration written is read back and its md5 compared.
        for i in before..upto {
            if let Record::Alteration { seq, bytes } = &self.managers[m].log[i] {
                let (seq, mut bytes) = (*seq, bytes.clone());
                if std::mem::take(&mut self.managers[m].corrupt_next) {
                    corrupt(&mut bytes);
                }
                self.schedule(self.now_us + 50, Event::ManagerReadBack { m, instance, seq, bytes });
            }
        }
        self.manager_step(m, Input::WalDurable(Lsn(upto as u64)));
        if more {
            self.request_manager_sync(m);
        }
    }

    /// After a store vnode's sync: read back the alteration records that became durable.
    pub(crate) fn read_back(&mut self, node: usize, from: usize, upto: usize) {
        let instance = self.nodes[node].instance;
        for i in from..upto.min(self.nodes[node].log.len()) {
            if let Record::Alteration { seq, bytes } = &self.nodes[node].log[i] {
                let (seq, mut bytes) = (*seq, bytes.clone());
                if std::mem::take(&mut self.nodes[node].corrupt_next) {
                    corrupt(&mut bytes);
                }
                let at = self.now_us + 50;
                self.schedule(at, Event::AlterReadBack { node, instance, seq, bytes });
            }
        }
    }

    pub(crate) fn alter_read_back(&mut self, node: usize, seq: AlterSeq, bytes: Vec<u8>) {
        self.step(node, Input::AlterPersisted { seq, bytes });
    }

    // ---- the operator ----

    /// Asks for a cut: `Request::Cut` to the manager that runs the operator — the primary root,
    /// or while it is down any running primary manager (proposals go up to whichever root won
    /// the current term). With none up, it asks again at its next tick.
    pub(crate) fn tree_cut_tick(&mut self) {
        if self.cut_request.is_some() {
            return;
        }
        let Some(m) = self.operator_entry() else { return };
        self.operator_requests += 1;
        let req = self.operator_requests;
        self.cut_request = Some(CutRequest { req, begun_us: self.now_us });
        self.cut_entry = Some(m);
        let node = self.manager_slot(m);
        let at = self.now_us + 100;
        self.schedule(at, Event::ToVnode { node, client: OPERATOR, req, request: Request::Cut });
    }

    /// The manager the operator asks for a cut: the root's, else any primary manager that runs,
    /// else a secondary parent standing in (as `waymark snapshot create` asks the hosts in turn).
    fn operator_entry(&self) -> Option<usize> {
        let root = self.root_manager();
        let running = |m: &usize| self.managers[*m].vnode.is_some() && self.managers[*m].cfg.secondary_of.is_none();
        let standing_in = |m: &usize| self.managers[*m].vnode.is_some();
        let primary = std::iter::once(root).chain(0..self.managers.len()).find(running);
        primary.or_else(|| (0..self.managers.len()).find(standing_in))
    }

    /// The cut request reached manager `m`: the operator's process begins now.
    pub(crate) fn arrive_at_manager(&mut self, m: usize, client: u64, req: u64, request: Request) {
        if self.managers[m].vnode.is_none() {
            let response = Response::Unavailable { why: "connection refused" };
            return self.schedule(self.now_us + 100, Event::ToClient { client, req, response });
        }
        if let Some(c) = self.cut_request.as_mut().filter(|c| c.req == req) {
            c.begun_us = self.now_us;
        }
        self.manager_step(m, Input::Client { client: waymark_core::ClientId(client), req, request });
        // The operator began a cut (or the end of one left unfinished): its window opens now, no
        // later than START is ordered (`cut_bounds` judges transactions against it).
        if let Some(cut) = self.managers[m].vnode.as_ref().and_then(|v| v.running_cut()) {
            let window = CutWindow { begun_us: self.now_us, declared_us: None };
            self.history.cut_windows.entry(cut).or_insert(window);
        }
    }

    /// The operator's answer on the tree (none comes if its manager crashed meanwhile: the cut
    /// is then ended by the next operator, and its window was kept as it went).
    pub(crate) fn tree_operator_reply(&mut self, begun_us: u64, response: Option<Response>) {
        self.cut_entry = None;
        let Some(Response::CutDone { cut, ok, phases_us, .. }) = response else { return };
        debug_assert!(!ok || phases_us.len() == 4, "an ok cut went through four phases");
        self.history.cuts.push(CutRun { cut, ok, begun_us, ended_us: self.now_us });
        if ok {
            self.export_later(cut);
        }
    }

    /// FINISH applied on every store vnode: each has written its `CutFinish`, the cut is declared.
    fn note_declared(&mut self, a: &Answered, running: Option<(CutId, u64)>) {
        let Some(CutPhase { cut, phase: Phase::Finish }) = Phase::of_proposal(a.id.n) else { return };
        if a.ok && running.is_some_and(|(c, leaves)| c == cut && a.applied >= leaves) {
            if let Some(w) = self.history.cut_windows.get_mut(&cut) {
                w.declared_us.get_or_insert(self.now_us);
            }
        }
    }

    /// Manager `m`, asked for the cut in flight, is gone: the operator's connection to it breaks
    /// (its cut is left unfinished in the metadata; the next operator ends it `END:failed`).
    fn operator_lost(&mut self, m: usize) {
        if self.cut_entry != Some(m) {
            return;
        }
        if let Some(CutRequest { req, .. }) = self.cut_request {
            let response = Response::Unavailable { why: "connection reset" };
            self.schedule(self.now_us + 100, Event::ToClient { client: OPERATOR, req, response });
        }
    }

    /// The snapshot catalog: `cut/<id>` entries of the root's metadata that say how the cut ended.
    pub(crate) fn catalog(&self) -> Vec<DeclaredCut> {
        let metadata = self.managers[self.root_manager()].metadata();
        metadata
            .records()
            .filter_map(|(k, v)| match Phase::parse(v)? {
                Phase::End { ok } => Some(DeclaredCut { cut: cut_of(k)?, ok }),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn crash_manager(&mut self, m: usize, down_us: u64) {
        if self.managers[m].vnode.is_none() {
            return;
        }
        self.tree_stats.manager_crashes += 1;
        if self.managers[m].crash(&mut self.rng) {
            self.faults.counts.torn += 1;
        }
        let slot = self.manager_slot(m);
        self.net.break_all_of(slot, self.slots());
        self.schedule(self.now_us + down_us, Event::HostBack { tree_node: slot });
        self.operator_lost(m);
    }

    pub(crate) fn restart_manager(&mut self, m: usize) {
        if self.managers[m].start() {
            self.manager_step(m, Input::Restarted);
        }
    }

    /// A message for a vnode that is down reaches its host's agent: the parent's `StartVnodes`.
    pub(crate) fn deliver_to_host_agent(&mut self, env: Envelope) {
        match env.body {
            Body::Alter(AlterMsg::StartVnodes { vnodes }) => self.boot_by_parent(&vnodes),
            _ => self.messages_lost += 1,
        }
    }

    /// The incarnation of tree vnode `tree_node`, if it runs.
    pub(crate) fn tree_node_instance(&self, tree_node: Slot) -> Option<u32> {
        match self.resident(tree_node) {
            Resident::Manager(m) => self.managers[m].vnode.as_ref().map(|_| self.managers[m].instance),
            Resident::Store(i) => self.nodes[i].vnode.as_ref().map(|_| self.nodes[i].instance),
        }
    }

    /// A tree vnode's metadata, if it still runs as that incarnation.
    pub(crate) fn tree_node_metadata(&self, at: Incarnation) -> Option<(&VnodeId, &Metadata)> {
        let Incarnation { tree_node, instance } = at;
        match self.resident(tree_node) {
            Resident::Manager(m) => {
                let mg = &self.managers[m];
                let a = mg.vnode.as_ref().filter(|_| mg.instance == instance)?.alter();
                Some((a.id(), a.metadata()))
            }
            Resident::Store(i) => {
                let n = &self.nodes[i];
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
            .filter_map(|m| m.vnode.as_ref().map(|v| (v.id().clone(), v.alter().metadata().clone())));
        stores.chain(managers).collect()
    }
}

/// The metadata the bank world is created with: the tree's vnodes (none without `--tree`), whether
/// replies are held for real-time safety, whether the root promotes replicas (`failover`, only
/// recorded when on), and the partition placement in use.
pub fn bank_genesis<'a>(
    vnodes: impl IntoIterator<Item = &'a AlterConfig>,
    placement: &Placement,
    cfg: &crate::config::SimConfig,
) -> Metadata {
    let on_off = |b: bool| if b { "on" } else { "off" };
    let mut config = vec![Setting::new("real_time_safety", on_off(cfg.real_time_safety))];
    if cfg.failover {
        config.push(Setting::new("failover", "on"));
    }
    let replicas = cfg.replicas.to_string();
    if cfg.catch_up {
        config.push(Setting::new("catch_up", "on"));
        config.push(Setting::new("replicas", &replicas));
        config.push(Setting::new("replace_after_ms", "300"));
    }
    genesis(&config, vnodes, Some(placement))
}

/// The bank world's tree vnodes live in slots: store vnodes, then managers and secondary parents.
impl TreeHost for World {
    type At = Slot;

    fn tree_stats(&mut self) -> &mut TreeStats {
        &mut self.tree_stats
    }

    fn tree_stopping(&self) -> bool {
        self.is_stopping()
    }

    fn tree_vnode(&self, id: &VnodeId) -> Option<Slot> {
        self.index.get(id).copied()
    }

    fn tree_config(&self, at: Slot) -> &AlterConfig {
        match self.resident(at) {
            Resident::Manager(m) => &self.managers[m].cfg,
            Resident::Store(i) => self.nodes[i].cfg.tree.as_ref().expect("a store vnode of the tree"),
        }
    }

    fn tree_running(&self, at: Slot) -> bool {
        match self.resident(at) {
            Resident::Manager(m) => self.managers[m].vnode.is_some(),
            Resident::Store(i) => self.nodes[i].vnode.is_some(),
        }
    }

    fn boot_tree_vnode(&mut self, at: Slot) {
        match self.resident(at) {
            Resident::Manager(m) => self.restart_manager(m),
            Resident::Store(i) => self.restart(i),
        }
    }

    fn stop_secondary_at(&mut self, at: Slot) -> bool {
        let m = self.secondary_manager(at);
        let ran = self.managers[m].stop();
        if ran {
            self.operator_lost(m);
        }
        ran
    }

    fn add_secondary(&mut self, cfg: AlterConfig) -> Slot {
        let id = cfg.id.clone();
        let leaves = self.nodes.len() as u64;
        self.managers.push(ManagerNode::new(cfg, TreeImage::default(), leaves));
        self.followed.add();
        let slot = self.manager_slot(self.managers.len() - 1);
        self.index.insert(id, slot);
        slot
    }

    fn start_secondary_at(&mut self, at: Slot, cfg: AlterConfig, image: TreeImage) {
        let m = self.secondary_manager(at);
        let mg = &mut self.managers[m];
        (mg.cfg, mg.base, mg.log, mg.durable) = (cfg, image, vec![], 0);
        self.restart_manager(m);
    }

    fn send_alter(&mut self, from: Slot, to: &VnodeId, msg: AlterMsg) {
        let id = self.tree_config(from).id.clone();
        self.send(from, Envelope { from: id, to: to.clone(), cut: None, body: Body::Alter(msg) });
    }

    fn host_back_later(&mut self, at: Slot, after_us: u64) {
        self.schedule(self.now_us + after_us, Event::HostBack { tree_node: at });
    }
}

impl World {
    /// The manager a secondary parent's slot holds: secondary parents are managers, never stores.
    fn secondary_manager(&self, at: Slot) -> usize {
        match self.resident(at) {
            Resident::Manager(m) => m,
            Resident::Store(i) => panic!("store vnode {i} is no secondary parent"),
        }
    }
}
