//! One vnode's part in alterations: initiator, relay up the chain, orderer (at the root), and
//! branch of the confirmation tree. Sans-IO like the rest of the core.

use super::failover::Election;
use super::metadata::{md5_of, AlterRecord, Applied, Md5Sum, Metadata, View};
use super::root::Lead;
use crate::ids::VnodeId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Proposals the root holds waiting to be ordered; beyond this it refuses new ones.
pub const QUEUE_MAX: usize = 1_024;

#[derive(Clone, Debug)]
pub struct AlterConfig {
    pub id: VnodeId,
    /// The primary parent (empty at the root). A secondary parent, started by an assisting child
    /// when the primary dies, is learnt at run time and follows it in the queue.
    pub parents: Vec<VnodeId>,
    /// The primary parent's children in election priority order, this vnode among them.
    pub siblings: Vec<VnodeId>,
    /// Whether this vnode may replace a dead parent with a secondary one (the root's children
    /// too: a secondary root must then win a term, `root.rs`).
    pub failover: bool,
    /// Set on a secondary parent: the primary parent it stands in for.
    pub secondary_of: Option<VnodeId>,
    /// Whether this vnode proposes its children's state changes (`state/<child>`) itself.
    pub reports: bool,
    pub children: Vec<VnodeId>,
    /// How long this vnode waits for its branch (children) to confirm; grows with subtree height.
    pub confirm_timeout_us: u64,
    /// How long an initiator waits for an outcome before it retries.
    pub propose_timeout_us: u64,
    pub retries_max: u32,
    pub retry_backoff_us: u64,
    pub heartbeat_interval_us: u64,
    /// A parent or child not heard from for this long is not working.
    pub heartbeat_timeout_us: u64,
    /// Keeps only what a store vnode needs (`View::Leaf`). Never on a voter of the root: a root's
    /// catch-up needs whole copies.
    pub leaf_view: bool,
    /// Only `skip_md5` and `root_without_quorum` apply here (the simulator's proof that the md5
    /// check and the root's majority matter).
    pub breaks: crate::Breaks,
}

impl AlterConfig {
    /// A vnode at this place in the tree with default timing (20 ms heartbeats, 60 ms timeout,
    /// 10 ms per branch, 50 ms per proposal attempt, 2 retries), no failover, whole metadata.
    pub fn new(id: VnodeId, parents: Vec<VnodeId>, children: Vec<VnodeId>) -> Self {
        AlterConfig {
            id,
            parents,
            siblings: vec![],
            failover: false,
            secondary_of: None,
            reports: false,
            children,
            confirm_timeout_us: 10_000,
            propose_timeout_us: 50_000,
            retries_max: 2,
            retry_backoff_us: 1_000,
            heartbeat_interval_us: 20_000,
            heartbeat_timeout_us: 60_000,
            leaf_view: false,
            breaks: Default::default(),
        }
    }

    /// The configuration of a secondary parent `id` standing in for the vnode this configures:
    /// the same place in the tree, no failover of its own.
    pub fn secondary(&self, id: VnodeId) -> AlterConfig {
        AlterConfig { id, secondary_of: Some(self.id.clone()), failover: false, ..self.clone() }
    }

    /// The parent queue in priority order: the primary parent, then the secondary parent each
    /// sibling's host would start as assisting child, in election order.
    pub fn parent_queue(&self) -> Vec<VnodeId> {
        let Some(primary) = self.parents.first() else { return vec![] };
        let mut queue = vec![primary.clone()];
        for s in &self.siblings {
            let secondary = AlterNode::secondary_name(primary, &s.host);
            if !queue.contains(&secondary) {
                queue.push(secondary);
            }
        }
        queue
    }
}

pub use super::metadata::ProposalId;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AlterMsg {
    Propose {
        id: ProposalId,
        record: AlterRecord,
    },
    /// Alteration `(term, seq)`, ordered on top of version `(prev_term, seq - 1)`.
    Alter {
        term: u64,
        prev_term: u64,
        seq: u64,
        id: ProposalId,
        record: AlterRecord,
        md5: Md5Sum,
    },
    /// `applied`: how many leaves (store vnodes) of the branch applied it (the cut process needs
    /// them all).
    Confirm {
        term: u64,
        seq: u64,
        ok: bool,
        applied: u64,
    },
    Outcome {
        id: ProposalId,
        seq: u64,
        ok: bool,
        applied: u64,
    },
    /// Parent → children: I am alive, and this is my metadata (its version, its md5 and the md5 of
    /// its leaf view). `lead`: sent by a root, the term it orders in (0 while it has none); `None`
    /// from other parents.
    Heartbeat {
        term: u64,
        seq: u64,
        md5: Md5Sum,
        leaf_md5: Md5Sum,
        lead: Option<u64>,
    },
    /// A root (primary, or secondary standing in for it) asks the root's children to promise
    /// themselves to it for `term`.
    Claim {
        term: u64,
    },
    /// A child's answer to a claim (or to an alteration or heartbeat of an older term): `granted`
    /// with its metadata for the catch-up, or refused with the term it is promised to.
    Promise {
        term: u64,
        granted: bool,
        metadata: Option<Metadata>,
    },
    /// Child → parent: I am alive and you are my parent.
    Alive,
    /// Send me your metadata, as a vnode keeping `view` holds it.
    Fetch {
        view: View,
    },
    Clone {
        metadata: Metadata,
    },
    /// Seed 004: a child that lost its parent stands for assisting child (bully election: the
    /// sibling first in priority that is alive wins).
    Elect,
    /// A sibling placed before the sender is alive and takes over the election.
    Defer,
    /// The assisting child started this secondary parent: follow it.
    SecondaryAt {
        parent: VnodeId,
    },
    /// Seed 004, boot loading by parent: a host came alive and asks which vnodes to start.
    HostAlive {
        host: String,
    },
    /// The parent's answer: start these vnodes on the host (names `kind@host`).
    StartVnodes {
        vnodes: Vec<String>,
    },
    /// Whom the sender heard from directly, recently (`reach.rs`).
    Reach {
        hears: Vec<VnodeId>,
    },
    /// A message from `origin` carried one hop around a dead link.
    Relay {
        to: VnodeId,
        origin: VnodeId,
        msg: Box<AlterMsg>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterInput {
    /// Start (or restart) with the metadata and the promised root term recovered from the log.
    /// Must come first.
    Started {
        metadata: Metadata,
        term: u64,
    },
    Message {
        from: VnodeId,
        msg: AlterMsg,
    },
    Timer(AlterTimer),
    /// The host wants this record applied cluster-wide, as its proposal number `n` (the host keeps
    /// `n` unique across its restarts, e.g. with its incarnation in the high bits).
    Propose {
        n: u64,
        record: AlterRecord,
    },
    /// The record of alteration `seq` was written and read back as `bytes`.
    Persisted {
        seq: u64,
        bytes: Vec<u8>,
    },
    /// The host acted on alteration `seq` (e.g. its local cut finished), well or not.
    Applied {
        seq: u64,
        ok: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOutput {
    Send {
        to: VnodeId,
        msg: AlterMsg,
    },
    /// Write these bytes durably, then read them back and answer `Persisted`.
    Persist {
        seq: u64,
        bytes: Vec<u8>,
    },
    /// Alteration `(term, seq)` read back intact was applied to the metadata: persist that it was.
    /// A replay applies exactly the alterations persisted so (not every one written: one may be
    /// left for a newer term, or read back damaged). Outputs after this one in the same step —
    /// the confirmation, sooner or later — must not take effect before it is durable.
    PersistApplied {
        term: u64,
        seq: u64,
        record: AlterRecord,
    },
    /// The metadata was replaced by a clone of the parent's: persist it whole.
    PersistClone {
        metadata: Metadata,
    },
    /// Persist the root term promised (or claimed). Outputs after this one in the same step must
    /// not take effect before it is durable: a promise must survive a crash.
    PersistTerm {
        term: u64,
    },
    /// Seed 004: as assisting child, start a secondary parent `id` on this host in place of the
    /// dead primary parent `of`, with this vnode's copy of the metadata.
    StartSecondaryParent {
        id: VnodeId,
        of: VnodeId,
        metadata: Metadata,
        /// This vnode's promised term: a secondary root claims the next one.
        term: u64,
    },
    /// The primary parent is back: stop the secondary parent this host runs.
    StopSecondaryParent {
        id: VnodeId,
    },
    /// Act on the alteration and answer `Applied`.
    Apply {
        term: u64,
        seq: u64,
        record: AlterRecord,
    },
    /// This vnode's proposal ended: applied everywhere (`ok`) or given up.
    Done {
        id: ProposalId,
        ok: bool,
        attempts: u32,
        applied: u64,
        /// Where the alteration was ordered when `ok` (a retried proposal may have been ordered
        /// more than once); 0 when given up.
        seq: u64,
    },
    SetTimer {
        timer: AlterTimer,
        at_us: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlterTimer {
    Confirm(u64),
    /// Attempt `u32` of a proposal got no outcome in time.
    ProposeTimeout(ProposalId, u32),
    /// The back-off before attempt `u32` is over.
    Resubmit(ProposalId, u32),
    Heartbeat,
    /// No better-placed sibling answered: become the assisting child.
    Election,
}

/// The alteration in flight through this vnode.
#[derive(Debug, Hash)]
pub(super) struct InFlight {
    pub(super) term: u64,
    seq: u64,
    id: ProposalId,
    record: AlterRecord,
    md5: Md5Sum,
    applied: Option<bool>,
    /// Invariant: working children that have not confirmed yet.
    waiting: BTreeSet<VnodeId>,
    failed: bool,
    /// Leaves of this branch that applied it, this one included.
    applied_count: u64,
    /// At the root: the voters (children) that confirmed `ok`.
    oks: BTreeSet<VnodeId>,
    /// Applying it changed nothing it asked for (`Applied::Refused`): the root answers failed.
    refused: bool,
}

impl InFlight {
    pub(super) fn fail(&mut self) {
        self.failed = true;
        self.applied.get_or_insert(false);
    }
}

#[derive(Debug, Hash)]
pub(super) struct Proposal {
    pub(super) record: AlterRecord,
    pub(super) attempts: u32,
}

pub struct AlterNode {
    pub(super) cfg: AlterConfig,
    pub(super) now_us: u64,
    pub(super) metadata: Metadata,
    /// Invariant: `md5 == metadata.md5()` (kept with it: heartbeats send it many times a second).
    pub(super) md5: Md5Sum,
    /// Invariant: `leaf_md5 == metadata.project(View::Leaf).md5()`.
    pub(super) leaf_md5: Md5Sum,
    pub(super) in_flight: Option<InFlight>,
    /// Root only: proposals waiting to be ordered.
    pub(super) queue: VecDeque<(ProposalId, AlterRecord)>,
    /// The highest root term this vnode promised itself to or claimed (durable: `PersistTerm`).
    pub(super) term: u64,
    /// At a root: its campaign for a term, or the term it orders in.
    pub(super) lead: Option<Lead>,
    pub(super) proposals: BTreeMap<ProposalId, Proposal>,
    pub(super) primary_seen_us: u64,
    /// The secondary parent this vnode follows while its primary parent is dead.
    pub(super) secondary: Option<VnodeId>,
    pub(super) secondary_seen_us: u64,
    pub(super) election: Option<Election>,
    /// The secondary parent this vnode's host runs as assisting child.
    pub(super) assisting: Option<VnodeId>,
    /// Children (configured or adopted) and when each was last heard from.
    pub(super) children_seen_us: BTreeMap<VnodeId, u64>,
    /// Children whose state change this vnode has proposed, with the proposal number.
    pub(super) reporting: BTreeMap<VnodeId, u64>,
    /// Hosts whose liveness this vnode has proposed, with the proposal number.
    pub(super) reporting_hosts: BTreeMap<String, u64>,
    pub(super) own_proposals: u64,
    /// When each vnode was last heard from directly.
    pub(super) heard_us: BTreeMap<VnodeId, u64>,
    /// What each neighbour last reported hearing, and when.
    pub(super) reach: BTreeMap<VnodeId, (u64, Vec<VnodeId>)>,
    pub(super) relayed: u64,
    pub(super) out: Vec<AlterOutput>,
}

impl AlterNode {
    pub fn new(cfg: AlterConfig) -> Self {
        let children_seen_us = cfg.children.iter().map(|c| (c.clone(), 0)).collect();
        AlterNode {
            cfg,
            now_us: 0,
            metadata: Metadata::default(),
            md5: Metadata::default().md5(),
            leaf_md5: Metadata::default().project(View::Leaf).md5(),
            in_flight: None,
            queue: VecDeque::new(),
            term: 0,
            lead: None,
            proposals: BTreeMap::new(),
            primary_seen_us: 0,
            secondary: None,
            secondary_seen_us: 0,
            election: None,
            assisting: None,
            children_seen_us,
            reporting: BTreeMap::new(),
            reporting_hosts: BTreeMap::new(),
            own_proposals: 0,
            heard_us: BTreeMap::new(),
            reach: BTreeMap::new(),
            relayed: 0,
            out: vec![],
        }
    }

    pub fn id(&self) -> &VnodeId {
        &self.cfg.id
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Whether `logged` — what this vnode's log replays to (`image.rs`) — is the metadata it holds,
    /// seen through its view. Invariant (asserted by the hosts after every step): it is, so a
    /// restart rebuilds exactly what this vnode had applied and confirmed.
    pub fn holds_as_logged(&self, logged: &Metadata) -> bool {
        match (logged.view(), self.metadata.view()) {
            (l, m) if l == m => *logged == self.metadata,
            (View::Full, View::Leaf) => logged.project(View::Leaf) == self.metadata,
            _ => true, // a leaf view logged, a whole copy fetched since: nothing to compare
        }
    }

    /// The parent this vnode follows now (`None` at the root).
    pub fn parent(&self) -> Option<&VnodeId> {
        self.secondary.as_ref().or(self.cfg.parents.first())
    }

    /// The highest root term this vnode promised itself to (or, at a root, claimed).
    pub fn promised_term(&self) -> u64 {
        self.term
    }

    /// At a root: the term it won and orders in.
    pub fn leading_term(&self) -> Option<u64> {
        self.lead_term()
    }

    pub fn follows_primary_parent(&self) -> bool {
        self.secondary.is_none()
    }

    /// Children this vnode currently counts as working (heard from recently).
    pub fn working_children(&self) -> Vec<VnodeId> {
        let fresh = |seen: u64| {
            self.now_us < self.cfg.heartbeat_timeout_us || self.now_us - seen <= self.cfg.heartbeat_timeout_us
        };
        self.children_seen_us.iter().filter(|(_, s)| fresh(**s)).map(|(c, _)| c.clone()).collect()
    }

    pub fn step(&mut self, now_us: u64, input: AlterInput) -> Vec<AlterOutput> {
        debug_assert!(now_us >= self.now_us, "time went backwards");
        self.now_us = now_us;
        match input {
            AlterInput::Started { metadata, term } => self.on_started(metadata, term),
            AlterInput::Message { from, msg } => {
                self.heard_us.insert(from.clone(), now_us);
                self.on_message(from, msg)
            }
            AlterInput::Timer(t) => self.on_timer(t),
            AlterInput::Propose { n, record } => self.propose(n, record),
            AlterInput::Persisted { seq, bytes } => self.on_persisted(seq, &bytes),
            AlterInput::Applied { seq, ok } => self.on_applied(seq, ok),
        }
        std::mem::take(&mut self.out)
    }

    /// Tree messages go through `route` (relayed around dead links); probes go direct.
    pub(super) fn send(&mut self, to: &VnodeId, msg: AlterMsg) {
        match msg {
            AlterMsg::Heartbeat { .. } | AlterMsg::Alive | AlterMsg::Reach { .. } => self.push_send(to, msg),
            _ => self.route(to, msg),
        }
    }

    pub(super) fn push_send(&mut self, to: &VnodeId, msg: AlterMsg) {
        self.out.push(AlterOutput::Send { to: to.clone(), msg });
    }

    pub(super) fn timer(&mut self, timer: AlterTimer, after_us: u64) {
        self.out.push(AlterOutput::SetTimer { timer, at_us: self.now_us + after_us });
    }

    fn on_started(&mut self, metadata: Metadata, term: u64) {
        self.set_metadata(metadata);
        self.term = term;
        self.primary_seen_us = self.now_us;
        self.children_seen_us.values_mut().for_each(|s| *s = self.now_us);
        self.heartbeat();
    }

    pub(super) fn on_message(&mut self, from: VnodeId, msg: AlterMsg) {
        // A refusal says the sender follows another root: it is not a working child of this one.
        if !matches!(msg, AlterMsg::Promise { granted: false, .. }) {
            self.note_alive(&from);
        }
        match msg {
            AlterMsg::Propose { id, record } => self.on_propose(id, record),
            AlterMsg::Alter { term, prev_term, seq, id, record, md5 } => {
                self.on_alter(&from, (term, prev_term, seq), id, record, md5)
            }
            AlterMsg::Confirm { term, seq, ok, applied } => self.on_confirm(&from, (term, seq), ok, applied),
            AlterMsg::Outcome { id, ok, applied, seq } => self.on_outcome(id, ok, applied, seq),
            AlterMsg::Heartbeat { term, seq, md5, leaf_md5, lead } => {
                let md5 = if self.view() == View::Leaf { leaf_md5 } else { md5 };
                self.on_heartbeat(&from, (term, seq), md5, lead)
            }
            AlterMsg::Claim { term } => self.on_claim(&from, term),
            AlterMsg::Promise { term, granted, metadata } => self.on_promise(&from, term, granted, metadata),
            AlterMsg::Alive => self.adopt(from),
            AlterMsg::Fetch { view } if view == View::Full && self.metadata.view() == View::Leaf => {} // cannot widen
            AlterMsg::Fetch { view } => {
                let metadata = self.metadata.project(view);
                self.send(&from, AlterMsg::Clone { metadata });
            }
            AlterMsg::Clone { metadata } => self.on_clone(&from, metadata),
            AlterMsg::Elect => self.on_elect(&from),
            AlterMsg::Defer => self.on_defer(),
            AlterMsg::SecondaryAt { parent } => self.follow_secondary(parent),
            AlterMsg::HostAlive { host } => {
                let vnodes = self.metadata.vnodes_on(&host, &self.cfg.id.to_string());
                self.send(&from, AlterMsg::StartVnodes { vnodes });
                self.report_host_alive(&host);
            }
            AlterMsg::StartVnodes { .. } => {} // for host agents, not vnodes
            AlterMsg::Reach { hears } => self.on_reach(from, hears),
            AlterMsg::Relay { to, origin, msg } => self.on_relay(to, origin, *msg),
        }
    }

    fn note_alive(&mut self, from: &VnodeId) {
        if self.cfg.parents.first() == Some(from) {
            self.primary_seen_us = self.now_us;
        }
        if self.secondary.as_ref() == Some(from) {
            self.secondary_seen_us = self.now_us;
        }
        if let Some(seen) = self.children_seen_us.get_mut(from) {
            *seen = self.now_us;
        }
    }
}

// ---- relay and orderer ----

impl AlterNode {
    pub(super) fn on_propose(&mut self, id: ProposalId, record: AlterRecord) {
        if let Some(parent) = self.parent().cloned() {
            return self.send(&parent, AlterMsg::Propose { id, record });
        }
        if self.queue.len() >= QUEUE_MAX {
            // Back-pressure: the initiator retries with back-off, then reports the failure.
            let outcome = AlterMsg::Outcome { id: id.clone(), seq: 0, ok: false, applied: 0 };
            return self.answer(&id, outcome);
        }
        if !self.queue.iter().any(|(q, _)| q == &id) {
            self.queue.push_back((id, record));
        }
        self.order_next();
    }

    /// Sends an outcome to its initiator (this vnode itself, possibly).
    fn answer(&mut self, id: &ProposalId, outcome: AlterMsg) {
        if id.initiator == self.cfg.id {
            self.on_message(self.cfg.id.clone(), outcome);
        } else {
            self.send(&id.initiator.clone(), outcome);
        }
    }

    /// The root orders one alteration at a time, and only in a term it won.
    pub(super) fn order_next(&mut self) {
        let Some(term) = self.lead_term() else { return };
        if self.in_flight.is_some() {
            return;
        }
        let Some((id, mut record)) = self.queue.pop_front() else { return };
        // Every copy skips a proposal it applied before (`Metadata::apply`): a retried or
        // duplicated one, ordered again, changes nothing (no lost update).
        record.origin = Some(id.clone());
        let seq = self.metadata.seq() + 1;
        let md5 = md5_of(&record.encode(term, seq));
        self.begin((term, seq), id, record, md5);
    }

    fn begin(&mut self, (term, seq): (u64, u64), id: ProposalId, record: AlterRecord, md5: Md5Sum) {
        let bytes = record.encode(term, seq);
        self.in_flight = Some(InFlight {
            term,
            seq,
            id,
            record,
            md5,
            applied: None,
            waiting: BTreeSet::new(),
            failed: false,
            applied_count: 0,
            oks: BTreeSet::new(),
            refused: false,
        });
        self.out.push(AlterOutput::Persist { seq, bytes });
    }
}

// ---- a branch of the confirmation tree ----

impl AlterNode {
    fn on_alter(&mut self, from: &VnodeId, at: (u64, u64, u64), id: ProposalId, record: AlterRecord, md5: Md5Sum) {
        let (term, prev_term, seq) = at;
        if self.parent() != Some(from) {
            return; // not our parent (any more): it will time out on us
        }
        if term < self.term {
            // Ordered by a root that lost its term: refuse, and tell it.
            self.send(from, AlterMsg::Confirm { term, seq, ok: false, applied: 0 });
            return self.refuse(from);
        }
        self.adopt_term(term);
        if self.in_flight.as_ref().is_some_and(|f| (f.term, f.seq) == (term, seq)) {
            return;
        }
        if (prev_term, seq - 1) != self.metadata.version() || self.in_flight.is_some() {
            // A gap or a different history: fail this one and catch up by cloning.
            self.send(from, AlterMsg::Confirm { term, seq, ok: false, applied: 0 });
            return self.fetch(from);
        }
        self.begin((term, seq), id, record, md5);
    }

    /// Seed 004 point 4: the record is read after write and its md5 compared with the one sent.
    fn on_persisted(&mut self, seq: u64, bytes: &[u8]) {
        // A second write of the same alteration (it was begun again after a change of parent)
        // reads back after the first was applied: nothing more to do.
        let next = self.metadata.seq() + 1 == seq;
        let Some(f) = self.in_flight.as_mut().filter(|f| f.seq == seq && next) else { return };
        let read_back = AlterRecord::decode(bytes).filter(|(t, s, _)| (*t, *s) == (f.term, seq));
        let intact = md5_of(bytes) == f.md5 || self.cfg.breaks.skip_md5;
        let Some((term, _, record)) = read_back.filter(|_| intact) else {
            f.failed = true;
            f.applied = Some(false);
            return self.finish();
        };
        // What is applied is what was read back: the md5 is what keeps a bad copy out.
        let (id, md5) = (f.id.clone(), f.md5);
        let prev_term = self.metadata.term();
        let verdict = self.metadata.apply(term, seq, &record);
        self.in_flight.as_mut().expect("in flight").refused = verdict == Applied::Refused;
        self.refresh_md5();
        self.out.push(AlterOutput::PersistApplied { term, seq, record: record.clone() });
        self.out.push(AlterOutput::Apply { term, seq, record: record.clone() });
        let children = self.working_children();
        for c in &children {
            let msg = AlterMsg::Alter { term, prev_term, seq, id: id.clone(), record: record.clone(), md5 };
            self.send(c, msg);
        }
        self.in_flight.as_mut().expect("in flight").waiting = children.into_iter().collect();
        self.timer(AlterTimer::Confirm(seq), self.cfg.confirm_timeout_us);
    }

    fn on_applied(&mut self, seq: u64, ok: bool) {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.seq == seq) else { return };
        f.applied = Some(ok);
        // Only leaves (store vnodes) are counted: a manager and the secondary standing in for it
        // may both be alive for a moment, and the cut process needs every store vnode, by name.
        let leaf = self.cfg.children.is_empty() && self.cfg.secondary_of.is_none();
        f.applied_count += (ok && leaf) as u64;
        self.maybe_finish();
    }

    fn on_confirm(&mut self, from: &VnodeId, at: (u64, u64), ok: bool, applied: u64) {
        let Some(f) = self.in_flight.as_mut().filter(|f| (f.term, f.seq) == at) else { return };
        if f.waiting.remove(from) {
            f.failed |= !ok;
            f.applied_count += applied;
            if ok {
                f.oks.insert(from.clone());
            }
        }
        self.maybe_finish();
    }

    fn maybe_finish(&mut self) {
        let Some(f) = self.in_flight.as_ref() else { return };
        let early = self.cfg.breaks.confirm_before_children && self.parent().is_some();
        let children_done = f.waiting.is_empty() || early;
        if f.applied.is_some() && children_done {
            self.finish();
        }
    }

    /// Confirm to the parent — or, at the root, answer the initiator and order the next one.
    pub(super) fn finish(&mut self) {
        let f = self.in_flight.take().expect("in flight");
        let ok = !f.failed && f.applied == Some(true);
        let applied = f.applied_count;
        match self.parent().cloned() {
            Some(parent) => self.send(&parent, AlterMsg::Confirm { term: f.term, seq: f.seq, ok, applied }),
            None => {
                // Invariant: the root answers `ok` only for an alteration of its own term that a
                // majority of the voters hold — every later root's catch-up finds it.
                let ok = ok && self.lead_term() == Some(f.term) && self.quorum(&f.oks);
                let ok = ok && !self.cfg.breaks.fail_every_alteration && !f.refused;
                let outcome = AlterMsg::Outcome { id: f.id.clone(), seq: f.seq, ok, applied };
                self.answer(&f.id, outcome);
                self.order_next();
            }
        }
    }

    fn on_confirm_timeout(&mut self, seq: u64) {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.seq == seq) else { return };
        f.fail();
        self.finish();
    }
}

// ---- liveness: heartbeats, parent queue, cloning ----

impl AlterNode {
    fn heartbeat(&mut self) {
        debug_assert_eq!(self.md5, self.metadata.md5(), "cached md5 out of date");
        let ((term, seq), md5, leaf_md5) = (self.metadata.version(), self.md5, self.leaf_md5);
        let lead = self.heartbeat_lead();
        let children: Vec<VnodeId> = self.children_seen_us.keys().cloned().collect();
        for c in &children {
            self.send(c, AlterMsg::Heartbeat { term, seq, md5, leaf_md5, lead });
        }
        if let Some(p) = self.parent().cloned() {
            self.send(&p, AlterMsg::Alive);
        }
        self.check_parents();
        self.check_lead();
        self.announce_reach();
        if self.cfg.reports {
            self.report_children();
        }
        self.timer(AlterTimer::Heartbeat, self.cfg.heartbeat_interval_us);
    }

    /// What this vnode keeps of the metadata.
    pub(super) fn view(&self) -> View {
        if self.cfg.leaf_view {
            View::Leaf
        } else {
            View::Full
        }
    }

    /// Replaces the metadata, narrowed to this vnode's view. A leaf view is kept as it is even by a
    /// vnode that keeps whole copies (a secondary parent started by a store vnode): its md5 differs
    /// from its parent's, so it fetches a whole copy on the next heartbeat.
    pub(super) fn set_metadata(&mut self, metadata: Metadata) {
        let narrow = metadata.view() == View::Full && self.view() == View::Leaf;
        self.metadata = if narrow { metadata.project(View::Leaf) } else { metadata };
        self.refresh_md5();
    }

    fn refresh_md5(&mut self) {
        self.md5 = self.metadata.md5();
        self.leaf_md5 = match self.metadata.view() {
            View::Leaf => self.md5,
            View::Full => self.metadata.project(View::Leaf).md5(),
        };
    }

    pub(super) fn fetch(&mut self, from: &VnodeId) {
        let view = self.view();
        self.send(from, AlterMsg::Fetch { view });
    }

    /// Invariant: a clone never takes the metadata back to an older version, and comes only from
    /// the parent followed now.
    fn on_clone(&mut self, from: &VnodeId, metadata: Metadata) {
        let older = metadata.version() < self.metadata.version();
        let narrower = metadata.view() == View::Leaf && self.view() == View::Full;
        if self.in_flight.is_some() || older || narrower || self.parent() != Some(from) {
            return;
        }
        let before = self.md5;
        self.set_metadata(metadata);
        if self.md5 != before {
            let metadata = self.metadata.clone();
            self.out.push(AlterOutput::PersistClone { metadata });
        }
    }

    fn on_timer(&mut self, t: AlterTimer) {
        match t {
            AlterTimer::Confirm(seq) => self.on_confirm_timeout(seq),
            AlterTimer::ProposeTimeout(id, attempt) if self.is_current(&id, attempt) => self.retry(id),
            AlterTimer::Resubmit(id, attempt) if self.is_current(&id, attempt) => {
                let record = self.proposals[&id].record.clone();
                self.submit(id, record, attempt);
            }
            AlterTimer::ProposeTimeout(..) | AlterTimer::Resubmit(..) => {}
            AlterTimer::Heartbeat => self.heartbeat(),
            AlterTimer::Election => self.on_election_timeout(),
        }
    }
}
