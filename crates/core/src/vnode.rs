//! One store vnode: a single-threaded state machine that the simulator and the server drive alike.
//!
//! ```text
//!   driver ──Input──▶ Vnode::step(now_us, input) ──▶ Vec<Output> ──▶ driver
//!                      (txn: near + participant roles, cut: local cut + coordinator)
//! ```
//! The vnode never touches a clock, a socket or a file: time arrives as `now_us`, durability as
//! `Input::WalDurable`, and everything it wants done leaves as an `Output`. Outputs of one step are
//! ordered; sends and replies wait for the records appended before them (see `outbox`).

use crate::config::VnodeConfig;
use crate::cut::blocking::BlockingState;
use crate::cut::coordinator::CutCoordinator;
use crate::cut::local::CutState;
use crate::cut::real_time::RealTime;
use crate::cut::tree_process::TreeRole;
use crate::cut::versions::VersionsState;
use crate::ids::{Branch, ClientId, CutId, Lsn, VnodeId};
use crate::image::{LogSummary, VnodeImage};
use crate::io::{Input, Output, Request, Response, Timer};
use crate::message::{Body, CutMsg, Envelope, TxnMsg};
use crate::outbox::Outbox;
use crate::record::Record;
use crate::store::Store;
use crate::txn::near::NearState;
use crate::txn::participant::ParticipantState;

pub struct Vnode {
    pub(crate) cfg: VnodeConfig,
    pub(crate) now_us: u64,
    /// Invariant: equals the number of `Boot` records in this vnode's log before this boot.
    pub(crate) incarnation: u32,
    /// Set once this boot's `Boot` record is durable: no transaction starts before.
    pub(crate) booted: bool,
    pub(crate) boot_lsn: Lsn,
    pub(crate) store: Store,
    /// Invariant: `Tallies::of(store)`, kept up to date as writes apply (`tally.rs`).
    pub(crate) tallies: crate::tally::Tallies,
    /// The host's data is at its memory limit (`Input::MemoryLimit`): primary branches refuse
    /// writes that store a value. Not durable: the host says so again after a restart.
    pub(crate) memory_full: bool,
    /// Key → the branches that hold it (primaries only; `txn::locks`).
    pub(crate) locks: crate::txn::locks::LockTable,
    pub(crate) near: NearState,
    pub(crate) part: ParticipantState,
    /// 2PC without its near (`txn::orphan`).
    pub(crate) orphans: crate::txn::orphan::Orphans,
    /// GETs waiting for prepared writes on their key (`txn::read_wait`).
    pub(crate) read_waits: crate::txn::read_wait::ReadWaits,
    pub(crate) cut: CutState,
    pub(crate) coordinator: CutCoordinator,
    pub(crate) blocking: BlockingState,
    pub(crate) versions: VersionsState,
    pub(crate) rt: RealTime,
    pub(crate) tree: Option<TreeRole>,
    /// Learning partitions and serving their pages (`catch_up`).
    pub(crate) catch_up: crate::catch_up::CatchUp,
    /// Deadlines, the expiry clock and expiries in flight (`expiry`).
    pub(crate) expiry: crate::expiry::ExpiryState,
    /// Clients' ACL alterations in flight (`acl::proposals`).
    pub(crate) acl: crate::acl::proposals::AclProposals,
    pub(crate) out: Outbox,
    /// Invariant: the summary of every record in this vnode's log, appended ones included
    /// (kept up to date in `step`), so that `image()` needs no replay.
    pub(crate) logged: LogSummary,
}

impl Vnode {
    /// A vnode with an empty log.
    pub fn new(cfg: VnodeConfig) -> Self {
        Self::recover(cfg, &[])
    }

    /// A vnode rebuilt from the durable records of its log (`txn::recovery`).
    pub fn recover(cfg: VnodeConfig, log: &[Record]) -> Self {
        let image = VnodeImage::empty(cfg.tree.as_ref().map(|_| &cfg.genesis));
        Self::recover_from(cfg, image, log)
    }

    /// A vnode rebuilt from a checkpoint's image and the durable records that follow it in its log.
    pub fn recover_from(cfg: VnodeConfig, mut image: VnodeImage, log: &[Record]) -> Self {
        for record in log {
            image.apply(record);
        }
        if cfg.tree.is_some() && image.summary.tree.is_none() {
            image.summary.tree =
                Some(crate::image::TreeImage { metadata: cfg.genesis.clone(), term: crate::alter::Term::ZERO });
        }
        // Log positions count from the vnode's first record ever, checkpoint or not.
        let mut v = Vnode {
            out: Outbox::from_log_len(image.summary.records),
            now_us: 0,
            incarnation: 0,
            booted: false,
            boot_lsn: Lsn(0),
            store: Store::default(),
            tallies: Default::default(),
            memory_full: false,
            locks: Default::default(),
            near: NearState::default(),
            part: ParticipantState::default(),
            orphans: Default::default(),
            read_waits: Default::default(),
            cut: CutState::default(),
            coordinator: CutCoordinator::default(),
            blocking: BlockingState::default(),
            versions: VersionsState::default(),
            rt: RealTime::default(),
            tree: None,
            catch_up: Default::default(),
            expiry: Default::default(),
            acl: Default::default(),
            logged: LogSummary::default(),
            cfg,
        };
        v.out.release_early = v.cfg.breaks.ack_before_durable;
        v.tree = v.cfg.tree.clone().map(|c| TreeRole {
            alter: crate::alter::AlterNode::new(c),
            finish_pending: None,
            started: false,
            placement: Default::default(),
        });
        v.rebuild(image);
        v
    }

    /// The cluster metadata as this vnode holds it (its leaf view), if it takes part in the tree.
    pub fn metadata(&self) -> Option<&crate::alter::Metadata> {
        self.tree.as_ref().map(|t| t.alter.metadata())
    }

    /// What replaying every record this vnode appended so far would rebuild: a checkpoint's image.
    pub fn image(&self) -> VnodeImage {
        // Every prepared branch is logged, read-only ones too (their read locks).
        VnodeImage {
            summary: self.logged.clone(),
            store: self.store.clone(),
            prepared: self.part.prepared.iter().map(|(b, p)| (b.clone(), p.rec.clone())).collect(),
            decided: self.near.decided.clone(),
            tombstones: match self.cfg.breaks.checkpoint_without_tombstones {
                false => self.part.tombstones.clone(),
                true => Default::default(),
            },
            learner_resets: self.catch_up.resets.clone(),
        }
    }

    /// The records appended so far (durable or not), counted from the vnode's first record ever
    /// (a checkpoint counts the records it stands for): the driver maps it to a log position.
    pub fn appended(&self) -> Lsn {
        self.out.appended()
    }

    /// Whether an output waits for the log to be durable (`Outbox::awaits_durable`).
    pub fn awaits_durable(&self) -> bool {
        self.out.awaits_durable()
    }

    pub fn id(&self) -> &VnodeId {
        &self.cfg.id
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Counts and digests of the store per partition, kept up to date (`tally.rs`).
    pub fn tallies(&self) -> &crate::tally::Tallies {
        &self.tallies
    }

    /// Whether the kept tallies equal those counted anew from the store (their invariant).
    pub fn tallies_agree(&self) -> bool {
        self.tallies == crate::tally::Tallies::of(&self.store, &self.cfg.placement)
    }

    pub fn config(&self) -> &VnodeConfig {
        &self.cfg
    }

    /// The cut this vnode colours its messages with, if any.
    pub fn running_cut(&self) -> Option<CutId> {
        self.cut.running_id()
    }

    /// Transactions prepared here and not finished (in doubt or waiting for a decision).
    pub fn prepared_count(&self) -> usize {
        self.part.prepared.len()
    }

    /// Replies held now for real-time safety (released when every vnode started their cut).
    pub fn held_replies(&self) -> usize {
        self.rt.held_count()
    }

    /// GETs waiting for a prepared write on their key (`txn::read_wait`).
    pub fn waiting_reads(&self) -> usize {
        self.read_waits.len()
    }

    /// Transactions this vnode coordinates that have not been decided.
    pub fn near_count(&self) -> usize {
        self.near.txs.len()
    }

    /// A digest of the whole in-memory state (not the config): two vnodes with the same digest
    /// behave the same from here on. The exhaustive explorer prunes repeated states with it.
    pub fn state_hash<H: std::hash::Hasher>(&self, h: &mut H) {
        use std::hash::Hash;
        (self.now_us, self.incarnation, self.booted, self.boot_lsn, &self.store, &self.locks).hash(h);
        (&self.near, &self.part, &self.read_waits, &self.cut, &self.coordinator, &self.blocking, &self.rt).hash(h);
        self.versions.hash(h);
        self.orphans.hash(h);
        self.catch_up.hash(h);
        self.out.hash(h);
    }

    pub fn step(&mut self, now_us: u64, input: Input) -> Vec<Output> {
        assert!(now_us >= self.now_us, "time went backwards: {now_us} < {}", self.now_us);
        self.now_us = now_us;
        match input {
            Input::Restarted => self.on_restarted(),
            Input::WalDurable(lsn) => self.on_durable(lsn),
            Input::Client { client, req, request } => self.on_client(client, req, request),
            Input::Timer(timer) => self.on_timer(timer),
            Input::Message(env) => self.on_message(env),
            Input::AlterPersisted { seq, bytes } => self.on_alter_persisted(seq, bytes),
            Input::MemoryLimit { reached } => self.memory_full = reached,
        }
        self.blocking_progress();
        self.versions_progress();
        let mut outputs = self.out.take();
        // This vnode's own expiry transactions are answered to itself (`expiry`).
        while outputs.iter().any(is_expiry_answer) {
            let (mine, others): (Vec<Output>, Vec<Output>) = outputs.into_iter().partition(is_expiry_answer);
            for o in mine {
                if let Output::Reply { req, response, .. } = o {
                    self.on_expiry_answer(req, response);
                }
            }
            outputs = others;
            outputs.extend(self.out.take());
        }
        for o in &outputs {
            if let Output::Append(record) = o {
                self.logged.apply(record);
            }
        }
        if let (Some(t), Some(logged)) = (self.tree.as_ref().filter(|t| t.started), self.logged.tree.as_ref()) {
            debug_assert!(
                t.alter.holds_as_logged(&logged.metadata),
                "{}: the log would rebuild other metadata",
                self.cfg.id
            );
        }
        outputs
    }

    fn on_restarted(&mut self) {
        self.boot_lsn = self.out.append(Record::Boot { incarnation: self.incarnation });
        self.after_recovery();
        self.expiry_tick_soon();
        if let Some(t) = self.logged.tree.clone() {
            self.tree.as_mut().expect("a tree role with a tree image").started = true;
            self.alter_input(crate::alter::AlterInput::Started { metadata: t.metadata, term: t.term });
        }
    }

    fn on_durable(&mut self, lsn: Lsn) {
        self.out.durable(lsn);
        if !self.booted && lsn >= self.boot_lsn && self.boot_lsn > Lsn(0) {
            self.booted = true;
        }
    }

    pub(crate) fn on_client(&mut self, client: ClientId, req: u64, request: Request) {
        if !self.booted || !self.tree_synced() {
            let response = Response::Unavailable { why: "TRYAGAIN vnode is starting" };
            self.out.promise(Output::Reply { client, req, response });
            return;
        }
        if !self.blocking_hold(client, req, &request) {
            self.dispatch_client(client, req, request);
        }
    }

    pub(crate) fn dispatch_client(&mut self, client: ClientId, req: u64, request: Request) {
        match request {
            Request::Get { key } => self.client_get(client, req, key),
            Request::Txn { reads, writes } => self.client_txn(client, req, reads, writes),
            Request::Cut => self.client_cut(client, req),
            Request::Scan { cursor, count } => self.client_scan(client, req, cursor, count),
            Request::SetUser { user, stored } => self.client_set_user(client, req, user, stored),
            Request::Elements { key, pick } => self.client_elements(client, req, key, pick),
        }
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::PrepareTimeout(tx) => self.near_prepare_timeout(tx),
            Timer::InDoubt(branch) => self.participant_in_doubt(branch),
            Timer::ReadTimeout(req) => self.near_read_timeout(req),
            Timer::CutPhase(cut, phase) => self.coordinator_timeout(cut, phase),
            Timer::CutPhaseResend(cut, phase) => self.coordinator_resend(cut, phase),
            Timer::HeldReplies(cut) => self.held_replies_timeout(cut),
            Timer::Alter(t) => self.alter_input(crate::alter::AlterInput::Timer(t)),
            Timer::CutOperator => {} // store vnodes run no operator
            Timer::BlockingPause(cut) => self.blocking_pause_expired(cut),
            Timer::CatchUp(p) => self.catch_up_timer(p),
            Timer::Expiry => self.expiry_tick(),
        }
    }

    /// Seed 000 §3.2, §4: a message coloured with an unknown cut starts that cut *before* the
    /// message is handled (unless the `color-after-handle` break is on).
    fn on_message(&mut self, env: Envelope) {
        if self.cfg.strategy == crate::config::CutStrategy::Versions {
            // Under seed 002 a colour is a transaction's side (`cut::versions`); it starts nothing.
            self.versions.incoming = env.cut;
            self.on_body(env.from, env.body);
            self.versions.incoming = None;
            return;
        }
        let colour = env.cut;
        let late = self.cfg.breaks.color_after_handle;
        if let (Some(cut), false) = (colour, late) {
            self.start_local_cut(cut);
        }
        self.on_body(env.from, env.body);
        if let (Some(cut), true) = (colour, late) {
            self.start_local_cut(cut);
        }
    }

    fn on_body(&mut self, from: VnodeId, body: Body) {
        match body {
            Body::Txn(msg) => self.on_txn(from, msg),
            Body::Cut(msg) => self.on_cut_msg(from, msg),
            Body::Alter(msg) => self.alter_input(crate::alter::AlterInput::Message { from, msg }),
            Body::Copy(msg) => self.on_copy(from, msg),
        }
    }

    fn on_txn(&mut self, from: VnodeId, msg: TxnMsg) {
        match msg {
            TxnMsg::Prepare { tx, reads, writes, one_phase, first_committer, downstream, after, epoch } => {
                let route = crate::txn::participant::Route { first_committer, downstream, after, epoch };
                self.on_prepare(from, tx, reads, writes, one_phase, route)
            }
            TxnMsg::PrepareAck { tx, role, result, tx_cut } => self.on_prepare_ack(from, tx, role, result, tx_cut),
            TxnMsg::Finish { tx, role, commit, tx_cut } => {
                self.on_finish(Branch { tx, upstream: from, role }, commit, tx_cut)
            }
            TxnMsg::StatusQuery { tx, one_phase } => self.on_status_query(from, tx, one_phase),
            TxnMsg::StatusReply { tx, status } => self.on_status_reply(tx, status),
            TxnMsg::Read { req, key } => self.on_read(from, req, key),
            TxnMsg::ReadRefused { req } => self.on_read_refused(req),
            TxnMsg::FinishBackup { tx, primary, tx_cut } => {
                self.on_finish(Branch { tx, upstream: primary, role: crate::ids::Role::Backup }, true, tx_cut)
            }
            TxnMsg::FinishAck { tx } => self.on_finish_ack(from, tx),
            TxnMsg::RolledBack { tx } => self.on_rolled_back(from, tx),
            TxnMsg::Recover { tx } => self.on_recover(from, tx),
            TxnMsg::Recovered { tx, status } => self.on_recovered(from, tx, status),
            TxnMsg::ReadReply { req, value, version, writer_cut, deadline_ms, now_ms } => {
                self.on_read_reply(req, value, version, writer_cut, (deadline_ms, now_ms))
            }
            TxnMsg::Scan { req, cursor, count } => self.on_scan(from, req, cursor, count),
            TxnMsg::ScanReply { req, keys, next, writer_cut } => self.on_scan_reply(req, keys, next, writer_cut),
            TxnMsg::ReadElements { req, key, pick } => self.on_read_elements(from, req, key, pick),
            TxnMsg::ElementsReply { req, value, version, writer_cut, deadline_ms, now_ms, elements, next } => {
                let response = Response::Elements { value, version, deadline_ms, now_ms, elements, next };
                self.on_elements_reply(req, writer_cut, response)
            }
        }
    }

    /// Sends a transaction message, coloured with the running cut (seed 000 §5).
    pub(crate) fn send_txn(&mut self, to: &VnodeId, msg: TxnMsg) {
        let env = self.txn_envelope(to, msg);
        self.out.promise(Output::Send(env));
    }

    /// Sends a transaction message that promises nothing about this vnode's own records
    /// (`Outbox::unheld`): it does not wait for them to be durable.
    pub(crate) fn send_txn_unheld(&mut self, to: &VnodeId, msg: TxnMsg) {
        let env = self.txn_envelope(to, msg);
        self.out.unheld(Output::Send(env));
    }

    /// Sends a transaction message that promises only what this vnode logged up to `upto`
    /// (`Outbox::promise_upto`).
    pub(crate) fn send_txn_upto(&mut self, upto: Lsn, to: &VnodeId, msg: TxnMsg) {
        let env = self.txn_envelope(to, msg);
        self.out.promise_upto(upto, Output::Send(env));
    }

    fn txn_envelope(&mut self, to: &VnodeId, msg: TxnMsg) -> Envelope {
        let uncoloured = self.cfg.breaks.uncoloured_responses && msg.is_response();
        let cut = match self.cfg.strategy {
            crate::config::CutStrategy::Versions => self.versions_colour(&msg),
            _ if uncoloured => None,
            _ => self.cut.running_id(),
        };
        Envelope { from: self.cfg.id.clone(), to: to.clone(), cut, body: Body::Txn(msg) }
    }

    /// Sends a cut-process message: never coloured, it is not a transaction message.
    pub(crate) fn send_cut(&mut self, to: &VnodeId, msg: CutMsg) {
        let env = Envelope { from: self.cfg.id.clone(), to: to.clone(), cut: None, body: Body::Cut(msg) };
        self.out.promise(Output::Send(env));
    }

    pub(crate) fn reply(&mut self, client: ClientId, req: u64, response: Response) {
        self.out.promise(Output::Reply { client, req, response });
    }

    pub(crate) fn set_timer(&mut self, timer: Timer, after_us: u64) {
        self.out.timer(Output::SetTimer { timer, at_us: self.now_us + after_us });
    }
}

fn is_expiry_answer(o: &Output) -> bool {
    matches!(o, Output::Reply { client, .. } if *client == crate::expiry::EXPIRY_CLIENT)
}
