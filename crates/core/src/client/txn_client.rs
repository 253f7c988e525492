//! One client's transactions: the keys it `WATCH`es and the batch in progress (`run.rs`).

use super::run::{Job, Run, Step, TxnJob};
use super::{ClientLimits, DataCmd};
use crate::breaks::Breaks;
use crate::ids::{Key, Version};
use crate::io::{Response, ScanCursor};
use std::collections::BTreeMap;

/// A client's side of its transactions, driven one batch at a time: start one with `watch`,
/// `command` or `exec`, carry out each [`Step`], and hand back answers (`on_answers`) or wake it
/// after a back-off (`resume`) until the step is `Done`.
pub struct TxnClient {
    limits: ClientLimits,
    breaks: Breaks,
    /// `WATCH`ed keys and the version each had when watched; `EXEC` requires them unchanged.
    watched: BTreeMap<Key, Version>,
    run: Option<Run>,
    /// Batches begun: seeds each one's random draws.
    batches: u64,
}

impl TxnClient {
    pub fn new(limits: ClientLimits, breaks: Breaks) -> Self {
        TxnClient { limits, breaks, watched: BTreeMap::new(), run: None, batches: 0 }
    }

    /// Whether a batch is in progress.
    pub fn is_busy(&self) -> bool {
        self.run.is_some()
    }

    pub fn watched(&self) -> &BTreeMap<Key, Version> {
        &self.watched
    }

    /// `WATCH keys`: reads their versions, which a later `EXEC` requires unchanged.
    pub fn watch(&mut self, keys: Vec<Key>) -> Step {
        self.begin(Job::Watch(keys))
    }

    /// `UNWATCH`, `DISCARD`: forgets the `WATCH`ed keys.
    pub fn unwatch(&mut self) {
        self.watched.clear();
    }

    /// A data command outside `MULTI`. Blind writes and `INCRBY`/`APPEND` go straight to the
    /// primaries, which evaluate them under their locks (the reply comes from the commit); a
    /// single `GET` is one read; the rest read first.
    pub fn command(&mut self, cmd: DataCmd) -> Step {
        if let DataCmd::Get(key) = cmd {
            return self.begin(Job::Get(key));
        }
        let seen = self.watched.clone();
        let job =
            TxnJob { cmds: vec![cmd], watched: BTreeMap::new(), seen, at_primary: true, single: true, block_ms: None };
        self.begin(Job::Txn(job))
    }

    /// A blocking command outside `MULTI` (`BLPOP` as `LMPOP`, `BLMOVE` as `LMOVE`): run as
    /// `command`, and while it finds nothing to take (a nil reply) the client is blocked
    /// (`Step::Blocked`), up to `timeout_ms` (0: for ever), then answers nil. Inside `MULTI` the
    /// same command runs once, as in Redis.
    pub fn blocking(&mut self, cmd: DataCmd, timeout_ms: u64) -> Step {
        let seen = self.watched.clone();
        let block_ms = Some(timeout_ms);
        let job = TxnJob { cmds: vec![cmd], watched: BTreeMap::new(), seen, at_primary: true, single: true, block_ms };
        self.begin(Job::Txn(job))
    }

    /// `EXEC` of the commands queued since `MULTI`, with the `WATCH`ed versions as read checks.
    /// The `WATCH`ed keys are forgotten, whatever the outcome.
    pub fn exec(&mut self, cmds: Vec<DataCmd>) -> Step {
        let watched = std::mem::take(&mut self.watched);
        let job = TxnJob { cmds, seen: watched.clone(), watched, at_primary: true, single: false, block_ms: None };
        self.begin(Job::Txn(job))
    }

    /// One page of a scan of the keyspace from `cursor`, at most `count` keys: `Answer::Keys`.
    /// Every key present from the first page's request to the last page's answer is in some page
    /// (`txn::scan`).
    pub fn scan(&mut self, cursor: ScanCursor, count: u32) -> Step {
        self.begin(Job::Scan { cursor, count })
    }

    /// The answers to the requests of the last `Step::Send`, in order (`None`: not answered in time).
    pub fn on_answers(&mut self, answers: Vec<Option<Response>>) -> Step {
        let mut run = self.run.take().expect("answers for a batch in progress");
        let step = run.on_answers(answers);
        self.keep(run, step)
    }

    /// The next attempt, once the back-off of the last `Step::Backoff` is over.
    pub fn resume(&mut self) -> Step {
        let mut run = self.run.take().expect("a batch in progress to resume");
        let step = run.start();
        self.keep(run, step)
    }

    /// Gives the batch in progress up (its connection closed, or the node stops): whatever it
    /// sent may or may not take effect.
    pub fn abandon(&mut self) {
        self.run = None;
    }

    fn begin(&mut self, job: Job) -> Step {
        assert!(self.run.is_none(), "one batch at a time per client");
        self.batches = self.batches.wrapping_add(1);
        // Golden-ratio steps: each batch's seed far from the last (`HRANDFIELD`'s draws).
        let seed = self.batches.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut run = Run::new(job, self.limits, self.breaks, seed);
        let step = run.start();
        self.keep(run, step)
    }

    fn keep(&mut self, run: Run, step: Step) -> Step {
        match &step {
            Step::Done(_) => self.watched.extend(run.watch_read),
            _ => self.run = Some(run),
        }
        step
    }
}
