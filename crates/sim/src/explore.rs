//! Exhaustive interleaving explorer (DESIGN §4, §8): for a small case — a few vnodes, one or two
//! client transactions and one cut request — it runs the real `waymark-core` vnodes through
//! **every** order in which the messages in flight can be delivered (FIFO per link, as the real
//! network) and the requests injected, and checks at each terminal state:
//!
//! 1. a cut the coordinator declared ok (`CutEnd{ok: true}`) has its `CutFinish` on every vnode,
//!    and every vnode restores to it;
//! 2. the cut is consistent: a transaction is on the same side of the cut on every replica of
//!    every partition it wrote, and each restored key holds exactly the writes of the included
//!    transactions (closure under overwrites; replicas of a partition agree);
//! 3. every client request got exactly one reply, and a transaction is committed on all of its
//!    replicas or on none, as its reply says.
//!
//! These are the simulator's checkers (`atomicity`, `cut_restore`, `replies`), run over the
//! terminal state's logs through `checkers::Cluster`.
//!
//! Durability is immediate, timers never fire and nothing fails, so every schedule completes.
//!
//! Search: depth-first over a state graph. A vnode is not `Clone`, so a vnode's state is kept as
//! its input history plus its log, and a local step replays the history into a fresh vnode. Local
//! steps are memoised on `(vnode state hash, input)`: the same delivery to the same vnode state
//! recurs in many global states, which is what makes the search cheap. Global states are hashed
//! (vnode states, logs, link queues, pending requests, replies) and a state already seen is not
//! expanded again; its number of complete schedules is reused, so `paths` counts every schedule
//! covered, not only those walked.

use crate::checkers::{atomicity, cut_restore, replies, Cluster, LogFacts, Violation};
use crate::hash::{hash_of, Fnv, FnvMap};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use waymark_core::message::PrepareWrites;
use waymark_core::{
    Body, Breaks, ClientId, CutId, CutStrategy, Envelope, Input, Key, Lsn, Output, Placement, Record, Request,
    Response, TxnMsg, Vnode, VnodeConfig, VnodeId, Write, WriteOp,
};

/// Violations kept per case (the count of violating terminal states is reported in full).
const VIOLATIONS_KEPT: usize = 10;

/// One client transaction: its near vnode and the partitions it writes (one key each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxSpec {
    pub near: usize,
    /// Partition `p` has its primary on vnode `p`; two transactions writing `p` use the same key.
    pub partitions: Vec<usize>,
}

#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    /// 2 or 3; there are as many partitions as vnodes.
    pub vnodes: usize,
    /// Copies of each partition, 1..=vnodes.
    pub replicas: usize,
    pub txs: Vec<TxSpec>,
    /// A cut request to vnode 0 (the coordinator), injected at any point.
    pub cut: bool,
    /// Safety bound on distinct global states; hitting it sets `truncated`.
    pub max_states: usize,
    pub breaks: Breaks,
}

impl Case {
    pub fn new(vnodes: usize, replicas: usize, txs: Vec<TxSpec>) -> Case {
        let name = case_name(vnodes, replicas, &txs);
        Case { name, vnodes, replicas, txs, cut: true, max_states: 2_000_000, breaks: Breaks::default() }
    }
}

fn case_name(vnodes: usize, replicas: usize, txs: &[TxSpec]) -> String {
    let txs: Vec<String> = txs
        .iter()
        .map(|t| {
            let ps: Vec<String> = t.partitions.iter().map(|p| format!("p{p}")).collect();
            format!("n{}:[{}]", t.near, ps.join(","))
        })
        .collect();
    format!("{vnodes}v/{}b {}", replicas - 1, txs.join(" "))
}

#[derive(Clone, Debug, Default)]
pub struct CaseReport {
    pub name: String,
    /// Distinct global states expanded.
    pub states_visited: u64,
    /// Distinct terminal states (nothing in flight, nothing left to inject).
    pub terminal_states: u64,
    /// Complete schedules covered (root-to-terminal paths of the state graph), saturating.
    pub paths: u128,
    /// Global transitions executed.
    pub transitions: u64,
    /// Local vnode steps actually run (cache misses of the memoised local step).
    pub local_steps: u64,
    /// Terminal states that broke a property.
    pub violating_terminals: u64,
    /// The first few violations, each with the schedule that reaches it (in its evidence).
    pub violations: Vec<Violation>,
    /// `max_states` was hit: the search is incomplete.
    pub truncated: bool,
}

/// Ignite's `IncrementalSnapshotMessagesBlockingTest` matrix, single transaction: topologies
/// {3 vnodes/0 backups, 2 vnodes/1 backup, 3 vnodes/2 backups} × near = each vnode × one key on
/// each primary (1PC) or two keys on each ordered pair of distinct primaries (2PC).
pub fn single_tx_matrix() -> Vec<Case> {
    let mut cases = Vec::new();
    for (vnodes, replicas) in [(3, 1), (2, 2), (3, 3)] {
        for near in 0..vnodes {
            for partitions in one_and_two_key_sets(vnodes) {
                cases.push(Case::new(vnodes, replicas, vec![TxSpec { near, partitions }]));
            }
        }
    }
    cases
}

/// Two transactions from one near, for the smaller topologies: two single-key transactions (same
/// key → one aborts by lock conflict unless they run one after the other), and a 1-key + 2-key pair.
pub fn two_tx_matrix() -> Vec<Case> {
    let mut cases = Vec::new();
    for (vnodes, replicas) in [(2, 2), (3, 1)] {
        for near in 0..vnodes {
            for (a, b) in two_tx_pairs(vnodes) {
                let txs = vec![TxSpec { near, partitions: a }, TxSpec { near, partitions: b }];
                cases.push(Case::new(vnodes, replicas, txs));
            }
        }
    }
    cases
}

/// The whole matrix: single-transaction cases, then two-transaction cases.
pub fn matrix() -> Vec<Case> {
    let mut cases = single_tx_matrix();
    cases.extend(two_tx_matrix());
    cases
}

fn one_and_two_key_sets(vnodes: usize) -> Vec<Vec<usize>> {
    let singles = (0..vnodes).map(|p| vec![p]);
    let pairs = (0..vnodes).flat_map(|p| (0..vnodes).filter(move |q| *q != p).map(move |q| vec![p, q]));
    singles.chain(pairs).collect()
}

fn two_tx_pairs(vnodes: usize) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut pairs = Vec::new();
    for p in 0..vnodes {
        for q in p..vnodes {
            pairs.push((vec![p], vec![q]));
        }
    }
    for p in 0..vnodes {
        for two in one_and_two_key_sets(vnodes).into_iter().filter(|s| s.len() == 2) {
            pairs.push((vec![p], two));
        }
    }
    pairs
}

/// Explores every case of `matrix()`; prints one line per case and the totals when `print`.
pub fn run_matrix(print: bool) -> Vec<CaseReport> {
    let reports: Vec<CaseReport> = matrix().iter().map(explore).inspect(|r| print_if(print, r)).collect();
    if print {
        println!("{}", totals_line(&reports));
    }
    reports
}

fn print_if(print: bool, r: &CaseReport) {
    if print {
        println!("{}", report_line(r));
        for v in &r.violations {
            println!("  VIOLATION {v:#}");
        }
    }
}

/// One line: name, states, terminal states, schedules, violations.
pub fn report_line(r: &CaseReport) -> String {
    format!(
        "{:<28} states {:>8} terminal {:>6} schedules {:>14} local-steps {:>6} violations {}{}",
        r.name,
        r.states_visited,
        r.terminal_states,
        r.paths,
        r.local_steps,
        r.violating_terminals,
        if r.truncated { " TRUNCATED" } else { "" }
    )
}

/// Totals over several reports.
pub fn totals_line(reports: &[CaseReport]) -> String {
    let states: u64 = reports.iter().map(|r| r.states_visited).sum();
    let terminal: u64 = reports.iter().map(|r| r.terminal_states).sum();
    let paths = reports.iter().fold(0u128, |a, r| a.saturating_add(r.paths));
    let bad: u64 = reports.iter().map(|r| r.violating_terminals).sum();
    let truncated = reports.iter().filter(|r| r.truncated).count();
    format!(
        "{} cases: states {states} terminal {terminal} schedules {paths} violations {bad} truncated {truncated}",
        reports.len()
    )
}

/// Explores every schedule of `case` (up to `case.max_states` states).
pub fn explore(case: &Case) -> CaseReport {
    let setup = Setup::new(case);
    let mut ex = Explorer::new(&setup, case);
    let root = ex.root();
    ex.report.paths = ex.visit(root);
    ex.report
}

// ---------------------------------------------------------------------------------------------
// Setup: ids, configs, keys, requests.

struct Setup {
    ids: Vec<VnodeId>,
    index: BTreeMap<VnodeId, usize>,
    cfgs: Vec<VnodeConfig>,
    placement: Arc<Placement>,
    /// Target vnode and request; request `i` comes from client `i + 1`.
    requests: Vec<(usize, Request)>,
}

impl Setup {
    fn new(case: &Case) -> Setup {
        let ids: Vec<VnodeId> = (0..case.vnodes).map(|i| VnodeId::new("store0", format!("node{i:03}"))).collect();
        let placement = Arc::new(Placement::round_robin(&ids, case.vnodes as u32, case.replicas));
        let cfgs = ids
            .iter()
            .map(|id| {
                let mut cfg = VnodeConfig::new(id.clone(), placement.clone(), ids[0].clone());
                cfg.breaks = case.breaks;
                cfg
            })
            .collect();
        let index = ids.iter().cloned().enumerate().map(|(i, id)| (id, i)).collect();
        let mut requests = Vec::new();
        for (t, spec) in case.txs.iter().enumerate() {
            let writes: Vec<Write> = spec
                .partitions
                .iter()
                .map(|p| Write { key: key_on(&placement, *p), op: WriteOp::Set(format!("v{t}").into_bytes()) })
                .collect();
            requests.push((spec.near, Request::Txn { reads: vec![], writes }));
        }
        if case.cut {
            requests.push((0, Request::Cut));
        }
        Setup { ids, index, cfgs, placement, requests }
    }

    fn idx(&self, id: &VnodeId) -> usize {
        *self.index.get(id).expect("vnodes only address members of the placement")
    }

    fn host(&self, i: usize) -> &str {
        &self.ids[i].host
    }
}

/// The first key `k0`, `k1`, … of partition `p`.
fn key_on(placement: &Placement, p: usize) -> Key {
    (0u32..)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| placement.partition_of(k).0 as usize == p)
        .expect("crc32c spreads keys over every partition")
}

// ---------------------------------------------------------------------------------------------
// States.

/// One vnode's state, as the inputs that produced it plus its log.
struct Slot {
    history: Vec<Input>,
    log: Vec<Record>,
    log_hash: u64,
    /// `state_hash` of the vnode and `log_hash`.
    hash: u64,
}

/// A message in flight, with its hash precomputed.
#[derive(Clone)]
struct Msg {
    hash: u64,
    env: Rc<Envelope>,
}

/// What one local step did.
struct Effect {
    slot: Rc<Slot>,
    sends: Vec<Msg>,
    replies: Vec<(ClientId, Response)>,
}

/// A direction between two vnodes, by index in `Setup::ids`: its messages are delivered in the
/// order they were sent. Orders and hashes as the `(from, to)` pair it replaced, so the state
/// hashes and the order of the choices are the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Link {
    from: usize,
    to: usize,
}

#[derive(Clone)]
struct World {
    slots: Vec<Rc<Slot>>,
    /// Invariant: every queue held is non-empty (an emptied link is removed).
    links: BTreeMap<Link, VecDeque<Msg>>,
    pending: BTreeSet<usize>,
    /// Shared between states until a reply arrives; `replies_hash` is its digest.
    replies: Rc<BTreeMap<ClientId, Vec<Response>>>,
    replies_hash: u64,
}

#[derive(Clone, Copy)]
enum Choice {
    Deliver(Link),
    Inject(usize),
}

/// A step of a schedule: the input it gives a vnode, and its description.
enum Label {
    Deliver(Msg),
    Inject(usize),
}

impl World {
    fn hash(&self) -> u64 {
        let mut h = Fnv::default();
        for s in &self.slots {
            s.hash.hash(&mut h);
        }
        for (link, q) in &self.links {
            (link, q.len()).hash(&mut h);
            q.iter().for_each(|m| m.hash.hash(&mut h));
        }
        (&self.pending, self.replies_hash).hash(&mut h);
        h.finish()
    }

    fn choices(&self) -> Vec<Choice> {
        let deliveries = self.links.keys().map(|link| Choice::Deliver(*link));
        deliveries.chain(self.pending.iter().map(|i| Choice::Inject(*i))).collect()
    }

    fn absorb(&mut self, x: usize, effect: &Effect, setup: &Setup) {
        self.slots[x] = effect.slot.clone();
        for m in &effect.sends {
            let to = setup.idx(&m.env.to);
            self.links.entry(Link { from: x, to }).or_default().push_back(m.clone());
        }
        if effect.replies.is_empty() {
            return;
        }
        let replies = Rc::make_mut(&mut self.replies);
        for (client, response) in &effect.replies {
            replies.entry(*client).or_default().push(response.clone());
        }
        self.replies_hash = hash_of(&self.replies);
    }
}

// ---------------------------------------------------------------------------------------------
// The search.

/// A local step, named by the hash of the vnode's state (`Slot::hash`) and of the input it takes:
/// equal keys, equal effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StepKey {
    slot: u64,
    input: u64,
}

struct Explorer<'a> {
    setup: &'a Setup,
    max_states: usize,
    /// Memoised local steps.
    cache: FnvMap<StepKey, Rc<Effect>>,
    /// Global state hash → complete schedules below it (`None` while on the DFS stack).
    visited: FnvMap<u64, Option<u128>>,
    path: Vec<Label>,
    report: CaseReport,
}

impl<'a> Explorer<'a> {
    fn new(setup: &'a Setup, case: &Case) -> Self {
        let report = CaseReport { name: case.name.clone(), ..CaseReport::default() };
        let (cache, visited) = (FnvMap::default(), FnvMap::default());
        Explorer { setup, max_states: case.max_states, cache, visited, path: Vec::new(), report }
    }

    /// Every vnode restarted with its `Boot` record durable; every request pending.
    fn root(&mut self) -> World {
        let empty = Slot { history: vec![], log: vec![], log_hash: 0, hash: 0 };
        let n = self.setup.ids.len();
        let effects: Vec<Effect> = (0..n).map(|x| self.run_local(x, &empty, Input::Restarted)).collect();
        let mut w = World {
            slots: effects.iter().map(|e| e.slot.clone()).collect(),
            links: BTreeMap::new(),
            pending: (0..self.setup.requests.len()).collect(),
            replies: Rc::default(),
            replies_hash: 0,
        };
        for (x, effect) in effects.iter().enumerate() {
            w.absorb(x, effect, self.setup);
        }
        w
    }

    /// Depth-first search from `w`; returns the number of complete schedules below it.
    fn visit(&mut self, w: World) -> u128 {
        let h = w.hash();
        if let Some(seen) = self.visited.get(&h) {
            return seen.unwrap_or(0);
        }
        if self.visited.len() >= self.max_states {
            self.report.truncated = true;
            return 0;
        }
        self.visited.insert(h, None);
        self.report.states_visited += 1;
        let choices = w.choices();
        let count = match choices.is_empty() {
            true => self.terminal(&w),
            false => choices.into_iter().fold(0u128, |acc, c| acc.saturating_add(self.branch(&w, c))),
        };
        self.visited.insert(h, Some(count));
        count
    }

    fn branch(&mut self, w: &World, choice: Choice) -> u128 {
        self.report.transitions += 1;
        let (child, label) = self.apply(w, choice);
        self.path.push(label);
        let count = self.visit(child);
        self.path.pop();
        count
    }

    fn apply(&mut self, w: &World, choice: Choice) -> (World, Label) {
        let mut child = w.clone();
        let (x, label) = match choice {
            Choice::Deliver(link) => {
                let q = child.links.get_mut(&link).expect("only non-empty links are chosen");
                let m = q.pop_front().expect("only non-empty links are chosen");
                if q.is_empty() {
                    child.links.remove(&link);
                }
                (link.to, Label::Deliver(m))
            }
            Choice::Inject(i) => {
                child.pending.remove(&i);
                (self.setup.requests[i].0, Label::Inject(i))
            }
        };
        let effect = self.local(x, &w.slots[x], &label);
        child.absorb(x, &effect, self.setup);
        (child, label)
    }

    /// The memoised local step: vnode `x` in state `slot` takes the input `label` names.
    fn local(&mut self, x: usize, slot: &Slot, label: &Label) -> Rc<Effect> {
        let input = match label {
            Label::Deliver(m) => m.hash,
            Label::Inject(i) => hash_of(&("inject", i)),
        };
        let key = StepKey { slot: slot.hash, input };
        if let Some(e) = self.cache.get(&key) {
            return e.clone();
        }
        let input = match label {
            Label::Deliver(m) => Input::Message((*m.env).clone()),
            Label::Inject(i) => {
                let request = self.setup.requests[*i].1.clone();
                Input::Client { client: ClientId(*i as u64 + 1), req: 1, request }
            }
        };
        let effect = Rc::new(self.run_local(x, slot, input));
        self.cache.insert(key, effect.clone());
        effect
    }

    /// Rebuilds vnode `x` from its history, steps `input`, then makes every append durable at once.
    fn run_local(&mut self, x: usize, slot: &Slot, input: Input) -> Effect {
        self.report.local_steps += 1;
        let mut v = Vnode::new(self.setup.cfgs[x].clone());
        for i in &slot.history {
            drop(v.step(0, i.clone()));
        }
        let (mut history, mut log, mut log_hash) = (slot.history.clone(), slot.log.clone(), slot.log_hash);
        let (mut sends, mut replies) = (Vec::new(), Vec::new());
        let mut next = Some(input);
        while let Some(input) = next.take() {
            history.push(input.clone());
            let before = log.len();
            for out in v.step(0, input) {
                match out {
                    Output::Append(r) => {
                        log_hash = hash_of(&(log_hash, &r));
                        log.push(r);
                    }
                    Output::Send(env) => sends.push(Msg { hash: hash_of(&env), env: Rc::new(env) }),
                    Output::Reply { client, response, .. } => replies.push((client, response)),
                    Output::SetTimer { .. }
                    | Output::StartSecondaryParent { .. }
                    | Output::StopSecondaryParent { .. } => {}
                }
            }
            if log.len() > before {
                next = Some(Input::WalDurable(Lsn(log.len() as u64)));
            }
        }
        let mut h = Fnv::default();
        v.state_hash(&mut h);
        log_hash.hash(&mut h);
        let slot = Rc::new(Slot { history, log, log_hash, hash: h.finish() });
        Effect { slot, sends, replies }
    }

    fn terminal(&mut self, w: &World) -> u128 {
        self.report.terminal_states += 1;
        let problems = check(self.setup, w);
        if !problems.is_empty() {
            self.report.violating_terminals += 1;
            if self.report.violations.len() < VIOLATIONS_KEPT {
                let schedule = self.schedule();
                for mut v in problems {
                    v.evidence = format!("{}\n    schedule: {schedule}", v.evidence);
                    self.report.violations.push(v);
                }
            }
        }
        1
    }

    fn schedule(&self) -> String {
        let steps: Vec<String> = self.path.iter().map(|l| describe(self.setup, l)).collect();
        steps.join(" | ")
    }
}

fn describe(setup: &Setup, label: &Label) -> String {
    match label {
        Label::Inject(i) => match &setup.requests[*i] {
            (_, Request::Cut) => "inject Cut".to_string(),
            (x, _) => format!("inject tx#{} at {}", i + 1, setup.host(*x)),
        },
        Label::Deliver(Msg { env, .. }) => {
            let colour = env.cut.map(|c| format!(" [{c}]")).unwrap_or_default();
            format!("deliver {}->{} {}{colour}", env.from.host, env.to.host, body_label(&env.body))
        }
    }
}

fn body_label(body: &Body) -> String {
    match body {
        Body::Cut(msg) => format!("{msg:?}"),
        Body::Alter(msg) => format!("{msg:?}"),
        Body::Copy(msg) => format!("{msg:?}"),
        Body::Txn(TxnMsg::Prepare { tx, one_phase, writes, .. }) => {
            let kind = if *one_phase { "1pc" } else { "2pc" };
            let resolved = if matches!(writes, PrepareWrites::Resolved(_)) { " resolved" } else { "" };
            format!("Prepare {tx} {kind}{resolved}")
        }
        Body::Txn(TxnMsg::PrepareAck { tx, role, result, tx_cut }) => {
            let ok = if result.is_ok() { "ok" } else { "refused" };
            format!("PrepareAck {tx} {role:?} {ok} tx_cut={tx_cut:?}")
        }
        Body::Txn(TxnMsg::Finish { tx, role, commit, tx_cut }) => {
            format!("Finish {tx} {role:?} commit={commit} tx_cut={tx_cut:?}")
        }
        Body::Txn(other) => format!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Terminal checks: the simulator's checkers, over a terminal state's logs.

/// A terminal state, as the checkers see a cluster.
struct Terminal<'a> {
    setup: &'a Setup,
    world: &'a World,
}

impl Cluster for Terminal<'_> {
    fn vnodes(&self) -> usize {
        self.setup.ids.len()
    }

    fn id(&self, node: usize) -> &VnodeId {
        &self.setup.ids[node]
    }

    fn log(&self, node: usize) -> &[Record] {
        &self.world.slots[node].log
    }

    fn placement(&self) -> &Placement {
        &self.setup.placement
    }

    fn node_of(&self, id: &VnodeId) -> usize {
        self.setup.idx(id)
    }
}

/// Every property of the module doc; an empty list when all hold.
fn check(setup: &Setup, w: &World) -> Vec<Violation> {
    let terminal = Terminal { setup, world: w };
    let facts = LogFacts::gather(&terminal);
    let answered: Vec<(&Request, &[Response])> = (setup.requests.iter().enumerate())
        .map(|(i, (_, request))| {
            let replies = w.replies.get(&ClientId(i as u64 + 1)).map(Vec::as_slice).unwrap_or_default();
            (request, replies)
        })
        .collect();
    let mut out = replies::check(&terminal, &facts, &answered);
    out.extend(atomicity::all_or_nothing(&terminal, &facts));
    for cut in declared_ok(w) {
        let breaks = &setup.cfgs[0].breaks;
        match cut_restore::restore_all(&terminal, cut, CutStrategy::Consistent, breaks) {
            Ok(restored) => out.extend(cut_restore::check_restores(&terminal, &facts, cut, &restored)),
            Err(violation) => out.push(violation),
        }
    }
    out
}

/// The cuts the coordinator (vnode 0) declared ok.
fn declared_ok(w: &World) -> Vec<CutId> {
    let ended = w.slots[0].log.iter().filter_map(|r| match r {
        Record::CutEnd { cut, ok: true } => Some(*cut),
        _ => None,
    });
    ended.collect()
}
