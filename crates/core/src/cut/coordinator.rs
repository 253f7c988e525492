//! The cut process (DESIGN §6: START → STARTED → FINISH → END), driven for now by one coordinator
//! vnode that broadcasts each phase and collects confirmations. The tree issue moves it onto
//! branch-confirmed alterations. The same coordinator runs the `blocking` comparison strategy
//! (PAUSE → DRAIN → END) and the `versions` one (seed 002: START with `snp_version` reports →
//! MAP → STOP with late transactions → SKIP → END; each phase carries what the previous gathered).
//!
//! Invariant: a cut is declared successful (`CutEnd{ok: true}`, `CutDone{ok: true}`) only after
//! every store vnode answered `Finished{ok: true}`, i.e. wrote its `CutFinish`.
//! A phase message lost on a broken connection or a healed partition is sent again, every tenth of
//! the phase deadline, to the vnodes that have not confirmed it: each phase is idempotent at the
//! vnode, and FIFO links keep a resent phase ahead of the `End` that follows it. Before, one lost
//! `Start` kept the cut — and every later one — waiting for the whole deadline.
//! Invariant: cut ids increase across coordinator restarts (`CutBegin` is durable before `Start`
//! leaves, and recovery resumes after the highest `CutBegin`).

use crate::config::CutStrategy;
use crate::cut::operator::CutFailure;
use crate::cut::versions::SnapshotVersions;
use crate::ids::{ClientId, CutId, TxId, VnodeId};
use crate::io::{Response, Timer};
use crate::message::CutMsg;
use crate::record::Record;
use crate::vnode::Vnode;
use std::collections::BTreeSet;
use CoordinatorPhase as Phase;

#[derive(Debug, Default, Hash)]
pub struct CutCoordinator {
    last_cut: u64,
    /// A `CutBegin` without its `CutEnd` in the log.
    unfinished: Option<CutId>,
    current: Option<Process>,
}

#[derive(Debug, Hash)]
struct Process {
    cut: CutId,
    phase: CoordinatorPhase,
    /// When `phase` was broadcast, and how long each earlier phase took (reported in `CutDone`).
    phase_begun_us: u64,
    phases_us: Vec<u64>,
    /// Invariant: the vnodes that have not confirmed `phase` yet.
    waiting: BTreeSet<VnodeId>,
    client: ClientId,
    req: u64,
    /// `versions`: the `snp_version`s reported in phase 1 (sent in phase 2).
    map: SnapshotVersions,
    /// `versions`: the late transactions handed over in phase 3 (sent back to be logged).
    skip: BTreeSet<TxId>,
}

/// A phase of the coordinator's cut process, named as its message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoordinatorPhase {
    Start,
    Started,
    Finish,
    Pause,
    Drain,
    Check,
    VersionsStart,
    VersionsMap,
    VersionsStop,
    VersionsSkip,
}

impl std::fmt::Display for CoordinatorPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Phase::Start => "START",
            Phase::Started => "STARTED",
            Phase::Finish => "FINISH",
            Phase::Pause => "PAUSE",
            Phase::Drain => "DRAIN",
            Phase::Check => "CHECK",
            Phase::VersionsStart => "versions phase 1 (snp_version)",
            Phase::VersionsMap => "versions phase 2 (the map)",
            Phase::VersionsStop => "versions phase 3 (late transactions)",
            Phase::VersionsSkip => "versions phase 3 (the skip set)",
        };
        f.write_str(name)
    }
}

impl CoordinatorPhase {
    fn code(self) -> u8 {
        self as u8
    }

    fn first(strategy: CutStrategy) -> Phase {
        match strategy {
            CutStrategy::Consistent => Phase::Start,
            CutStrategy::Blocking => Phase::Pause,
            CutStrategy::Versions => Phase::VersionsStart,
        }
    }

    fn next(self) -> Option<Phase> {
        match self {
            Phase::Start => Some(Phase::Started),
            Phase::Started => Some(Phase::Finish),
            Phase::Pause => Some(Phase::Drain),
            Phase::Drain => Some(Phase::Check),
            Phase::VersionsStart => Some(Phase::VersionsMap),
            Phase::VersionsMap => Some(Phase::VersionsStop),
            Phase::VersionsStop => Some(Phase::VersionsSkip),
            Phase::Finish | Phase::Check | Phase::VersionsSkip => None,
        }
    }

    fn message(self, p: &Process) -> CutMsg {
        let cut = p.cut;
        match self {
            Phase::Start => CutMsg::Start { cut },
            Phase::Started => CutMsg::Started { cut },
            Phase::Finish => CutMsg::Finish { cut },
            Phase::Pause => CutMsg::Pause { cut },
            Phase::Drain => CutMsg::Drain { cut },
            Phase::Check => CutMsg::Check { cut },
            Phase::VersionsStart => CutMsg::VersionsStart { cut },
            Phase::VersionsMap => CutMsg::VersionsMap { cut, map: p.map.clone() },
            Phase::VersionsStop => CutMsg::VersionsStop { cut },
            Phase::VersionsSkip => CutMsg::VersionsSkip { cut, skip: p.skip.clone() },
        }
    }
}

impl CutCoordinator {
    /// Recovery: resume after the highest `CutBegin`, and end one that has no `CutEnd`.
    pub(crate) fn rebuild(&mut self, last_cut: u64, unfinished: Option<CutId>) {
        self.last_cut = last_cut;
        self.unfinished = unfinished;
    }

    pub(crate) fn unfinished(&self) -> Option<CutId> {
        self.unfinished
    }

    pub fn running(&self) -> Option<CutId> {
        self.current.as_ref().map(|p| p.cut)
    }
}

impl Vnode {
    pub(crate) fn client_cut(&mut self, client: ClientId, req: u64) {
        if self.cfg.id != self.cfg.cut_coordinator {
            return self.reply(client, req, Response::Unavailable { why: "not the cut coordinator" });
        }
        if self.coordinator.current.is_some() {
            return self.reply(client, req, Response::Unavailable { why: "a cut is already running" });
        }
        self.coordinator.last_cut += 1;
        let cut = CutId(self.coordinator.last_cut);
        self.out.append(Record::CutBegin { cut });
        self.coordinator.unfinished = Some(cut);
        let phase = Phase::first(self.cfg.strategy);
        let waiting = BTreeSet::new();
        let (map, skip) = (SnapshotVersions::default(), BTreeSet::new());
        let (phase_begun_us, phases_us) = (self.now_us, vec![]);
        self.coordinator.current =
            Some(Process { cut, phase, phase_begun_us, phases_us, waiting, client, req, map, skip });
        self.broadcast_phase(cut, phase);
    }

    fn broadcast_phase(&mut self, cut: CutId, phase: Phase) {
        let all = self.cfg.placement.vnodes();
        let now_us = self.now_us;
        let p = self.coordinator.current.as_mut().expect("a running process");
        if p.phase != phase {
            p.phases_us.push(now_us.saturating_sub(p.phase_begun_us));
        }
        (p.phase, p.phase_begun_us) = (phase, now_us);
        p.waiting = all.iter().cloned().collect();
        let message = phase.message(p);
        for v in &all {
            self.send_cut(v, message.clone());
        }
        self.set_timer(Timer::CutPhase(cut, phase.code()), self.cfg.timeouts.cut_phase_timeout_us);
        self.set_timer(Timer::CutPhaseResend(cut, phase.code()), self.cut_phase_resend_us());
    }

    fn cut_phase_resend_us(&self) -> u64 {
        (self.cfg.timeouts.cut_phase_timeout_us / 10).max(1)
    }

    /// Sends the running phase again to every vnode that has not confirmed it.
    pub(crate) fn coordinator_resend(&mut self, cut: CutId, phase: u8) {
        let Some(p) = self.coordinator.current.as_ref().filter(|p| p.cut == cut && p.phase.code() == phase) else {
            return;
        };
        let (message, waiting) = (p.phase.message(p), p.waiting.clone());
        for v in &waiting {
            self.send_cut(v, message.clone());
        }
        self.set_timer(Timer::CutPhaseResend(cut, phase), self.cut_phase_resend_us());
    }

    /// A vnode confirmed a phase (`ok == false`: its local cut failed).
    fn coordinator_confirm(&mut self, from: VnodeId, cut: CutId, phase: Phase, ok: bool) {
        let Some(p) = self.coordinator.current.as_mut() else { return };
        if p.cut != cut || p.phase != phase {
            return;
        }
        if !ok {
            return self.coordinator_end(Some(CutFailure::Refused { phase, vnode: from }));
        }
        p.waiting.remove(&from);
        if !p.waiting.is_empty() {
            return;
        }
        match phase.next() {
            Some(next) => self.broadcast_phase(cut, next),
            None => self.coordinator_end(None),
        }
    }

    pub(crate) fn coordinator_timeout(&mut self, cut: CutId, phase: u8) {
        let current = self.coordinator.current.as_ref().filter(|p| p.cut == cut && p.phase.code() == phase);
        if let Some(p) = current {
            let failure = CutFailure::NoAnswer { phase: p.phase, waiting: p.waiting.len() as u64 };
            self.coordinator_end(Some(failure));
        }
    }

    /// Ends the running process: ok without a `failure`.
    fn coordinator_end(&mut self, failure: Option<CutFailure>) {
        let ok = failure.is_none();
        let mut p = self.coordinator.current.take().expect("a running process");
        p.phases_us.push(self.now_us.saturating_sub(p.phase_begun_us));
        // Invariant (module): declared successful only after every vnode confirmed the last phase.
        assert!(!ok || (p.waiting.is_empty() && p.phase.next().is_none()), "cut {:?} declared ok early", p.cut);
        self.out.append(Record::CutEnd { cut: p.cut, ok });
        self.coordinator.unfinished = None;
        for v in self.cfg.placement.vnodes() {
            self.send_cut(&v, CutMsg::End { cut: p.cut, ok });
        }
        self.reply(
            p.client,
            p.req,
            Response::CutDone { cut: p.cut, ok, phases_us: p.phases_us, metadata_md5: None, failure, left_out: vec![] },
        );
    }

    /// The coordinator crashed during `cut`: it can never be declared successful.
    pub(crate) fn coordinator_end_abandoned(&mut self, cut: CutId) {
        self.out.append(Record::CutEnd { cut, ok: false });
        self.coordinator.unfinished = None;
        for v in self.cfg.placement.vnodes() {
            self.send_cut(&v, CutMsg::End { cut, ok: false });
        }
    }

    pub(crate) fn on_cut_msg(&mut self, from: VnodeId, msg: CutMsg) {
        match msg {
            CutMsg::Start { cut } => {
                self.start_local_cut(cut);
                // Whoever appended it — this Start or a coloured message — `CutStart` is durable
                // before the acknowledgement leaves.
                self.out.hold_all();
                self.send_cut(&from, CutMsg::StartAck { cut });
            }
            CutMsg::Started { cut } => {
                if !self.rt.refused(cut) {
                    self.cut_started_everywhere(cut);
                    self.send_cut(&from, CutMsg::StartedAck { cut });
                }
            }
            CutMsg::Finish { cut } => self.on_cut_finish_asked(from, cut),
            CutMsg::End { cut, .. } => {
                self.on_cut_end(cut);
                self.versions_end(cut);
                self.cut_started_everywhere(cut);
                self.blocking_resume(cut);
            }
            CutMsg::Pause { cut } => self.blocking_pause(from, cut),
            CutMsg::Drain { cut } => self.blocking_drain(from, cut),
            CutMsg::Check { cut } => self.blocking_check(from, cut),
            CutMsg::StartAck { cut } => self.coordinator_confirm(from, cut, Phase::Start, true),
            CutMsg::StartedAck { cut } => self.coordinator_confirm(from, cut, Phase::Started, true),
            CutMsg::Finished { cut, ok } => self.coordinator_confirm(from, cut, Phase::Finish, ok),
            CutMsg::Paused { cut } => self.coordinator_confirm(from, cut, Phase::Pause, true),
            CutMsg::Drained { cut } => self.coordinator_confirm(from, cut, Phase::Drain, true),
            CutMsg::Checked { cut, paused } => self.coordinator_confirm(from, cut, Phase::Check, paused),
            CutMsg::VersionsStart { cut } => self.versions_start(from, cut),
            CutMsg::VersionsMap { cut, map } => self.versions_map(from, cut, map),
            CutMsg::VersionsStop { cut } => self.versions_stop(from, cut),
            CutMsg::VersionsSkip { cut, skip } => self.versions_skip(from, cut, skip),
            CutMsg::VersionsReport { cut, snp } => {
                if let (Some(snp), Some(p)) = (snp, self.coordinator.current.as_mut().filter(|p| p.cut == cut)) {
                    if p.phase == Phase::VersionsStart {
                        p.map.0.insert(from.clone(), snp);
                    }
                }
                self.coordinator_confirm(from, cut, Phase::VersionsStart, snp.is_some())
            }
            CutMsg::VersionsMapLogged { cut, ok } => self.coordinator_confirm(from, cut, Phase::VersionsMap, ok),
            CutMsg::VersionsLate { cut, late } => {
                if let (Some(late), Some(p)) = (&late, self.coordinator.current.as_mut().filter(|p| p.cut == cut)) {
                    if p.phase == Phase::VersionsStop {
                        p.skip.extend(late.iter().cloned());
                    }
                }
                self.coordinator_confirm(from, cut, Phase::VersionsStop, late.is_some())
            }
            CutMsg::VersionsSkipLogged { cut, ok } => self.coordinator_confirm(from, cut, Phase::VersionsSkip, ok),
            CutMsg::StartedEverywhere { cut } => self.on_started_everywhere_notice(cut),
        }
    }
}
