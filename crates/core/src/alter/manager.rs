//! A manager vnode (DESIGN §1): an inner vnode of the cluster tree that holds only its alteration
//! role — a replica of the metadata, relaying, ordering at the root, supervising children.
//!
//! It is driven through the same surface as a store vnode (`Input` in, `Output` out), so a driver
//! runs both kinds alike, and it keeps the same write-ahead contract through an `Outbox`: an
//! alteration, a clone or a promised root term is appended to the log, and every message after it
//! — a confirmation, a promise — leaves only once that record is durable.
//!
//! A manager may also run the cut operator (`cut::operator`): a client's `Request::Cut` starts a
//! cut process whose phases it proposes through its own alteration role, and the reply
//! (`Response::CutDone`) leaves once the END was applied.
//!
//! Invariant: `logged` is the fold of every record appended (`image.rs`), so `image()` is exactly
//! what a restart from the log would rebuild.

use super::{cluster, AlterConfig, AlterInput, AlterNode, AlterOutput, AlterSeq, ProposalId};
use crate::cut::operator::{CutOperator, CutPhase, Ended, Phase, Proposal, Step};
use crate::cut::tree_process::cut_of;
use crate::ids::{ClientId, ClientRequest, CutId, Lsn, VnodeId};
use crate::image::TreeImage;
use crate::io::{Input, Output, Request, Response, Timer};
use crate::message::{Body, CutMsg, Envelope};
use crate::outbox::Outbox;
use crate::record::Record;
use std::collections::VecDeque;

pub struct ManagerVnode {
    alter: AlterNode,
    out: Outbox,
    logged: TreeImage,
    now_us: u64,
    /// Set once started from the log (`Restarted`).
    started: bool,
    /// The cut operator, on a manager the host asked to run one (`with_operator`).
    operator: Option<CutOperator>,
    /// The highest cut this operator started: cut ids are never reused.
    last_cut: CutId,
    /// How this manager's own proposals ended, oldest first, for the driver's metrics and the
    /// simulator's checkers (`take_answered`); at most `ANSWERED_MAX`, the oldest dropped.
    answered: VecDeque<Answered>,
}

/// How one of this manager's own proposals ended (the alteration role's `Done`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    pub id: ProposalId,
    pub ok: bool,
    pub attempts: u32,
    /// Store vnodes that applied it, and where the root ordered it (`ZERO` when it failed).
    pub applied: u64,
    pub seq: AlterSeq,
}

/// Answers kept for a driver that does not take them.
const ANSWERED_MAX: usize = 1024;

/// How often a running cut process is checked for being stuck.
const OPERATOR_TICK_US: u64 = 500_000;

impl ManagerVnode {
    /// A manager rebuilt from a checkpoint's image (or the genesis metadata) and the records of
    /// its log that follow it.
    pub fn recover(cfg: AlterConfig, mut image: TreeImage, log: &[Record]) -> Self {
        for record in log {
            image.apply(record);
        }
        ManagerVnode {
            alter: AlterNode::new(cfg),
            out: Outbox::from_log_len(log.len() as u64),
            logged: image,
            now_us: 0,
            started: false,
            operator: None,
            last_cut: CutId(0),
            answered: VecDeque::new(),
        }
    }

    /// Lets this manager run cut processes over `leaves` store vnodes, each given up after
    /// `timeout_us`.
    pub fn with_operator(mut self, leaves: u64, timeout_us: u64) -> Self {
        self.operator = Some(CutOperator::new(leaves, timeout_us));
        self
    }

    /// The cut process this manager's operator is running, if any.
    pub fn running_cut(&self) -> Option<CutId> {
        self.operator.as_ref().and_then(|o| o.running())
    }

    /// How many store vnodes each phase of the running cut must reach.
    pub fn running_cut_leaves(&self) -> Option<u64> {
        self.operator.as_ref().and_then(|o| o.running_leaves())
    }

    pub fn id(&self) -> &VnodeId {
        self.alter.id()
    }

    pub fn alter(&self) -> &AlterNode {
        &self.alter
    }

    /// What replaying this manager's log so far rebuilds: a checkpoint's image.
    pub fn image(&self) -> TreeImage {
        self.logged.clone()
    }

    pub fn appended(&self) -> Lsn {
        self.out.appended()
    }

    /// How this manager's own proposals ended since the last call.
    pub fn take_answered(&mut self) -> Vec<Answered> {
        self.answered.drain(..).collect()
    }

    pub fn step(&mut self, now_us: u64, input: Input) -> Vec<Output> {
        assert!(now_us >= self.now_us, "time went backwards: {now_us} < {}", self.now_us);
        self.now_us = now_us;
        let alter_input = match input {
            Input::Restarted => {
                self.started = true;
                let TreeImage { metadata, term } = self.logged.clone();
                Some(AlterInput::Started { metadata, term })
            }
            Input::Message(Envelope { from, body: Body::Alter(msg), .. }) => Some(AlterInput::Message { from, msg }),
            Input::Message(_) => None, // not a tree message: nothing a manager takes part in
            Input::Timer(Timer::Alter(t)) => Some(AlterInput::Timer(t)),
            Input::Timer(Timer::CutOperator) => {
                self.operator_tick();
                None
            }
            Input::Timer(_) => None,
            Input::WalDurable(lsn) => {
                self.out.durable(lsn);
                None
            }
            Input::AlterPersisted { seq, bytes } => Some(AlterInput::Persisted { seq, bytes }),
            Input::MemoryLimit { .. } => None, // a manager holds no data
            Input::Client { client, req, request: Request::Cut } => {
                self.start_cut(ClientRequest { client, req });
                None
            }
            Input::Client { client, req, .. } => {
                self.reply(client, req, Response::Unavailable { why: "a manager vnode serves no data" });
                None
            }
        };
        if let Some(input) = alter_input {
            self.drive(input);
        }
        let outputs = self.out.take();
        for o in &outputs {
            if let Output::Append(record) = o {
                self.logged.apply(record);
            }
        }
        if self.started {
            debug_assert!(self.alter.holds_as_logged(&self.logged.metadata), "the log would rebuild other metadata");
        }
        outputs
    }

    /// Feeds the alteration role and carries out what it asks, until it asks nothing more.
    fn drive(&mut self, input: AlterInput) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            for o in self.alter.step(self.now_us, input) {
                inputs.extend(self.carry_out(o));
            }
        }
    }

    fn carry_out(&mut self, o: AlterOutput) -> Option<AlterInput> {
        match o {
            AlterOutput::Send { to, msg } => {
                let env = Envelope { from: self.alter.id().clone(), to, cut: None, body: Body::Alter(msg) };
                self.out.promise(Output::Send(env));
            }
            AlterOutput::Persist { seq, bytes } => drop(self.out.append(Record::Alteration { seq, bytes })),
            AlterOutput::PersistApplied { term, seq, record } => {
                self.out.append(Record::AlterApplied { term, seq, record });
            }
            AlterOutput::PersistClone { metadata } => drop(self.out.append(Record::AlterClone { metadata })),
            AlterOutput::PersistTerm { term } => drop(self.out.append(Record::AlterTerm { term })),
            // A manager holds no data: applying an alteration is keeping it, which is done.
            AlterOutput::Apply { seq, .. } => return Some(AlterInput::Applied { seq, ok: true }),
            // The operator's proposals move the cut process on; proposals a manager makes itself
            // (its children's states, hosts) are retried inside the alteration role.
            AlterOutput::Done { id, ok, attempts, applied, seq } => {
                assert_eq!(&id.initiator, self.alter.id(), "a manager is told only of its own proposals");
                let step = self.operator.as_mut().and_then(|o| o.on_done(self.now_us, id.n, ok, applied));
                if self.answered.len() == ANSWERED_MAX {
                    self.answered.pop_front();
                }
                self.answered.push_back(Answered { id, ok, attempts, applied, seq });
                return self.operator_step(step);
            }
            AlterOutput::StartSecondaryParent { id, of, metadata, term } => {
                self.out.timer(Output::StartSecondaryParent { id, of, metadata, term })
            }
            AlterOutput::StopSecondaryParent { id } => self.out.timer(Output::StopSecondaryParent { id }),
            AlterOutput::SetTimer { timer, at_us } => {
                self.out.timer(Output::SetTimer { timer: Timer::Alter(timer), at_us })
            }
        }
        None
    }
}

/// The cut operator's part.
impl ManagerVnode {
    fn reply(&mut self, client: ClientId, req: u64, response: Response) {
        self.out.promise(Output::Reply { client, req, response });
    }

    /// A cut the metadata shows begun and not ended that this operator does not run: its
    /// operator died with its manager (one operator runs at a time, on the root's host).
    fn unfinished_cut(&self) -> Option<CutId> {
        let running = self.running_cut();
        let phases = self.alter.metadata().records().filter_map(|(k, v)| Some((cut_of(k)?, Phase::parse(v)?)));
        phases.filter(|(c, p)| !matches!(p, Phase::End { .. }) && Some(*c) != running).map(|(c, _)| c).min()
    }

    /// A new cut id: above every cut in the metadata and every cut this operator started.
    fn next_cut(&self) -> CutId {
        let in_metadata = self.alter.metadata().records().filter_map(|(k, _)| cut_of(k));
        let highest = in_metadata.chain([self.last_cut]).max().unwrap_or(CutId(0));
        CutId(highest.0 + 1)
    }

    fn start_cut(&mut self, who: ClientRequest) {
        if self.operator.is_none() {
            return self.reply(who.client, who.req, Response::Unavailable { why: "this manager runs no cut operator" });
        }
        let cut = self.next_cut();
        let now = self.now_us;
        let orphan = self.unfinished_cut();
        let scope = match cluster::cut_members(self.alter.metadata()) {
            Ok(scope) => scope,
            Err(refused) => return self.reply(who.client, who.req, Response::Unavailable { why: refused.why() }),
        };
        let op = self.operator.as_mut().expect("an operator");
        let started = match orphan {
            Some(orphan) => op.end_orphan(now, orphan, who),
            None => op.start(now, cut, who, scope),
        };
        match started {
            Ok(proposal) => {
                self.last_cut = self.last_cut.max(orphan.unwrap_or(cut));
                self.out.timer(Output::SetTimer { timer: Timer::CutOperator, at_us: now + OPERATOR_TICK_US });
                let input = self.propose(proposal);
                self.drive(input);
            }
            Err(_) => self.reply(who.client, who.req, Response::Unavailable { why: "a cut is in progress" }),
        }
    }

    fn operator_tick(&mut self) {
        let Some(op) = self.operator.as_mut() else { return };
        let step = op.on_tick(self.now_us);
        if op.running().is_some() {
            let at_us = self.now_us + OPERATOR_TICK_US;
            self.out.timer(Output::SetTimer { timer: Timer::CutOperator, at_us });
        }
        if let Some(input) = self.operator_step(step) {
            self.drive(input);
        }
    }

    /// The operator's proposal, for the alteration role. STARTED is proposed only once START was
    /// applied on every store vnode (`CutOperator::on_done`), so with it go the notices that let
    /// them release their held replies now (`cut::tree_process`).
    fn propose(&mut self, p: Proposal) -> AlterInput {
        let notice_with = match self.alter.config().breaks.started_notice_at_start {
            false => Phase::Started,
            true => Phase::Start,
        };
        if let Some(CutPhase { cut, phase }) = Phase::of_proposal(p.n) {
            if phase == notice_with {
                self.notify_started_everywhere(cut);
            }
        }
        AlterInput::Propose { n: p.n, record: p.record }
    }

    /// `CutMsg::StartedEverywhere` to every store vnode of the placement the metadata holds. It
    /// promises nothing about this manager's log, so it leaves unheld.
    fn notify_started_everywhere(&mut self, cut: CutId) {
        let Some(placement) = cluster::placement(self.alter.metadata()) else { return };
        for to in placement.vnodes() {
            let body = Body::Cut(CutMsg::StartedEverywhere { cut });
            let env = Envelope { from: self.alter.id().clone(), to, cut: None, body };
            self.out.unheld(Output::Send(env));
        }
    }

    /// Carries out the operator's step: the next proposal, or the reply to whoever asked.
    fn operator_step(&mut self, step: Option<Step>) -> Option<AlterInput> {
        match step? {
            Step::Propose(p) => Some(self.propose(p)),
            Step::Ended(Ended { cut, ok, requester, phases_us, failure, left_out }) => {
                // The metadata as this manager holds it at the END: the snapshot's catalog entry.
                let metadata_md5 = Some(self.alter.metadata().md5());
                let done = Response::CutDone { cut, ok, phases_us, metadata_md5, failure, left_out };
                self.reply(requester.client, requester.req, done);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alter::AlterMsg;

    fn root_with_one_child() -> ManagerVnode {
        let root = VnodeId::new("manager1", "h1");
        let child = VnodeId::new("store0", "h2");
        let cfg = AlterConfig::new(root, vec![], vec![child]);
        ManagerVnode::recover(cfg, TreeImage::default(), &[])
    }

    #[test]
    fn a_root_promises_nothing_before_its_claimed_term_is_durable() {
        let mut m = root_with_one_child();
        let out = m.step(0, Input::Restarted);
        let term = out.iter().position(|o| matches!(o, Output::Append(Record::AlterTerm { .. })));
        let claim = out
            .iter()
            .position(|o| matches!(o, Output::Send(e) if matches!(e.body, Body::Alter(AlterMsg::Claim { .. }))));
        assert!(term.is_some(), "the root claims a term durably: {out:?}");
        assert!(claim.is_none(), "no claim leaves before the term record is durable: {out:?}");
        let out = m.step(1, Input::WalDurable(m.appended()));
        assert!(out
            .iter()
            .any(|o| matches!(o, Output::Send(e) if matches!(e.body, Body::Alter(AlterMsg::Claim { .. })))));
    }

    #[test]
    fn a_restarted_manager_keeps_the_term_its_log_holds() {
        let mut m = root_with_one_child();
        let out = m.step(0, Input::Restarted);
        let log: Vec<Record> =
            out.into_iter().filter_map(|o| if let Output::Append(r) = o { Some(r) } else { None }).collect();
        let cfg = AlterConfig::new(m.id().clone(), vec![], vec![VnodeId::new("store0", "h2")]);
        let again = ManagerVnode::recover(cfg, TreeImage::default(), &log);
        assert_eq!(again.image(), m.image());
        assert!(again.image().term >= crate::alter::Term(1));
    }
}
