//! The operator of the cut process on the cluster tree (DESIGN §6): it proposes the four phases of
//! cut C — START, STARTED, FINISH, END — one after another as alterations of the metadata key
//! `cut/<C>`, each only once the previous one was applied on every store vnode, and ends the cut
//! with `END:failed` as soon as one phase was not. The `END:ok` entry it leaves in the metadata is
//! the snapshot catalog.
//!
//! A pure state machine: the host hands it the clock and the outcomes of its proposals (the
//! alteration role's `Done`), and it answers with the next proposal or the end of the cut. The
//! server runs it inside a manager vnode (`alter::manager`), so a cut is started by sending that
//! manager `Request::Cut`; the simulator's `--tree` world runs the same managers.
//!
//! Invariant: a cut ends ok only if START, STARTED and FINISH were each applied by all the store
//! vnodes it was started over (`Process::leaves`: every one, or with failover those of live hosts,
//! `alter::cluster::cut_members`), in that order; at most one cut process runs per operator.

use crate::alter::AlterRecord;
use crate::cut::coordinator::CoordinatorPhase;
use crate::ids::{ClientRequest, CutId, VnodeId};
use std::fmt;

/// A phase of the cut process, as written into `cut/<id>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Start the local cut (log `CutStart`, colour messages after it).
    Start,
    /// Every store vnode started: release replies held for real-time safety.
    Started,
    /// Confirm once the local cut is over (`CutFinish` logged), with its verdict.
    Finish,
    /// Stop colouring; `ok` says whether the cut is a consistent snapshot.
    End { ok: bool },
}

impl Phase {
    pub const fn value(self) -> &'static str {
        match self {
            Phase::Start => "START",
            Phase::Started => "STARTED",
            Phase::Finish => "FINISH",
            Phase::End { ok: true } => "END:ok",
            Phase::End { ok: false } => "END:failed",
        }
    }

    /// Every phase, in the order a cut goes through them (an ending either way last).
    pub const ALL: [Phase; 5] =
        [Phase::Start, Phase::Started, Phase::Finish, Phase::End { ok: true }, Phase::End { ok: false }];

    /// The phase a metadata value names (`START`, or `START;view=…` for a cut over the live
    /// hosts, `CutScope`); `None` for anything else.
    pub fn parse(value: &[u8]) -> Option<Phase> {
        let phase = value.split(|b| *b == b';').next()?;
        Phase::ALL.into_iter().find(|p| p.value().as_bytes() == phase)
    }

    /// The view a phase's value names (`START;view=<view>`): the cluster as the cut was started
    /// over, which every store vnode compares with its copy of the metadata
    /// (`alter::cluster::cut_view`).
    pub fn view_of(value: &[u8]) -> Option<&str> {
        let value = std::str::from_utf8(value).ok()?;
        value.split_once(';')?.1.strip_prefix("view=")
    }

    /// The phase after this one when it was applied everywhere.
    pub fn next(self) -> Phase {
        match self {
            Phase::Start => Phase::Started,
            Phase::Started => Phase::Finish,
            Phase::Finish | Phase::End { .. } => Phase::End { ok: true },
        }
    }

    /// The phase to propose once this one (not an END) was answered: the next one if it was
    /// applied `everywhere`, else `END:failed` — one phase missed makes the cut no snapshot.
    pub fn after(self, everywhere: bool) -> Phase {
        assert!(!matches!(self, Phase::End { .. }), "nothing follows an END");
        match everywhere {
            true => self.next(),
            false => Phase::End { ok: false },
        }
    }

    /// Distinct per phase, so each proposal of a cut has its own number.
    fn code(self) -> u64 {
        match self {
            Phase::Start => 0,
            Phase::Started => 1,
            Phase::Finish => 2,
            Phase::End { ok: true } => 3,
            Phase::End { ok: false } => 4,
        }
    }

    /// The cut and phase an operator's proposal number stands for (`Proposal::n`); `None` for
    /// numbers the operator does not make (a manager's own proposals).
    pub fn of_proposal(n: u64) -> Option<CutPhase> {
        let phase = Phase::ALL.into_iter().find(|p| p.code() == n % 8)?;
        (n < 1 << 63).then_some(CutPhase { cut: CutId(n / 8), phase })
    }

    pub fn record(self, cut: CutId) -> AlterRecord {
        AlterRecord::set(format!("cut/{}", cut.0), self.value())
    }

    /// The record of this phase for a cut started over `view`: its value names the view, except
    /// an END's, which every vnode acts on whatever its view (the catalog reads `END:ok`).
    pub fn record_over(self, cut: CutId, view: Option<&str>) -> AlterRecord {
        match view.filter(|_| !matches!(self, Phase::End { .. })) {
            Some(view) => AlterRecord::set(format!("cut/{}", cut.0), format!("{};view={view}", self.value())),
            None => self.record(cut),
        }
    }
}

/// Which store vnodes a cut is started over, when not every one (failover on: those of the hosts
/// the metadata records alive, `alter::cluster::cut_members`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutScope {
    /// How many there are: what every phase must reach.
    pub leaves: u64,
    /// The cluster they were chosen from (`alter::cluster::cut_view`), written into every phase but
    /// the END. A store vnode whose copy of the metadata shows another view when it applies a
    /// phase refuses it: the hosts or the placement changed since the cut was started, so the
    /// vnodes that count may not be the ones chosen, and the cut fails cleanly. `None`: a cut
    /// over every store vnode, whose phases name no view.
    pub view: Option<String>,
    /// The hosts recorded dead in that view, whose vnodes the cut does not reach.
    pub left_out: Vec<String>,
}

impl CutScope {
    /// Every one of the cluster's `leaves` store vnodes.
    pub fn every(leaves: u64) -> Self {
        CutScope { leaves, view: None, left_out: vec![] }
    }
}

/// A phase of one cut: what an operator's proposal stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutPhase {
    pub cut: CutId,
    pub phase: Phase,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.value())
    }
}

/// A proposal the host must hand to its alteration role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    /// Unique per cut and phase (`cut * 8 + phase`): cut ids are never reused, so neither are these.
    pub n: u64,
    pub record: AlterRecord,
}

/// Why a cut process ended failed: what an operator reads to decide whether to retry or look
/// at a host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CutFailure {
    /// `phase`'s alteration was given up after its retries: its branch transactions kept failing
    /// or timing out.
    GivenUp { phase: Phase },
    /// `phase` was applied by `applied` of the `leaves` store vnodes: the others were unreachable,
    /// or their local cut failed.
    Partial { phase: Phase, applied: u64, leaves: u64 },
    /// The process ran past the operator's timeout while in `phase`.
    TimedOut { phase: Phase },
    /// An earlier operator left this cut unfinished (its manager stopped); it is ended failed.
    Orphaned,
    /// The cut coordinator's `phase` was answered with a failure by `vnode` (its local cut
    /// failed: it restarted during the cut, or refused the phase).
    Refused { phase: CoordinatorPhase, vnode: VnodeId },
    /// The cut coordinator's `phase` went unanswered by `waiting` store vnodes until its deadline.
    NoAnswer { phase: CoordinatorPhase, waiting: u64 },
}

impl fmt::Display for CutFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CutFailure::GivenUp { phase } => write!(f, "{phase} was given up after its retries"),
            CutFailure::Partial { phase, applied, leaves } => {
                write!(f, "{phase} reached {applied} of {leaves} store vnodes")
            }
            CutFailure::TimedOut { phase } => write!(f, "the cut timed out in {phase}"),
            CutFailure::Orphaned => f.write_str("an earlier cut process left it unfinished"),
            CutFailure::Refused { phase, vnode } => write!(f, "{vnode} failed {phase} (its local cut failed)"),
            CutFailure::NoAnswer { phase, waiting: 1 } => write!(f, "1 store vnode did not answer {phase} in time"),
            CutFailure::NoAnswer { phase, waiting } => {
                write!(f, "{waiting} store vnodes did not answer {phase} in time")
            }
        }
    }
}

/// How a cut process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub cut: CutId,
    pub ok: bool,
    /// Who asked for the cut: told how it ended.
    pub requester: ClientRequest,
    /// How long each phase took, in order (START first), including the END.
    pub phases_us: Vec<u64>,
    /// Invariant: `Some` exactly when `!ok`.
    pub failure: Option<CutFailure>,
    /// `CutScope::left_out` of the cut.
    pub left_out: Vec<String>,
}

#[derive(Debug)]
pub enum Step {
    Propose(Proposal),
    Ended(Ended),
}

#[derive(Clone, Debug)]
struct Process {
    cut: CutId,
    phase: Phase,
    n: u64,
    begun_us: u64,
    phase_begun_us: u64,
    phases_us: Vec<u64>,
    requester: ClientRequest,
    /// The store vnodes every phase must reach, fixed at the START: one that joins later (a host
    /// back) never started the cut and fails its FINISH; one that leaves (a host dies) misses the
    /// next phase. Either way a cut that runs across a change of hosts or placement fails.
    scope: CutScope,
    /// Why the process is ending failed, once it is.
    failure: Option<CutFailure>,
}

/// The operator: at most one cut process at a time.
#[derive(Clone, Debug)]
pub struct CutOperator {
    /// Every store vnode of the cluster: what a phase must reach unless the cut says fewer.
    leaves: u64,
    /// A cut not ended in this long is given up (`END:failed` is proposed once more).
    timeout_us: u64,
    process: Option<Process>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OperatorError {
    #[error("cut {0} is in progress; one cut runs at a time")]
    Busy(CutId),
}

impl CutOperator {
    pub fn new(leaves: u64, timeout_us: u64) -> Self {
        assert!(leaves > 0, "a cut needs store vnodes to reach");
        CutOperator { leaves, timeout_us, process: None }
    }

    pub fn running(&self) -> Option<CutId> {
        self.process.as_ref().map(|p| p.cut)
    }

    /// Starts cut `cut` (a new id, higher than any in the metadata) for `requester`, over the
    /// store vnodes of `scope` (`None`: every one).
    pub fn start(
        &mut self,
        now_us: u64,
        cut: CutId,
        requester: ClientRequest,
        scope: Option<CutScope>,
    ) -> Result<Proposal, OperatorError> {
        if let Some(p) = &self.process {
            return Err(OperatorError::Busy(p.cut));
        }
        let scope = scope.unwrap_or(CutScope::every(self.leaves));
        assert!(scope.leaves > 0 && scope.leaves <= self.leaves, "a cut reaches some of the cluster's store vnodes");
        Ok(self.begin(now_us, cut, Phase::Start, requester, scope, None))
    }

    /// The store vnodes every phase of the running cut must reach.
    pub fn running_leaves(&self) -> Option<u64> {
        self.process.as_ref().map(|p| p.scope.leaves)
    }

    /// Ends cut `orphan`, left unfinished in the metadata by an operator that died with its
    /// manager, with `END:failed` before any new cut, so the catalog never shows a cut stuck in a
    /// phase. (Store vnodes do not need it: a later cut's START ends an older local cut, and its
    /// STARTED releases replies held for older cuts.) `requester` is told how it ended.
    pub fn end_orphan(
        &mut self,
        now_us: u64,
        orphan: CutId,
        requester: ClientRequest,
    ) -> Result<Proposal, OperatorError> {
        if let Some(p) = &self.process {
            return Err(OperatorError::Busy(p.cut));
        }
        let scope = CutScope::every(self.leaves);
        Ok(self.begin(now_us, orphan, Phase::End { ok: false }, requester, scope, Some(CutFailure::Orphaned)))
    }

    /// A process for `cut` from `phase` on, and its first proposal.
    fn begin(
        &mut self,
        now_us: u64,
        cut: CutId,
        phase: Phase,
        requester: ClientRequest,
        scope: CutScope,
        failure: Option<CutFailure>,
    ) -> Proposal {
        let (n, begun_us, phase_begun_us, phases_us) = (0, now_us, now_us, vec![]);
        self.process = Some(Process { cut, phase, n, begun_us, phase_begun_us, phases_us, requester, scope, failure });
        self.propose(now_us, phase)
    }

    /// Proposal `n` ended: `ok` and applied by `applied` leaves. Unknown numbers are ignored (a
    /// proposal of a cut given up, or a manager's own).
    pub fn on_done(&mut self, now_us: u64, n: u64, ok: bool, applied: u64) -> Option<Step> {
        let p = self.process.as_mut().filter(|p| p.n == n)?;
        p.phases_us.push(now_us.saturating_sub(p.phase_begun_us));
        let everywhere = ok && applied >= p.scope.leaves;
        // Why, should this outcome fail the cut.
        let failure = match ok {
            false => CutFailure::GivenUp { phase: p.phase },
            true => CutFailure::Partial { phase: p.phase, applied, leaves: p.scope.leaves },
        };
        match p.phase {
            Phase::End { ok: ended_ok } => {
                let p = self.process.take().expect("a process");
                let ok = ok && ended_ok;
                let failure = (!ok).then(|| p.failure.unwrap_or(failure));
                let (cut, requester, phases_us, left_out) = (p.cut, p.requester, p.phases_us, p.scope.left_out);
                let ended = Ended { cut, ok, requester, phases_us, failure, left_out };
                assert!(!ended.ok || ended.phases_us.len() == 4, "an ok cut went through four phases");
                assert_eq!(ended.ok, ended.failure.is_none(), "a failed cut says why, an ok one does not");
                Some(Step::Ended(ended))
            }
            phase => {
                if !everywhere {
                    p.failure = Some(failure);
                }
                Some(Step::Propose(self.propose(now_us, phase.after(everywhere))))
            }
        }
    }

    /// The timeout check: a process older than the timeout, or whose proposal was lost with the
    /// manager that carried it, is ended with `END:failed` (an END already failing is given up).
    pub fn on_tick(&mut self, now_us: u64) -> Option<Step> {
        let p = self.process.as_ref()?;
        if now_us.saturating_sub(p.begun_us) < self.timeout_us {
            return None;
        }
        let timed_out = CutFailure::TimedOut { phase: p.phase };
        if p.phase == (Phase::End { ok: false }) || now_us.saturating_sub(p.begun_us) >= 2 * self.timeout_us {
            let p = self.process.take().expect("a process");
            let failure = Some(p.failure.unwrap_or(timed_out));
            let (cut, requester, phases_us, left_out) = (p.cut, p.requester, p.phases_us, p.scope.left_out);
            let ended = Ended { cut, ok: false, requester, phases_us, failure, left_out };
            return Some(Step::Ended(ended));
        }
        self.process.as_mut().expect("a process").failure = Some(timed_out);
        Some(Step::Propose(self.propose(now_us, Phase::End { ok: false })))
    }

    fn propose(&mut self, now_us: u64, phase: Phase) -> Proposal {
        let p = self.process.as_mut().expect("a cut process");
        (p.phase, p.phase_begun_us, p.n) = (phase, now_us, p.cut.0 * 8 + phase.code());
        Proposal { n: p.n, record: phase.record_over(p.cut, p.scope.view.as_deref()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ClientId;

    const WHO: ClientRequest = ClientRequest { client: ClientId(1), req: 1 };

    fn proposal(step: Option<Step>) -> Proposal {
        match step {
            Some(Step::Propose(p)) => p,
            other => panic!("expected a proposal, got {other:?}"),
        }
    }

    #[test]
    fn a_proposal_number_names_its_cut_and_phase() {
        let mut op = CutOperator::new(1, 5_000_000);
        let p = op.start(0, CutId(9), WHO, None).unwrap();
        assert_eq!(Phase::of_proposal(p.n), Some(CutPhase { cut: CutId(9), phase: Phase::Start }));
        let p = proposal(op.on_done(1, p.n, true, 1));
        assert_eq!(Phase::of_proposal(p.n), Some(CutPhase { cut: CutId(9), phase: Phase::Started }));
        assert_eq!(Phase::of_proposal((1 << 63) | 8), None, "a manager's own proposal");
    }

    #[test]
    fn an_orphaned_cut_is_ended_failed_and_its_requester_told() {
        let mut op = CutOperator::new(3, 5_000_000);
        let p = op.end_orphan(0, CutId(4), WHO).unwrap();
        assert_eq!(p.record, Phase::End { ok: false }.record(CutId(4)));
        assert_eq!(op.start(1, CutId(5), WHO, None), Err(OperatorError::Busy(CutId(4))), "one process at a time");
        match op.on_done(10, p.n, true, 3) {
            Some(Step::Ended(e)) => assert_eq!((e.cut, e.ok), (CutId(4), false)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cut_applied_everywhere_goes_through_four_phases_and_ends_ok() {
        let mut op = CutOperator::new(3, 5_000_000);
        let mut p = op.start(0, CutId(7), WHO, None).unwrap();
        for (t, phase) in [(10, "STARTED"), (20, "FINISH"), (30, "END:ok")] {
            p = proposal(op.on_done(t, p.n, true, 3));
            assert_eq!(p.record.value, phase.as_bytes());
        }
        match op.on_done(45, p.n, true, 3) {
            Some(Step::Ended(e)) => assert_eq!((e.cut, e.ok, e.phases_us), (CutId(7), true, vec![10, 10, 10, 15])),
            other => panic!("{other:?}"),
        }
        assert_eq!(op.running(), None);
    }

    #[test]
    fn a_phase_missing_one_leaf_ends_the_cut_failed() {
        let mut op = CutOperator::new(3, 5_000_000);
        let p = op.start(0, CutId(1), WHO, None).unwrap();
        let end = proposal(op.on_done(5, p.n, true, 2));
        assert_eq!(end.record.value, b"END:failed");
        let partial = CutFailure::Partial { phase: Phase::Start, applied: 2, leaves: 3 };
        match op.on_done(6, end.n, true, 3) {
            Some(Step::Ended(e)) => assert_eq!((e.ok, e.failure), (false, Some(partial.clone()))),
            other => panic!("{other:?}"),
        }
        assert_eq!(partial.to_string(), "START reached 2 of 3 store vnodes");
    }

    #[test]
    fn a_cut_over_the_live_hosts_names_their_view_in_every_phase_but_the_end() {
        let mut op = CutOperator::new(3, 5_000_000);
        let scope = CutScope { leaves: 2, view: Some("0badf00d.4".to_string()), left_out: vec!["h1".to_string()] };
        let mut p = op.start(0, CutId(2), WHO, Some(scope)).unwrap();
        assert_eq!(p.record.value, b"START;view=0badf00d.4");
        assert_eq!(
            (Phase::parse(&p.record.value), Phase::view_of(&p.record.value)),
            (Some(Phase::Start), Some("0badf00d.4"))
        );
        for phase in ["STARTED;view=0badf00d.4", "FINISH;view=0badf00d.4", "END:ok"] {
            p = proposal(op.on_done(1, p.n, true, 2));
            assert_eq!(p.record.value, phase.as_bytes(), "two of three store vnodes are enough");
        }
        match op.on_done(2, p.n, true, 2) {
            Some(Step::Ended(e)) => assert_eq!((e.ok, e.left_out), (true, vec!["h1".to_string()])),
            other => panic!("{other:?}"),
        }
        let scope = CutScope { leaves: 2, view: Some("v".to_string()), left_out: vec![] };
        let p = op.start(3, CutId(3), WHO, Some(scope)).unwrap();
        let end = proposal(op.on_done(4, p.n, true, 1));
        assert_eq!(end.record.value, b"END:failed", "one of the two missed START");
    }

    #[test]
    fn a_phase_given_up_ends_the_cut_failed_and_says_which() {
        let mut op = CutOperator::new(3, 5_000_000);
        let p = op.start(0, CutId(1), WHO, None).unwrap();
        let started = proposal(op.on_done(5, p.n, true, 3));
        let end = proposal(op.on_done(9, started.n, false, 0));
        match op.on_done(12, end.n, true, 3) {
            Some(Step::Ended(e)) => assert_eq!(e.failure, Some(CutFailure::GivenUp { phase: Phase::Started })),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_cut_runs_at_a_time_and_a_stuck_one_is_given_up() {
        let mut op = CutOperator::new(1, 100);
        op.start(0, CutId(1), WHO, None).unwrap();
        assert_eq!(op.start(1, CutId(2), WHO, None), Err(OperatorError::Busy(CutId(1))));
        assert!(op.on_tick(50).is_none());
        assert_eq!(proposal(op.on_tick(100)).record.value, b"END:failed");
        let timed_out = Some(CutFailure::TimedOut { phase: Phase::Start });
        assert!(matches!(op.on_tick(150), Some(Step::Ended(Ended { ok: false, failure, .. })) if failure == timed_out));
        assert!(op.start(200, CutId(2), WHO, None).is_ok());
    }

    #[test]
    fn answers_to_other_proposals_are_ignored() {
        let mut op = CutOperator::new(1, 100);
        let p = op.start(0, CutId(3), WHO, None).unwrap();
        assert!(op.on_done(1, p.n + 1, true, 1).is_none());
        assert_eq!(Phase::parse(b"END:ok"), Some(Phase::End { ok: true }));
        assert_eq!(Phase::parse(b"END"), None);
    }
}
