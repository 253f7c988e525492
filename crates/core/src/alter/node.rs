//! One vnode's part in alterations (seed 004 points 4–8): the state machine every tree vnode runs,
//! as initiator, relay up the parent chain, orderer (at the root) and branch of the confirmation
//! tree. Sans-IO like the rest of the core: `step` takes an `AlterInput` and returns what the host
//! must do (`io.rs`).
//!
//! This file holds the node itself — its state, `step` and the dispatch of messages and timers —
//! and what every part shares: the metadata with its md5s, heartbeats, cloning. Each protocol step
//! lives in its own file, with the state it owns:
//!
//! | file | seed 004 | state |
//! | --- | --- | --- |
//! | `initiator.rs` | point 6: propose, retry, then report failure | `Initiator` |
//! | `root.rs` | point 6: the root orders, in a term a majority gave it (points 1–3 at the root) | `RootState` |
//! | `branch.rs` | points 4–5: write, read back, apply, forward, confirm | `InFlight` |
//! | `failover.rs` | points 1–3: assisting child, secondary parent, switch-back | `FailoverState` |
//! | `lease.rs` | how long a copy counts as the cluster's, dated by echoed stamps | `Stamps` |
//! | `reach.rs` | point 7: the reachability graph, relays | `ReachState` |
//! | `report.rs` | point 8: a parent reports what it sees | `Reports` |
//! | `promote.rs` | point 8: the root moves a dead host's partitions to live replicas | `Promotions` |
//!
//! Here: point 5's cloning (a vnode whose md5 differs from its parent's fetches its copy) and boot
//! loading by parent (`HostAlive` → `StartVnodes`).

use super::branch::InFlight;
use super::failover::FailoverState;
use super::initiator::Initiator;
use super::io::{AlterConfig, AlterInput, AlterMsg, AlterOutput, AlterTimer};
use super::lease::Stamps;
use super::metadata::{Md5Sum, Metadata, View};
use super::order::{MetaVersion, Term};
use super::promote::Promotions;
use super::reach::ReachState;
use super::report::Reports;
use super::root::RootState;
use crate::ids::VnodeId;
use std::collections::BTreeMap;

/// Kept here for the paths that name it so (`alter::node::QUEUE_MAX`); the queue is the root's.
pub use super::root::QUEUE_MAX;

pub struct AlterNode {
    pub(super) cfg: AlterConfig,
    pub(super) now_us: u64,
    pub(super) metadata: Metadata,
    /// Invariant: `md5 == metadata.md5()` (kept with it: heartbeats send it many times a second).
    pub(super) md5: Md5Sum,
    /// Invariant: `leaf_md5 == metadata.project(View::Leaf).md5()` (`md5` for a leaf view).
    /// Both set in `refresh_md5`, checked before every heartbeat sends them (`md5s_fresh`).
    pub(super) leaf_md5: Md5Sum,
    /// Children (configured or adopted) and when each was last heard from.
    pub(super) children_seen_us: BTreeMap<VnodeId, u64>,
    /// Invariant: at most one alteration in flight (`branch.rs`).
    pub(super) in_flight: Option<InFlight>,
    /// The promised root term; at a root, its lead and queue (`root.rs`).
    pub(super) root: RootState,
    /// This vnode's own proposals and their retries (`initiator.rs`).
    pub(super) initiator: Initiator,
    /// Which parent this vnode follows; elections, secondary parents (`failover.rs`).
    pub(super) failover: FailoverState,
    /// Whom this vnode and its neighbours hear (`reach.rs`).
    pub(super) reach: ReachState,
    /// The state changes this parent has proposed (`report.rs`).
    pub(super) reports: Reports,
    /// The promotions this root has proposed (`promote.rs`).
    pub(super) promotions: Promotions,
    /// The newest metadata version a majority of the root's voters is known to hold: at the root,
    /// its last alteration of its own term so confirmed; elsewhere, the most its parents said.
    /// Invariant: never decreases. A store vnode routes by a placement only once this covers it
    /// (`txn::promotion`): an alteration applied here but not yet held by a majority can be lost
    /// in a change of root, and a promotion acted on and then lost would serve a stale replica.
    pub(super) committed: MetaVersion,
    /// When a heartbeat of the parent followed last showed this copy of the metadata as new as
    /// the parent's (`synced`), dated by the stamp the parent echoed (`lease.rs`). Memory only: a
    /// restart clears it.
    pub(super) synced_us: Option<u64>,
    /// The clocks exchanged with the parent and children, which date the lease (`lease.rs`).
    pub(super) stamps: Stamps,
    /// Whether `Started` came: before it the metadata is a placeholder, never to be sent.
    pub(super) started: bool,
    /// What this step asks of the host, in order; taken at the end of `step`.
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
            children_seen_us,
            in_flight: None,
            root: RootState::default(),
            initiator: Initiator::default(),
            failover: FailoverState::default(),
            reach: ReachState::default(),
            reports: Reports::default(),
            promotions: Promotions::default(),
            synced_us: None,
            stamps: Stamps::default(),
            started: false,
            committed: MetaVersion::default(),
            out: vec![],
        }
    }

    pub fn id(&self) -> &VnodeId {
        &self.cfg.id
    }

    /// `committed`: the newest version no later root can lose, as far as this vnode knows.
    pub fn committed(&self) -> MetaVersion {
        self.committed
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    pub fn config(&self) -> &AlterConfig {
        &self.cfg
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
        self.failover.secondary.as_ref().or(self.cfg.parents.first())
    }

    /// The highest root term this vnode promised itself to (or, at a root, claimed).
    pub fn promised_term(&self) -> Term {
        self.root.term
    }

    /// At a root: the term it won and orders in.
    pub fn leading_term(&self) -> Option<Term> {
        self.lead_term()
    }

    pub fn follows_primary_parent(&self) -> bool {
        self.failover.secondary.is_none()
    }

    /// Children this vnode currently counts as working (heard from recently).
    pub fn working_children(&self) -> Vec<VnodeId> {
        let fresh = |seen: u64| {
            self.now_us < self.cfg.heartbeat_timeout_us || self.now_us - seen <= self.cfg.heartbeat_timeout_us
        };
        self.children_seen_us.iter().filter(|(_, s)| fresh(**s)).map(|(c, _)| c.clone()).collect()
    }

    pub fn step(&mut self, now_us: u64, input: AlterInput) -> Vec<AlterOutput> {
        assert!(now_us >= self.now_us, "time went backwards");
        self.now_us = now_us;
        match input {
            AlterInput::Started { metadata, term } => self.on_started(metadata, term),
            AlterInput::Message { from, msg } => {
                self.reach.heard(&from, now_us);
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
            AlterMsg::Heartbeat { .. } | AlterMsg::Alive { .. } | AlterMsg::Reach { .. } => self.push_send(to, msg),
            _ => self.route(to, msg),
        }
    }

    /// `Alive` to the parent followed (or about to be), stamped and echoing its last stamp.
    pub(super) fn send_alive(&mut self, parent: &VnodeId) {
        let (sent_us, echo_us) = (self.now_us, self.echo_to_parent(parent));
        self.push_send(parent, AlterMsg::Alive { sent_us, echo_us });
    }

    pub(super) fn push_send(&mut self, to: &VnodeId, msg: AlterMsg) {
        self.out.push(AlterOutput::Send { to: to.clone(), msg });
    }

    pub(super) fn timer(&mut self, timer: AlterTimer, after_us: u64) {
        self.out.push(AlterOutput::SetTimer { timer, at_us: self.now_us + after_us });
    }

    fn on_started(&mut self, metadata: Metadata, term: Term) {
        self.started = true;
        self.set_metadata(metadata);
        self.root.term = term;
        self.failover.primary_seen_us = self.now_us;
        self.children_seen_us = self.first_seen_at_start();
        self.heartbeat();
    }

    /// When each child counts as last heard, at start: now — a whole timeout before it counts as
    /// down — except, at a secondary parent, the children on the host of the parent it stands in
    /// for, which get half a timeout. That parent stopped answering for a timeout already, and its
    /// host's other vnodes usually went with it: waiting a whole timeout more before reporting
    /// them added a second to the failover window when the root's host died (3 real hosts: ~4 s).
    /// A child alive there switches to this parent about when the others do, well within half a
    /// timeout; if it does not, it is reported down and then working again — slower, not wrong.
    fn first_seen_at_start(&self) -> BTreeMap<VnodeId, u64> {
        let now = self.now_us;
        let stood_in_host = self.cfg.secondary_of.as_ref().map(|p| &p.host);
        let seen = |c: &VnodeId| match stood_in_host == Some(&c.host) {
            true => now.saturating_sub(self.cfg.heartbeat_timeout_us / 2),
            false => now,
        };
        self.children_seen_us.keys().map(|c| (c.clone(), seen(c))).collect()
    }

    pub(super) fn on_message(&mut self, from: VnodeId, msg: AlterMsg) {
        // A refusal says the sender follows another root: it is not a working child of this one.
        if !matches!(msg, AlterMsg::Promise { granted: false, .. }) {
            self.note_alive(&from);
        }
        match msg {
            AlterMsg::Propose { id, record } => self.on_propose(id, record),
            AlterMsg::Alter { term, prev_term, seq, id, record, md5 } => {
                self.on_alter(&from, MetaVersion { term, seq }, prev_term, id, record, md5)
            }
            AlterMsg::Confirm { term, seq, ok, applied } => {
                self.on_confirm(&from, MetaVersion { term, seq }, ok, applied)
            }
            AlterMsg::Outcome { id, ok, applied, seq } => self.on_outcome(id, ok, applied, seq),
            AlterMsg::Heartbeat { term, seq, md5, leaf_md5, lead, committed, fresh, sent_us, echo_us } => {
                if self.parent() == Some(&from) {
                    self.committed = self.committed.max(committed);
                }
                let md5 = if self.view() == View::Leaf { leaf_md5 } else { md5 };
                let fresh = fresh.then_some(echo_us).flatten();
                self.on_heartbeat(&from, MetaVersion { term, seq }, md5, lead, fresh);
                self.note_parent_stamp(&from, sent_us);
            }
            AlterMsg::Claim { term } => self.on_claim(&from, term),
            AlterMsg::Promise { term, granted, metadata } => self.on_promise(&from, term, granted, metadata),
            AlterMsg::Alive { sent_us, echo_us } => self.on_alive(from, sent_us, echo_us),
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
                // A secondary parent answers for the primary it stands in for: a host whose
                // primary parent is cut off is still told which vnodes to start.
                let parent = self.cfg.secondary_of.as_ref().unwrap_or(&self.cfg.id);
                let vnodes = self.metadata.vnodes_on(&host, parent);
                self.send(&from, AlterMsg::StartVnodes { vnodes });
                self.report_host_alive(&host);
            }
            AlterMsg::StartVnodes { .. } => {} // for host agents, not vnodes
            AlterMsg::Reach { hears } => self.on_reach(from, hears),
            AlterMsg::Relay { to, origin, msg } => self.on_relay(to, origin, msg),
        }
    }

    fn note_alive(&mut self, from: &VnodeId) {
        if self.cfg.parents.first() == Some(from) {
            self.failover.primary_seen_us = self.now_us;
        }
        if self.failover.secondary.as_ref() == Some(from) {
            self.failover.secondary_seen_us = self.now_us;
        }
        if let Some(seen) = self.children_seen_us.get_mut(from) {
            *seen = self.now_us;
        }
    }
}

// ---- liveness: heartbeats, metadata and its md5s, cloning ----

impl AlterNode {
    /// Every interval: a heartbeat to each child not answered within it (a child that sends
    /// `Alive` is answered at once, `on_alive`), `Alive` to the parent, and the periodic checks.
    fn heartbeat(&mut self) {
        let quiet: Vec<VnodeId> = self.children_seen_us.keys().filter(|c| !self.answered_lately(c)).cloned().collect();
        for c in &quiet {
            self.beat(c);
        }
        if let Some(p) = self.parent().cloned() {
            self.send_alive(&p);
        }
        self.check_parents();
        self.check_lead();
        self.promote();
        self.announce_reach();
        if self.cfg.reports {
            self.report_children();
        }
        self.timer(AlterTimer::Heartbeat, self.cfg.heartbeat_interval_us);
    }

    /// One heartbeat to `child`: the metadata's version and md5s, the term, and what dates the
    /// child's lease (`lease.rs`).
    pub(super) fn beat(&mut self, child: &VnodeId) {
        debug_assert!(self.md5s_fresh(), "cached md5 out of date");
        let (MetaVersion { term, seq }, md5, leaf_md5) = (self.metadata.version(), self.md5, self.leaf_md5);
        let (lead, committed, fresh) = (self.heartbeat_lead(), self.committed, self.fresh());
        let (sent_us, echo_us) = (self.now_us, self.echo_to_child(child));
        let msg = AlterMsg::Heartbeat { term, seq, md5, leaf_md5, lead, committed, fresh, sent_us, echo_us };
        self.note_answered(child);
        self.send(child, msg);
    }

    /// A child's `Alive`: keep its stamps, adopt it if it is new, and answer it at once, so that
    /// its lease is dated by a round trip rather than by the phase of two heartbeat timers.
    fn on_alive(&mut self, from: VnodeId, sent_us: u64, echo_us: Option<u64>) {
        self.note_child_stamps(&from, sent_us, echo_us);
        self.adopt(from.clone());
        if self.started && self.children_seen_us.contains_key(&from) {
            self.beat(&from);
        }
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

    /// Invariant (`md5`, `leaf_md5`): set with the metadata (here), checked where they are sent.
    pub(super) fn refresh_md5(&mut self) {
        self.md5 = self.metadata.md5();
        self.leaf_md5 = match self.metadata.view() {
            View::Leaf => self.md5,
            View::Full => self.metadata.leaf_md5(),
        };
    }

    fn md5s_fresh(&self) -> bool {
        let leaf_md5 = match self.metadata.view() {
            View::Leaf => self.md5,
            View::Full => self.metadata.project(View::Leaf).md5(),
        };
        self.md5 == self.metadata.md5() && self.leaf_md5 == leaf_md5
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
            AlterTimer::Resubmit(id, attempt) if self.is_current(&id, attempt) => self.resubmit(id, attempt),
            AlterTimer::ProposeTimeout(..) | AlterTimer::Resubmit(..) => {}
            AlterTimer::Heartbeat => self.heartbeat(),
            AlterTimer::Election => self.on_election_timeout(),
        }
    }
}
