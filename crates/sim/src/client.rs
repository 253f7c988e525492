//! A simulated client: runs one workload operation at a time — a few batches of Redis commands
//! (`WATCH`, a command, `MULTI … EXEC`) — through the core's transaction client
//! (`waymark_core::client`), exactly as the server's Redis session does, and records what it saw.

use crate::history::{ClientRead, ClientTxn, Observation, Outcome};
use crate::workloads::{Batch, Plan};
use std::collections::BTreeMap;
use waymark_core::client::{AttemptOutcome, ClientLimits, Finished, Step, TxnClient};
use waymark_core::{AbortReason, Breaks, Key, Request, Response, Value, Version};

/// Keys per page of a simulated scan: small, so a scan of a few keys takes several pages and
/// resumes from cursors inside partitions.
pub const SCAN_PAGE_KEYS: u32 = 1;

/// A batch's requests in flight: numbered `first_req` on, all sent to one near vnode together.
#[derive(Clone, Debug)]
pub struct InFlight {
    pub first_req: u64,
    /// When the client stops waiting for the answers still missing.
    pub deadline_us: u64,
    pub sent_us: u64,
    requests: Vec<Request>,
    answers: Vec<Option<Response>>,
    answered: usize,
}

impl InFlight {
    pub fn holds(&self, req: u64) -> bool {
        (self.first_req..self.first_req + self.requests.len() as u64).contains(&req)
    }
}

pub struct Client {
    pub id: usize,
    pub req_seq: u64,
    pub in_flight: Option<InFlight>,
    txn: TxnClient,
    op: Option<Op>,
}

struct Op {
    plan: Plan,
    /// Batches of the plan begun so far.
    batches: usize,
    label: &'static str,
    /// When the batch in progress began.
    began_us: u64,
    /// Every value a read of this operation answered, by key and version.
    values: BTreeMap<(Key, Version), Option<Value>>,
    /// When the batch in progress sent each of its commits, and its last reads.
    commits_sent_us: Vec<u64>,
    reads_sent_us: u64,
}

impl Client {
    pub fn new(id: usize, breaks: Breaks) -> Self {
        Client { id, req_seq: 0, in_flight: None, txn: TxnClient::new(ClientLimits::default(), breaks), op: None }
    }

    pub fn is_idle(&self) -> bool {
        self.op.is_none()
    }

    pub fn plan(&self) -> Option<&Plan> {
        self.op.as_ref().map(|o| &o.plan)
    }

    /// Begins an operation's first batch (`batch`, labelled `label` in the history).
    pub fn start(&mut self, plan: Plan, label: &'static str, batch: Batch, now_us: u64) -> Step {
        let values = BTreeMap::new();
        self.op = Some(Op {
            plan,
            batches: 0,
            label,
            began_us: now_us,
            values,
            commits_sent_us: vec![],
            reads_sent_us: now_us,
        });
        self.next_batch(label, batch, now_us)
    }

    /// Begins the operation's next batch.
    pub fn next_batch(&mut self, label: &'static str, batch: Batch, now_us: u64) -> Step {
        let op = self.op.as_mut().expect("an operation in progress");
        op.batches += 1;
        op.label = label;
        op.began_us = now_us;
        op.commits_sent_us.clear();
        match batch {
            Batch::Watch(keys) => self.txn.watch(keys),
            Batch::Command(cmd) => self.txn.command(cmd),
            Batch::Exec(cmds) => self.txn.exec(cmds),
            Batch::Blocking(cmd, timeout_ms) => self.txn.blocking(cmd, timeout_ms),
            Batch::Scan(cursor) => self.txn.scan(cursor, SCAN_PAGE_KEYS),
        }
    }

    /// Batches of the operation begun so far.
    pub fn batches(&self) -> usize {
        self.op.as_ref().map_or(0, |o| o.batches)
    }

    /// The operation is over: nothing stays `WATCH`ed for the next one.
    pub fn end_op(&mut self) {
        self.op = None;
        self.txn.unwatch();
    }

    /// Numbers the requests of a `Step::Send` and keeps them in flight until answered.
    pub fn send(&mut self, requests: Vec<Request>, now_us: u64, timeout_us: u64) -> (u64, Vec<Request>) {
        if let Some(op) = self.op.as_mut() {
            match requests.first() {
                Some(Request::Txn { .. }) => op.commits_sent_us.push(now_us),
                _ => op.reads_sent_us = now_us,
            }
        }
        let first_req = self.req_seq + 1;
        self.req_seq += requests.len() as u64;
        let answers = vec![None; requests.len()];
        let flight = InFlight {
            first_req,
            deadline_us: now_us + timeout_us,
            sent_us: now_us,
            requests: requests.clone(),
            answers,
            answered: 0,
        };
        self.in_flight = Some(flight);
        (first_req, requests)
    }

    /// What an answer to request `req` tells this client of committed data (for the real-time
    /// checkers), besides a commit acknowledgement.
    pub fn observation(&self, req: u64, response: &Response) -> Option<Observation> {
        let flight = self.in_flight.as_ref().filter(|f| f.holds(req))?;
        match (&flight.requests[(req - flight.first_req) as usize], response) {
            (Request::Get { key }, Response::Value { version, .. })
            | (Request::Elements { key, .. }, Response::Elements { version, .. }) => {
                Some(Observation::Read { key: key.clone(), version: *version })
            }
            (Request::Txn { reads, .. }, Response::Aborted { reason: AbortReason::WatchFailed { key }, .. }) => {
                let read = reads.iter().find(|r| r.key == *key)?;
                Some(Observation::WatchFailed { key: key.clone(), read_version: read.version })
            }
            _ => None,
        }
    }

    /// An answer to request `req`; once every request of the batch is answered (or, with
    /// `timed_out`, the deadline passed), the client's next step.
    pub fn on_response(&mut self, req: u64, response: Option<Response>, timed_out: bool) -> Option<Step> {
        let flight = self.in_flight.as_mut().filter(|f| f.holds(req) || timed_out)?;
        if let Some(response) = response {
            let i = (req - flight.first_req) as usize;
            if flight.answers[i].is_none() {
                flight.answered += 1;
            }
            // A collection's read answers its head as a `GET` answers a value.
            let read = match (&flight.requests[i], &response) {
                (Request::Get { key }, Response::Value { value, version, .. })
                | (Request::Elements { key, .. }, Response::Elements { value, version, .. }) => {
                    Some((key, version, value))
                }
                _ => None,
            };
            if let Some((key, version, value)) = read {
                let op = self.op.as_mut().expect("an operation in progress");
                op.values.insert((key.clone(), *version), value.clone());
            }
            flight.answers[i] = Some(response);
        }
        if flight.answered < flight.requests.len() && !timed_out {
            return None;
        }
        let flight = self.in_flight.take().expect("a batch in flight");
        Some(self.txn.on_answers(flight.answers))
    }

    pub fn resume(&mut self) -> Step {
        self.txn.resume()
    }

    /// The transactions a finished batch submitted, as the history records them: each invoked when
    /// its commit was sent (one answered by its reads alone, when they were).
    pub fn records(&self, finished: &Finished, now_us: u64) -> Vec<ClientTxn> {
        let op = self.op.as_ref().expect("an operation in progress");
        let mut commits = op.commits_sent_us.iter();
        let invoked: Vec<u64> = finished
            .attempts
            .iter()
            .map(|a| {
                let answered_by_reads = a.tx.is_none() && a.outcome == AttemptOutcome::Committed;
                if answered_by_reads {
                    op.reads_sent_us
                } else {
                    *commits.next().unwrap_or(&op.began_us)
                }
            })
            .collect();
        let value = |key: &Key, version: Version| op.values.get(&(key.clone(), version)).cloned().flatten();
        let last = finished.attempts.len().saturating_sub(1);
        let record = |(i, a): (usize, &waymark_core::client::Attempt)| ClientTxn {
            client: self.id,
            kind: op.label,
            tx: a.tx.clone(),
            reads: a
                .reads
                .iter()
                .map(|r| ClientRead { key: r.key.clone(), value: value(&r.key, r.version), version: r.version })
                .collect(),
            writes: a.writes.clone(),
            written: a.written.clone(),
            outcome: match a.outcome {
                AttemptOutcome::Committed => Outcome::Committed,
                AttemptOutcome::Aborted => Outcome::Aborted,
                AttemptOutcome::Unknown => Outcome::Unknown,
            },
            invoked_us: invoked[i],
            completed_us: now_us,
            retried: i < last,
        };
        finished.attempts.iter().enumerate().map(record).collect()
    }
}
