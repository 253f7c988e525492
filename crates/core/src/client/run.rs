//! One batch of a client's commands, from its first request to its reply: the reads its replies
//! depend on, the evaluation, the commit (or none, when nothing can have changed), and the
//! retries of conflicts.
//!
//! Invariants: at most one set of requests is in flight (`Waiting`), and every answer handed back
//! belongs to it, one per request, in order; every transaction the batch submitted is in
//! `Finished::attempts`, with what its answer says of it, so a history built from them misses
//! nothing that may have committed.

use super::answer::{self, Failure, Read, NOT_AN_INTEGER};
use super::collections::{elements_to_read, Known, NeedMembers, NeedWhole, Want};
use super::evaluate;
use super::{ClientLimits, DataCmd, BACKOFF_MAX_US, BACKOFF_MIN_US};
use crate::breaks::Breaks;
use crate::collection::is_head;
use crate::ids::{Key, TxId, Version};
use crate::io::{Member, Pick, Request, Response, ScanCursor, ELEMENTS_PAGE_MAX};
use crate::message::AbortReason;
use crate::store::{ReadCheck, ResolvedWrite, Write, WriteOp};
use std::collections::{BTreeMap, BTreeSet};
use waymark_resp::Reply;

/// What the driver does next for the client.
#[derive(Debug)]
pub enum Step {
    /// Send these requests to the client's near vnode, together, and hand every answer back to
    /// `on_answers`, in the same order (`None`: no answer within the client's time-out).
    Send(Vec<Request>),
    /// A conflict: wait between half and one and a half times `base_us` (jitter, so conflicting
    /// clients do not retry in lock-step), then call `resume`.
    Backoff { base_us: u64, why: String },
    /// A blocking command (`BLPOP`, …) found nothing to take: the client is blocked. Wait
    /// `poll_us`, then call `resume` to look again.
    Blocked { poll_us: u64 },
    /// The batch is over.
    Done(Finished),
}

/// What the client is answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// One reply per data command of the batch (one for `WATCH`).
    Replies(Vec<Reply>),
    /// A `WATCH`ed key changed: `EXEC` answers a nil array.
    WatchFailed,
    /// The batch failed as a whole: the error reply's text.
    Error(String),
    /// A page of a scan of the keyspace (`TxnClient::scan`): its keys, and the cursor to go on
    /// from (`None`: the scan is over).
    Keys { keys: Vec<Key>, next: Option<ScanCursor> },
}

/// How a batch ended, for the node's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Committed,
    WatchFailed,
    /// Conflicting transactions were in the way of every attempt.
    Conflicts,
    Failed,
    /// A `WATCH` or a single `GET`: no transaction to count.
    NoTransaction,
}

/// What the client knows of one transaction it submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    Committed,
    Aborted,
    /// Timed out, or the near lost track of it: it may or may not have committed.
    Unknown,
}

/// One transaction a batch submitted — or answered from its reads alone (`tx` is `None`), when
/// the reads were atomic without a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub tx: Option<TxId>,
    /// The versions the commit required (the `WATCH`ed keys and every key read for it).
    pub reads: Vec<ReadCheck>,
    pub writes: Vec<Write>,
    /// The values written, as the primaries evaluated them (a commit only).
    pub written: Vec<ResolvedWrite>,
    pub outcome: AttemptOutcome,
}

#[derive(Debug)]
pub struct Finished {
    pub answer: Answer,
    pub ended: Ended,
    pub attempts: Vec<Attempt>,
    /// Attempts that conflicted and were tried again.
    pub retries: u32,
    /// The reply would exceed `reply_max_bytes`: the driver closes the connection after it.
    pub close: bool,
}

pub(super) enum Job {
    Watch(Vec<Key>),
    Get(Key),
    Txn(TxnJob),
    /// One page of a scan (`txn::scan`).
    Scan {
        cursor: ScanCursor,
        count: u32,
    },
}

/// Data commands run as one transaction.
pub(super) struct TxnJob {
    pub cmds: Vec<DataCmd>,
    /// `EXEC`: the versions the `WATCH`ed keys had; the commit requires them.
    pub watched: BTreeMap<Key, Version>,
    /// Versions this client read before (its `WATCH`), which may spare a read-only batch its
    /// commit (`unchanged_since_seen`).
    pub seen: BTreeMap<Key, Version>,
    /// Whether the primaries evaluate the commands they can (`evaluate::at_primaries`); `false`
    /// once a primary refused one of them (`INCRBY` on text).
    pub at_primary: bool,
    /// One command outside `MULTI`: a primary's refusal (`INCRBY` on text) is the reply.
    pub single: bool,
    /// A blocking command's time-out in milliseconds (0: none), while it finds nothing to take.
    pub block_ms: Option<u64>,
}

/// How often a blocked client looks again: from the first interval, doubling to the last. A push
/// on any host is seen within the last interval (the blocked client polls its lists' primaries:
/// no host tells it of the push).
pub const BLOCKED_POLL_FIRST_US: u64 = 1_000;
pub const BLOCKED_POLL_MAX_US: u64 = 20_000;

enum Waiting {
    Nothing,
    Reads(Reading),
    Commit(Pending),
    Page,
}

/// Reads in flight: one per key, a collection's (`wants`) with its elements, and the further
/// pages of the collections read whole.
struct Reading {
    keys: Vec<Key>,
    wants: BTreeMap<Key, Want>,
    /// The answers so far, one per key, once the first ones came.
    got: Vec<Read>,
    /// The keys (by index) whose next page is in flight.
    paging: Vec<usize>,
}

/// The most element bytes one batch reads of its collections, over all their pages.
pub const ELEMENTS_READ_MAX_BYTES: usize = 512 << 20;

/// A commit in flight and what the client is answered if it commits.
struct Pending {
    reads: Vec<ReadCheck>,
    writes: Vec<Write>,
    /// One per command; `None` for a command its primary evaluates, whose reply comes from the
    /// value the commit resolved.
    replies: Vec<Option<Reply>>,
}

/// Rounds of `Stop::NeedMembers` a batch goes through before it reads the lists whole: a list
/// pushed and popped by others between its reads names other positions each time.
const MORE_ROUNDS_MAX: u32 = 3;

pub(super) struct Run {
    job: Job,
    limits: ClientLimits,
    breaks: Breaks,
    /// Conflicts so far.
    conflicts: u32,
    waiting: Waiting,
    attempts: Vec<Attempt>,
    /// `WATCH`: the version of every key read.
    pub(super) watch_read: Vec<(Key, Version)>,
    /// The attempt's commands the primaries evaluate, and the others (evaluated here), worked out
    /// once per attempt.
    split: evaluate::AtPrimaries,
    local: Vec<DataCmd>,
    /// Break `client-retries-stale-evaluation`: the first evaluation, kept for every retry.
    stale: Option<evaluate::Evaluated>,
    /// Collections an evaluation needed whole (`Stop::NeedWhole`): read whole from then on.
    whole: BTreeSet<Key>,
    /// Elements an evaluation needed besides those its commands name (`Stop::NeedMembers`: a
    /// list's, at positions its head gave), read from then on; and how many times it asked.
    more: BTreeMap<Key, BTreeSet<Member>>,
    more_rounds: u32,
    /// A blocking command: the primaries' clock when it first found nothing, and the looks since.
    blocked_since_ms: Option<u64>,
    blocked_polls: u32,
    /// The primaries' clock as the last reads gave it.
    now_ms: u64,
    /// Seeds the draws of the commands that answer at random (`HRANDFIELD`).
    seed: u64,
}

impl Run {
    pub fn new(job: Job, limits: ClientLimits, breaks: Breaks, seed: u64) -> Run {
        Run {
            job,
            limits,
            breaks,
            conflicts: 0,
            waiting: Waiting::Nothing,
            attempts: vec![],
            watch_read: vec![],
            split: evaluate::AtPrimaries { at_primary: vec![], writes: vec![] },
            local: vec![],
            stale: None,
            whole: BTreeSet::new(),
            more: BTreeMap::new(),
            more_rounds: 0,
            blocked_since_ms: None,
            blocked_polls: 0,
            now_ms: 0,
            seed,
        }
    }

    /// The batch's first requests, or those of its next attempt after a back-off.
    pub fn start(&mut self) -> Step {
        assert!(matches!(self.waiting, Waiting::Nothing), "a batch starts with nothing in flight");
        match &self.job {
            Job::Watch(keys) => self.send_reads(keys.clone(), BTreeMap::new()),
            Job::Get(key) => self.send_reads(vec![key.clone()], BTreeMap::new()),
            Job::Txn(_) => self.attempt(),
            Job::Scan { cursor, count } => {
                let request = Request::Scan { cursor: cursor.clone(), count: *count };
                self.waiting = Waiting::Page;
                Step::Send(vec![request])
            }
        }
    }

    pub fn on_answers(&mut self, answers: Vec<Option<Response>>) -> Step {
        match std::mem::replace(&mut self.waiting, Waiting::Nothing) {
            Waiting::Reads(reading) => self.on_read_answers(reading, answers),
            Waiting::Commit(pending) => {
                assert_eq!(answers.len(), 1, "one answer per commit sent");
                self.on_commit(pending, answers.into_iter().next().flatten())
            }
            Waiting::Page => {
                assert_eq!(answers.len(), 1, "one answer per page asked");
                match answer::keys(answers.into_iter().next().flatten()) {
                    Ok((keys, next)) => self.done(Answer::Keys { keys, next }, Ended::NoTransaction),
                    Err(e) => self.fail(e.0),
                }
            }
            Waiting::Nothing => panic!("answers handed back with no request in flight"),
        }
    }

    fn txn_ref(&self) -> &TxnJob {
        match &self.job {
            Job::Txn(job) => job,
            _ => panic!("a transaction step in a batch that is no transaction"),
        }
    }

    fn txn(&mut self) -> &mut TxnJob {
        match &mut self.job {
            Job::Txn(job) => job,
            _ => panic!("a transaction step in a batch that is no transaction"),
        }
    }

    fn send_reads(&mut self, keys: Vec<Key>, wants: BTreeMap<Key, Want>) -> Step {
        let request = |key: &Key| match wants.get(key) {
            Some(want) => Request::Elements { key: key.clone(), pick: want.pick() },
            None => Request::Get { key: key.clone() },
        };
        let requests = keys.iter().map(request).collect();
        self.waiting = Waiting::Reads(Reading { keys, wants, got: vec![], paging: vec![] });
        Step::Send(requests)
    }

    /// The answers to the reads in flight: the first ones, or further pages of collections read
    /// whole — each of which must find its head at the version the first page did, or the
    /// collection changed in between and the batch tries again.
    fn on_read_answers(&mut self, mut r: Reading, answers: Vec<Option<Response>>) -> Step {
        let asked = if r.got.is_empty() { r.keys.len() } else { r.paging.len() };
        assert_eq!(answers.len(), asked, "one answer per read sent");
        let mut read = Vec::with_capacity(answers.len());
        for a in answers {
            match answer::read(a) {
                Ok(one) => read.push(one),
                Err(e) => return self.fail(e.0),
            }
        }
        if r.got.is_empty() {
            r.got = read;
        } else {
            for (i, page) in std::mem::take(&mut r.paging).into_iter().zip(read) {
                if page.version != r.got[i].version {
                    let why = format!("'{}' changed between pages", String::from_utf8_lossy(&r.keys[i]));
                    return self.conflict(why);
                }
                r.got[i].elements.extend(page.elements);
                r.got[i].next = page.next;
            }
        }
        let bytes: usize =
            r.got.iter().flat_map(|g| &g.elements).map(|e| e.member.len() + e.value.as_ref().map_or(0, Vec::len)).sum();
        if bytes > ELEMENTS_READ_MAX_BYTES {
            return self.fail(format!("ERR the collections read exceed {ELEMENTS_READ_MAX_BYTES} bytes"));
        }
        let whole = |i: &usize| r.wants.get(&r.keys[*i]).is_some_and(|w| w.whole);
        r.paging = (0..r.keys.len()).filter(|i| r.got[*i].next.is_some() && whole(i)).collect();
        if r.paging.is_empty() {
            return self.on_reads(r.keys, r.got, r.wants);
        }
        let page = |i: &usize| Request::Elements {
            key: r.keys[*i].clone(),
            pick: Pick::Page { after: r.got[*i].next.clone(), count: ELEMENTS_PAGE_MAX },
        };
        let requests = r.paging.iter().map(page).collect();
        self.waiting = Waiting::Reads(r);
        Step::Send(requests)
    }

    /// One attempt of a transaction: the reads the commands evaluated here need (none when the
    /// primaries evaluate them all), then `evaluate`.
    fn attempt(&mut self) -> Step {
        let job = self.txn_ref();
        let split = match job.at_primary {
            true => evaluate::at_primaries(&job.cmds),
            false => evaluate::AtPrimaries { at_primary: vec![false; job.cmds.len()], writes: vec![] },
        };
        let local = here(&job.cmds, &split);
        let keys: Vec<Key> = evaluate::keys_to_read(&local).into_iter().collect();
        let wants = elements_to_read(&local, &self.whole, &self.more);
        (self.split, self.local) = (split, local);
        if keys.is_empty() {
            return self.evaluate(vec![], vec![], wants);
        }
        self.send_reads(keys, wants)
    }

    /// Adds the elements an evaluation asked for to those the next one reads. Each read gives the
    /// head again, and a list that moved meanwhile asks for other positions: after
    /// `MORE_ROUNDS_MAX` rounds (or a round that asks nothing new) the lists are read whole, which
    /// ends it.
    fn ask_for_more(&mut self, more: BTreeMap<Key, BTreeSet<Member>>) {
        self.more_rounds += 1;
        let mut new = false;
        for (key, members) in &more {
            let asked = self.more.entry(key.clone()).or_default();
            let before = asked.len();
            asked.extend(members.iter().cloned());
            new |= asked.len() > before;
        }
        if !new || self.more_rounds > MORE_ROUNDS_MAX {
            self.whole.extend(more.into_keys());
        }
    }

    fn on_reads(&mut self, keys: Vec<Key>, read: Vec<Read>, wants: BTreeMap<Key, Want>) -> Step {
        match &self.job {
            Job::Watch(_) => {
                self.watch_read = keys.into_iter().zip(read).map(|(key, r)| (key, r.version)).collect();
                self.done(Answer::Replies(vec![Reply::ok()]), Ended::NoTransaction)
            }
            Job::Get(key) => {
                let Read { value, version, .. } = read.into_iter().next().expect("one read sent");
                let reads = vec![ReadCheck { key: key.clone(), version }];
                self.attempts.push(answered_by_reads(reads));
                if value.as_deref().is_some_and(is_head) {
                    return self.fail(answer::WRONG_TYPE.into());
                }
                self.done(Answer::Replies(vec![value.map_or(Reply::Null, Reply::bulk)]), Ended::NoTransaction)
            }
            Job::Txn(_) => self.evaluate(keys, read, wants),
            Job::Scan { .. } => unreachable!("a scan page reads no key"),
        }
    }

    /// Runs the commands over what was read and commits, unless the reads alone were atomic.
    fn evaluate(&mut self, keys: Vec<Key>, read: Vec<Read>, wants: BTreeMap<Key, Want>) -> Step {
        let (limits, breaks) = (self.limits, self.breaks);
        let watched = &self.txn_ref().watched;
        let moved = |(key, r): (&Key, &Read)| watched.get(key).is_some_and(|w| *w != r.version);
        if !breaks.client_ignores_watch && keys.iter().zip(&read).any(moved) {
            return self.done(Answer::WatchFailed, Ended::WatchFailed);
        }
        let job = self.txn_ref();
        let mut checks = if breaks.client_ignores_watch { BTreeMap::new() } else { job.watched.clone() };
        let mut reads =
            evaluate::Reads { seed: self.seed.wrapping_add(u64::from(self.conflicts)), breaks, ..Default::default() };
        for (key, r) in keys.iter().zip(read) {
            checks.insert(key.clone(), r.version);
            if let Some(want) = wants.get(key) {
                reads.elements.insert(key.clone(), known(&r, want));
            }
            reads.values.insert(key.clone(), r.value);
            if let Some(at) = r.deadline_ms {
                reads.deadlines.of.insert(key.clone(), at);
            }
            reads.deadlines.now_ms = reads.deadlines.now_ms.max(r.now_ms);
        }
        reads.seed ^= reads.deadlines.now_ms;
        self.now_ms = self.now_ms.max(reads.deadlines.now_ms);
        let (value_max, reply_max) = (limits.value_max_bytes, limits.reply_max_bytes);
        let evaluated = match evaluate::evaluate(&self.local, &reads, value_max, reply_max) {
            Ok(evaluated) => evaluated,
            Err(evaluate::Stop::TooLarge(too_large)) => {
                let mut finished = self.finish(Answer::Error(too_large.to_string()), Ended::Failed);
                finished.close = true;
                return Step::Done(finished);
            }
            Err(evaluate::Stop::NeedWhole(NeedWhole(more))) => {
                let before = self.whole.len();
                self.whole.extend(more);
                if self.whole.len() == before {
                    debug_assert!(false, "an evaluation asked again for collections it read whole");
                    return self.fail("ERR internal: a collection read whole was asked for again".into());
                }
                return self.attempt();
            }
            Err(evaluate::Stop::NeedMembers(NeedMembers(more))) => {
                self.ask_for_more(more);
                return self.attempt();
            }
        };
        let evaluated = match (breaks.client_retries_stale_evaluation, self.stale.take()) {
            (true, Some(first)) => first,
            _ => evaluated,
        };
        if breaks.client_retries_stale_evaluation {
            self.stale = Some(evaluated.clone());
        }
        let mut local_replies = evaluated.replies.into_iter();
        let replies: Vec<Option<Reply>> =
            self.split.at_primary.iter().map(|at| if *at { None } else { local_replies.next() }).collect();
        let mut writes = evaluated.writes;
        writes.extend(self.split.writes.iter().cloned());
        let no_commit = writes.is_empty() && self.reads_suffice(&keys, &checks);
        let reads = checks.into_iter().map(|(key, version)| ReadCheck { key, version }).collect();
        if no_commit {
            self.attempts.push(answered_by_reads(reads));
            return self.done(Answer::Replies(replies.into_iter().flatten().collect()), Ended::Committed);
        }
        self.commit(Pending { reads, writes, replies })
    }

    /// Whether a read-only transaction's reads are atomic without a commit: one key read alone,
    /// or every key read unchanged since this client read it before (`unchanged_since_seen`).
    fn reads_suffice(&self, keys: &[Key], checks: &BTreeMap<Key, Version>) -> bool {
        if self.breaks.client_skips_read_only_commit {
            return true;
        }
        let job = self.txn_ref();
        (checks.len() <= 1 && job.watched.is_empty()) || unchanged_since_seen(keys, checks, &job.watched, &job.seen)
    }

    fn commit(&mut self, pending: Pending) -> Step {
        if let Some(e) = too_large(&pending.writes, &self.limits) {
            return self.fail(e);
        }
        let request = Request::Txn { reads: pending.reads.clone(), writes: pending.writes.clone() };
        self.waiting = Waiting::Commit(pending);
        Step::Send(vec![request])
    }

    fn on_commit(&mut self, pending: Pending, answer: Option<Response>) -> Step {
        let Pending { reads, writes, replies } = pending;
        let attempt =
            |tx, written, outcome| Attempt { tx, reads: reads.clone(), writes: writes.clone(), written, outcome };
        match answer {
            Some(Response::Committed { tx, writes: resolved }) => {
                let job = self.txn_ref();
                let value = |k: &Key| resolved.iter().find(|w| &w.key == k).and_then(|w| w.value.clone());
                let replies = job
                    .cmds
                    .iter()
                    .zip(replies)
                    .map(|(c, r)| r.unwrap_or_else(|| evaluate::reply_at_primary(c, value)))
                    .collect();
                self.attempts.push(attempt(Some(tx), resolved, AttemptOutcome::Committed));
                self.done(Answer::Replies(replies), Ended::Committed)
            }
            Some(Response::Aborted {
                tx,
                reason:
                    reason @ (AbortReason::NotAnInteger { .. }
                    | AbortReason::ValueTooLarge { .. }
                    | AbortReason::WrongType { .. }),
            }) if replies.contains(&None) => {
                self.attempts.push(attempt(tx, vec![], AttemptOutcome::Aborted));
                let job = self.txn();
                // A refusal on a collection (or a head an `APPEND` would forge) is evaluated here
                // too, which says which.
                if job.single && !matches!(reason, AbortReason::WrongType { .. }) {
                    let max = self.limits.value_max_bytes;
                    return self.fail(match reason {
                        AbortReason::NotAnInteger { .. } => NOT_AN_INTEGER.into(),
                        _ => format!("ERR string exceeds maximum allowed size ({max} bytes)"),
                    });
                }
                // Evaluated here instead: the failing command (`INCRBY` on text, `APPEND` past the
                // value limit) answers its error and the others apply, as in Redis.
                job.at_primary = false;
                self.attempt()
            }
            Some(Response::Aborted { tx, reason: AbortReason::WatchFailed { key } })
                if self.txn_ref().watched.contains_key(&key) =>
            {
                self.attempts.push(attempt(tx, vec![], AttemptOutcome::Aborted));
                self.done(Answer::WatchFailed, Ended::WatchFailed)
            }
            other => {
                let tx = other.as_ref().and_then(tx_of);
                match answer::failure(other) {
                    Failure::Conflict(why) => {
                        self.attempts.push(attempt(tx, vec![], AttemptOutcome::Aborted));
                        self.conflict(why)
                    }
                    Failure::Error(e, outcome) => {
                        self.attempts.push(attempt(tx, vec![], outcome));
                        self.fail(e)
                    }
                }
            }
        }
    }

    /// Another attempt after a back-off, within `conflict_retries_max`.
    fn conflict(&mut self, why: String) -> Step {
        self.conflicts += 1;
        let max = self.limits.conflict_retries_max;
        if self.conflicts >= max {
            let e = format!("ERR transaction aborted {max} times by conflicting transactions; try again");
            return self.done(Answer::Error(e), Ended::Conflicts);
        }
        let base_us = BACKOFF_MIN_US.saturating_mul(1 << (self.conflicts - 1).min(10)).min(BACKOFF_MAX_US);
        Step::Backoff { base_us, why }
    }

    fn fail(&mut self, e: String) -> Step {
        self.done(Answer::Error(e), Ended::Failed)
    }

    fn done(&mut self, answer: Answer, ended: Ended) -> Step {
        if let Some(poll) = self.still_blocked(&answer) {
            return poll;
        }
        Step::Done(self.finish(answer, ended))
    }

    /// A blocking command that found nothing to take (its reply nil) before its time-out: it
    /// looks again after a poll interval. Past the time-out (by the primaries' clock, from when
    /// it first found nothing) the nil is the reply, as Redis answers a time-out.
    fn still_blocked(&mut self, answer: &Answer) -> Option<Step> {
        let Job::Txn(TxnJob { block_ms: Some(timeout_ms), .. }) = &self.job else { return None };
        let nothing = matches!(answer, Answer::Replies(r) if matches!(r[..], [Reply::Null | Reply::NullArray]));
        if !nothing {
            return None;
        }
        let since = *self.blocked_since_ms.get_or_insert(self.now_ms);
        let left_ms = match timeout_ms {
            0 => u64::MAX,
            t => (since + t).saturating_sub(self.now_ms),
        };
        if left_ms == 0 {
            return None;
        }
        let poll_us = (BLOCKED_POLL_FIRST_US << self.blocked_polls.min(16)).min(BLOCKED_POLL_MAX_US);
        self.blocked_polls += 1;
        self.attempts.clear(); // looks that took nothing: the history is the one that ends it
        self.conflicts = 0;
        Some(Step::Blocked { poll_us: poll_us.min(left_ms.saturating_mul(1_000)) })
    }

    fn finish(&mut self, answer: Answer, ended: Ended) -> Finished {
        let retries = self.conflicts.min(self.limits.conflict_retries_max.saturating_sub(1));
        Finished { answer, ended, attempts: std::mem::take(&mut self.attempts), retries, close: false }
    }
}

/// What a read of a collection's head tells of its elements: none if it holds no collection,
/// else those picked — all of them when it was read whole.
fn known(r: &Read, want: &Want) -> Known {
    if !r.value.as_deref().is_some_and(is_head) {
        return Known::none();
    }
    let members = r.elements.iter().map(|e| (e.member.clone(), e.value.clone())).collect();
    Known::read(members, want.read_whole(r.next.as_ref()))
}

/// The commands evaluated here: those `split` leaves to no primary.
fn here(cmds: &[DataCmd], split: &evaluate::AtPrimaries) -> Vec<DataCmd> {
    cmds.iter().zip(&split.at_primary).filter(|(_, at)| !**at).map(|(c, _)| c.clone()).collect()
}

fn answered_by_reads(reads: Vec<ReadCheck>) -> Attempt {
    Attempt { tx: None, reads, writes: vec![], written: vec![], outcome: AttemptOutcome::Committed }
}

fn tx_of(r: &Response) -> Option<TxId> {
    match r {
        Response::Aborted { tx, .. } => tx.clone(),
        Response::Unknown { tx } | Response::Committed { tx, .. } => Some(tx.clone()),
        _ => None,
    }
}

/// Why `writes` may not be sent: a value past `value_max_bytes`, or more than one prepare can
/// carry.
fn too_large(writes: &[Write], limits: &ClientLimits) -> Option<String> {
    let size = |w: &Write| match &w.op {
        WriteOp::Set(v) | WriteOp::Append(v) => v.len(),
        _ => 0,
    };
    let max = limits.value_max_bytes;
    if writes.iter().any(|w| size(w) > max) {
        return Some(format!("ERR string exceeds maximum allowed size ({max} bytes)"));
    }
    let total: usize = writes.iter().map(|w| size(w) + w.key.len()).sum();
    (total > limits.txn_max_bytes)
        .then(|| "ERR transaction too large: its values exceed half of limits.frame_max_bytes".to_string())
}

/// Whether a read-only transaction's reads (`keys`, at the versions in `checks`) are atomic
/// without a commit: every key `WATCH`ed was read now, and every key read now was read before by
/// this client (`seen`) at the version read now.
///
/// Why that is enough: versions only grow, so key k held one value from its earlier read (at
/// instant s_k) to its read now (r_k). Every earlier read ended before any read now began, so
/// at t = min(r_k) — an instant inside this command — every key held the value read: the reads
/// are one snapshot, at t, as the commit's read checks would have shown. Nothing is revealed
/// that this client was not answered before, so real-time safety holds as for the reads.
pub(super) fn unchanged_since_seen(
    keys: &[Key],
    checks: &BTreeMap<Key, Version>,
    watched: &BTreeMap<Key, Version>,
    seen: &BTreeMap<Key, Version>,
) -> bool {
    let read_now = |key: &Key| keys.contains(key);
    let as_seen = |key: &Key| checks.get(key).is_some_and(|v| seen.get(key) == Some(v));
    !keys.is_empty() && watched.keys().all(read_now) && keys.iter().all(as_seen)
}
