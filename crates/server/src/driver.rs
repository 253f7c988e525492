//! The real driver of one vnode (DESIGN §2, §7): a thread that owns the state machine and its log
//! and carries out every `Output` — `Append` to the log, `Send` to the router, `Reply` to the
//! waiting client, `SetTimer` to its timer queue, and secondary parents to the host. Inputs come
//! from its command queue (envelopes, client requests), its timers and its log (durability,
//! read-back alterations). It adds no protocol logic: the same `step` the simulator drives.
//!
//! One turn of the loop: a batch of inputs (up to `DRAIN_MAX` queued commands, or the due timers),
//! then one sync of everything the batch appended (group commit), then the steps of what that
//! made durable. The write-ahead contract is the core's own (its outbox holds every send and reply
//! until the records before it are durable); the driver's part is to report durability only after
//! the sync.

use crate::acl::AclState;
use crate::clock;
use crate::memory::MemoryShare;
use crate::router::Router;
use crate::status::VnodeStatus;
use crate::storage::checkpoint::Image;
use crate::storage::log_writer::{CheckpointWritten, CutExportError, LogWriteError, LogWriter};
use crate::vnode::{HostEvent, VnodeCmd};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use waymark_core::alter::{Answered, ManagerVnode};
use waymark_core::{ClientRequest, Input, Lsn, Output, Response, Timer, Vnode, VnodeId};

/// Commands handled before the driver looks at its other inputs again.
const DRAIN_MAX: usize = 256;

/// A checkpoint is taken once the log grew this much since the last one, whatever the timer.
const CHECKPOINT_LOG_BYTES: u64 = 64 << 20;
/// Syncs in a row before an export or a checkpoint gives up (each sync's steps may append more).
const SETTLE_ROUNDS_MAX: usize = 8;
/// How long records nothing waits for may go unsynced (a backup's `TxCommitted`, say): they
/// join the next sync something does wait for, or are synced alone after this.
const SYNC_PUT_OFF_MAX: Duration = Duration::from_millis(5);

/// A state machine the driver can run: a store vnode or a manager vnode.
pub trait Machine: Send + 'static {
    fn step(&mut self, now_us: u64, input: Input) -> Vec<Output>;
    fn appended(&self) -> Lsn;
    /// Whether an output waits for the log to be durable; while none does, the driver may put
    /// off its sync for up to `SYNC_PUT_OFF_MAX`.
    fn awaits_durable(&self) -> bool {
        true
    }
    fn image(&self) -> Image;
    fn status(&self) -> VnodeStatus;
    /// How this vnode's own metadata proposals ended since the last call (managers only).
    fn take_answered(&mut self) -> Vec<Answered> {
        Vec::new()
    }
    /// How long each client transaction a blocking cut held back waited (store vnodes only).
    fn take_commit_stalls_us(&mut self) -> Vec<u64> {
        Vec::new()
    }
    /// How long each reply held for real-time safety waited (store vnodes only).
    fn take_hold_durations_us(&mut self) -> Vec<u64> {
        Vec::new()
    }
    /// What this vnode's data takes in memory (store vnodes only; `waymark_core::tally`).
    fn data_bytes(&self) -> u64 {
        0
    }
    /// The cluster metadata as this vnode holds it (its ACL users are read from it).
    fn metadata(&self) -> Option<&waymark_core::alter::Metadata> {
        None
    }
    /// What this vnode held as a copy at `cut` (store vnodes only; `waymark_core::cut::holdings`).
    fn holdings_at(&self, _cut: waymark_core::CutId) -> Option<waymark_core::cut::holdings::CutHoldings> {
        None
    }
}

impl Machine for Vnode {
    fn step(&mut self, now_us: u64, input: Input) -> Vec<Output> {
        Vnode::step(self, now_us, input)
    }
    fn metadata(&self) -> Option<&waymark_core::alter::Metadata> {
        Vnode::metadata(self)
    }
    fn appended(&self) -> Lsn {
        Vnode::appended(self)
    }
    fn awaits_durable(&self) -> bool {
        Vnode::awaits_durable(self)
    }
    fn image(&self) -> Image {
        Image::Store(Vnode::image(self))
    }
    fn status(&self) -> VnodeStatus {
        crate::status::store(self)
    }
    fn take_commit_stalls_us(&mut self) -> Vec<u64> {
        Vnode::take_commit_stalls_us(self)
    }
    fn take_hold_durations_us(&mut self) -> Vec<u64> {
        Vnode::take_hold_durations_us(self)
    }
    fn data_bytes(&self) -> u64 {
        self.tallies().total().bytes
    }
    fn holdings_at(&self, cut: waymark_core::CutId) -> Option<waymark_core::cut::holdings::CutHoldings> {
        Vnode::holdings_at(self, cut)
    }
}

impl Machine for ManagerVnode {
    fn step(&mut self, now_us: u64, input: Input) -> Vec<Output> {
        ManagerVnode::step(self, now_us, input)
    }
    fn appended(&self) -> Lsn {
        ManagerVnode::appended(self)
    }
    fn image(&self) -> Image {
        Image::Manager(ManagerVnode::image(self))
    }
    fn status(&self) -> VnodeStatus {
        crate::status::manager(self)
    }
    fn metadata(&self) -> Option<&waymark_core::alter::Metadata> {
        Some(self.alter().metadata())
    }
    fn take_answered(&mut self) -> Vec<Answered> {
        ManagerVnode::take_answered(self)
    }
}

pub struct VnodeHandle {
    pub id: VnodeId,
    pub tx: mpsc::Sender<VnodeCmd>,
    pub stop: CancellationToken,
    pub join: std::thread::JoinHandle<()>,
}

pub struct DriverSetup {
    pub id: VnodeId,
    pub log: LogWriter,
    /// Where the log's checkpoint helper threads say they finished.
    pub checkpoints: mpsc::UnboundedReceiver<CheckpointWritten>,
    pub router: Arc<Router>,
    pub host_events: mpsc::UnboundedSender<HostEvent>,
    pub checkpoint_every: Duration,
    pub queue_max: usize,
    pub stop: CancellationToken,
    /// This vnode's share of the host's memory gauge (`memory.rs`).
    pub memory: MemoryShare,
    /// The host's ACL users, republished from this vnode's metadata as it changes (`acl.rs`).
    pub acl: Arc<AclState>,
}

/// Starts the vnode's thread; it steps `Restarted` first.
pub fn spawn<M: Machine>(machine: M, setup: DriverSetup) -> std::io::Result<VnodeHandle> {
    let (tx, inbox) = mpsc::channel(setup.queue_max);
    setup.router.add_local(setup.id.clone(), tx.clone());
    let (id, stop) = (setup.id.clone(), setup.stop.clone());
    let name = format!("vnode {}", setup.id);
    let join = std::thread::Builder::new().name(name).spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        let mut d = Driver::new(machine, setup.id, setup.log, setup.router, setup.host_events, setup.memory);
        d.acl = Some(setup.acl);
        rt.block_on(d.run(inbox, setup.checkpoints, setup.checkpoint_every, setup.stop));
        d.router.remove_local(&d.id);
        // What the vnode appended last becomes durable before the thread ends.
        if let Err(error) = d.log.sync() {
            tracing::error!(vnode = %d.id, "the last sync of the log failed: {error}");
        }
    })?;
    Ok(VnodeHandle { id, tx, stop, join })
}

/// Where a timer sits in the driver's queue: when it is due, then the order it was set in (two
/// timers due in the same microsecond fire in the order they were set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TimerKey {
    at_us: u64,
    /// Invariant: unique in the queue (`Driver::timer_seq`, counted up at every timer set).
    seq: u64,
}

struct Driver<M> {
    machine: M,
    id: VnodeId,
    log: LogWriter,
    router: Arc<Router>,
    host: mpsc::UnboundedSender<HostEvent>,
    timers: BTreeMap<TimerKey, Timer>,
    timer_seq: u64,
    /// Where each client request in flight is answered.
    replies: HashMap<ClientRequest, oneshot::Sender<Response>>,
    checkpointed_at: Lsn,
    checkpoints: u64,
    failed: bool,
    /// Envelopes for other hosts were queued since the last `flush_peers`.
    to_peers: bool,
    memory: MemoryShare,
    /// Where this vnode's metadata is offered (`None` in tests that run a driver alone), and the
    /// version last offered.
    acl: Option<Arc<AclState>>,
    acl_offered: Option<waymark_core::alter::MetaVersion>,
}

impl<M: Machine> Driver<M> {
    fn new(
        machine: M,
        id: VnodeId,
        log: LogWriter,
        router: Arc<Router>,
        host: mpsc::UnboundedSender<HostEvent>,
        memory: MemoryShare,
    ) -> Self {
        let checkpointed_at = machine.appended();
        Driver {
            machine,
            id,
            log,
            router,
            host,
            timers: BTreeMap::new(),
            timer_seq: 0,
            replies: HashMap::new(),
            checkpointed_at,
            checkpoints: 0,
            failed: false,
            to_peers: false,
            memory,
            acl: None,
            acl_offered: None,
        }
    }

    async fn run(
        &mut self,
        mut inbox: mpsc::Receiver<VnodeCmd>,
        mut checkpoints: mpsc::UnboundedReceiver<CheckpointWritten>,
        checkpoint_every: Duration,
        stop: CancellationToken,
    ) {
        self.step(Input::Restarted);
        self.gauge_memory();
        self.sync_log();
        self.flush_peers();
        let mut checkpoint = tokio::time::interval(checkpoint_every);
        checkpoint.tick().await;
        while !self.failed {
            let next_timer = self.timers.keys().next().map(|k| clock::instant_of(k.at_us));
            let sleep = tokio::time::sleep_until(next_timer.unwrap_or_else(clock::far_future).into());
            // Steps of the last sync may have appended what something waits for: sync again
            // before waiting for anything. Else records nothing waits for wait a bounded while.
            let due = self.sync_due();
            let put_off = self.log.unsynced() && !due;
            let put_off_left = SYNC_PUT_OFF_MAX.saturating_sub(self.log.unsynced_for());
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = std::future::ready(()), if due => {}
                Some(written) = checkpoints.recv() => self.checkpoint_written(written),
                _ = sleep, if next_timer.is_some() => self.fire_timers(),
                cmd = inbox.recv() => match cmd {
                    Some(cmd) => self.on_commands(cmd, &mut inbox),
                    None => break,
                },
                _ = checkpoint.tick() => self.checkpoint(false),
                _ = tokio::time::sleep(put_off_left), if put_off => {}
            }
            self.flush_peers();
            if self.sync_due() {
                self.sync_log();
                self.flush_peers();
            }
            // Besides the timer: a log that grew this much is checkpointed now, so that the disk
            // holds a bounded log even on a node restarted more often than the timer's period
            // (the nemesis: a host killed every few seconds never checkpointed, and its log of
            // large APPEND records filled its disk by itself).
            if self.log.bytes_since_checkpoint() >= CHECKPOINT_LOG_BYTES {
                self.checkpoint(true);
            }
        }
    }

    fn on_commands(&mut self, first: VnodeCmd, inbox: &mut mpsc::Receiver<VnodeCmd>) {
        // The host's memory may have crossed its limit through another vnode's writes: this one
        // learns it before it evaluates anything (and publishes its own growth after).
        self.gauge_memory();
        self.on_command(first);
        for _ in 1..DRAIN_MAX {
            match inbox.try_recv() {
                Ok(cmd) => self.on_command(cmd),
                Err(_) => break,
            }
        }
        self.gauge_memory();
    }

    /// Counts this vnode's data in the host's gauge and tells the vnode when the host's memory
    /// crossed its limit since it was last told (`Input::MemoryLimit`).
    fn gauge_memory(&mut self) {
        if let Some(reached) = self.memory.update(self.machine.data_bytes()) {
            tracing::warn!(
                vnode = %self.id,
                used_bytes = self.memory.used_bytes(),
                "{}",
                if reached { "the host's data reached limits.maxmemory_bytes: writes are refused" } else { "the host's data is below limits.maxmemory_bytes again" }
            );
            self.step(Input::MemoryLimit { reached });
        }
    }

    fn on_command(&mut self, cmd: VnodeCmd) {
        match cmd {
            VnodeCmd::Deliver(env) => {
                if matches!(env.body, waymark_core::message::Body::Alter(_)) {
                    tracing::trace!(vnode = %self.id, from = %env.from, "in {:?}", env.body);
                }
                self.step(Input::Message(env))
            }
            VnodeCmd::Client { client, req, request, reply } => {
                self.replies.insert(ClientRequest { client, req }, reply);
                self.step(Input::Client { client, req, request });
            }
            VnodeCmd::Export { cut, from, dest, reply } => {
                // What was appended before the request is exported: synced, and the vnode told.
                let exported = match self.settle_log() {
                    true => self.log.export(cut, from, &dest),
                    false => Err(CutExportError::Unsettled { vnode: self.id.clone() }),
                };
                let _ = reply.send(exported);
            }
            VnodeCmd::HoldingsAt { cut, reply } => {
                let _ = reply.send(self.machine.holdings_at(cut));
            }
            VnodeCmd::Inspect(tx) => {
                let mut status = self.machine.status();
                status.checkpoints = self.checkpoints;
                let _ = tx.send(status);
            }
        }
    }

    /// A sync is due when records are unsynced and something waits for them — an output of the
    /// vnode, an alteration to read back, a cut's end — or the oldest has waited
    /// `SYNC_PUT_OFF_MAX`. Putting off the others saves a sync whenever one that is waited for
    /// comes first: on two cores shared by three nodes, each costs ~60 µs of CPU.
    fn sync_due(&self) -> bool {
        self.log.unsynced()
            && (self.machine.awaits_durable()
                || self.log.sync_wanted_by_log()
                || self.log.unsynced_for() >= SYNC_PUT_OFF_MAX)
    }

    /// Group commit: one sync for everything appended since the last, then the steps of what it
    /// made durable (durability first, then the alterations read back, in the order appended).
    fn sync_log(&mut self) {
        if let Err(error) = self.log.sync() {
            return self.log_failed(error);
        }
        let Some(progress) = self.log.take_progress() else { return };
        self.step(Input::WalDurable(progress.durable));
        for r in progress.read_back {
            self.step(Input::AlterPersisted { seq: r.seq, bytes: r.bytes });
        }
    }

    /// Syncs until nothing appended is unsynced and the vnode was told of every sync (the steps
    /// of one sync may append more), at most `SETTLE_ROUNDS_MAX` times; true if it settled. What
    /// the log writer does with the whole log (an export, a checkpoint) needs it settled: a sync
    /// the vnode is not told of leaves its outputs waiting (`LogWriter::export`).
    fn settle_log(&mut self) -> bool {
        for _ in 0..SETTLE_ROUNDS_MAX {
            if self.failed {
                return false;
            }
            if !self.log.unsynced() {
                return true;
            }
            self.sync_log();
        }
        !self.failed && !self.log.unsynced()
    }

    /// A node with a broken disk stops rather than lie.
    fn log_failed(&mut self, error: LogWriteError) {
        if self.failed {
            return;
        }
        tracing::error!(vnode = %self.id, "write-ahead log failed, stopping: {error}");
        self.failed = true;
        let _ = self.host.send(HostEvent::Fatal { vnode: self.id.clone(), error });
    }

    fn checkpoint_written(&mut self, written: CheckpointWritten) {
        match self.log.truncate(&written) {
            Ok(segments_removed) => {
                self.checkpoints += 1;
                crate::telemetry::checkpointed(written.bytes, written.took_ms);
                let (bytes, took_ms) = (written.bytes, written.took_ms);
                tracing::debug!(vnode = %self.id, bytes, took_ms, segments_removed, "checkpoint written");
            }
            Err(error) => self.log_failed(error),
        }
    }

    fn fire_timers(&mut self) {
        let now = clock::now_us();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().at_us > now {
                break;
            }
            let timer = entry.remove();
            self.step(Input::Timer(timer));
        }
    }

    /// A checkpoint when the log grew since the last one (or, `forced`, when its bytes since the
    /// last one are too many, records appended or not: a node restarted on a long log): the image
    /// is taken in this step, so it stands for exactly the records appended so far; a helper
    /// thread of the log writes it.
    fn checkpoint(&mut self, forced: bool) {
        if !self.settle_log() {
            return; // the next tick tries again
        }
        let appended = self.machine.appended();
        if appended == self.checkpointed_at && !forced {
            return;
        }
        self.checkpointed_at = appended;
        let begun = std::time::Instant::now();
        let image = self.machine.image();
        // The vnode serves nothing while it copies its image: say so when that is noticeable.
        let took_ms = begun.elapsed().as_secs_f64() * 1000.0;
        if took_ms >= 10.0 {
            tracing::info!(vnode = %self.id, took_ms, "a checkpoint's image took long to take");
        }
        if let Err(error) = self.log.checkpoint(image) {
            self.log_failed(error);
        }
    }

    fn step(&mut self, input: Input) {
        let outputs = self.machine.step(clock::now_us(), input);
        for stall_us in self.machine.take_commit_stalls_us() {
            crate::telemetry::blocking_stall(stall_us);
        }
        for held_us in self.machine.take_hold_durations_us() {
            crate::telemetry::reply_held(held_us);
        }
        for a in self.machine.take_answered() {
            crate::telemetry::alteration_answered(a.ok, a.attempts);
        }
        // Before the replies go out, so what a reply promises is as up to date as this vnode.
        if let (Some(acl), Some(m)) = (&self.acl, self.machine.metadata()) {
            if self.acl_offered != Some(m.version()) {
                self.acl_offered = Some(m.version());
                acl.offer(m);
            }
        }
        for o in outputs {
            self.to_peers |= self.carry_out(o);
        }
    }

    /// What the steps since the last call sent to other hosts leaves together, written from this
    /// thread: before a sync (which may take milliseconds) and after the steps it released.
    fn flush_peers(&mut self) {
        if std::mem::take(&mut self.to_peers) {
            self.router.flush();
        }
    }

    /// Returns whether an envelope was queued for another host.
    fn carry_out(&mut self, o: Output) -> bool {
        match o {
            Output::Append(record) => {
                if let Err(error) = self.log.append(&record) {
                    self.log_failed(error);
                }
            }
            Output::Send(env) => {
                if matches!(env.body, waymark_core::message::Body::Alter(_)) {
                    tracing::trace!(vnode = %self.id, to = %env.to, "out {:?}", env.body);
                }
                return self.router.queue(env);
            }
            Output::Reply { client, req, response } => {
                if let Some(tx) = self.replies.remove(&ClientRequest { client, req }) {
                    let _ = tx.send(response);
                }
            }
            Output::SetTimer { timer, at_us } => {
                self.timer_seq += 1;
                self.timers.insert(TimerKey { at_us, seq: self.timer_seq }, timer);
            }
            Output::StartSecondaryParent { id, of, metadata, term } => {
                let _ = self.host.send(HostEvent::StartSecondary { id, of, metadata, term });
            }
            Output::StopSecondaryParent { id } => {
                let _ = self.host.send(HostEvent::StopSecondary { id });
            }
        }
        false
    }
}
