//! The nemesis's workload: bank clients spread over the hosts, through the Redis protocol, each
//! operation recorded with its invoke and completion times and its outcome — ok, aborted (its
//! WATCH saw a conflict), refused (the server said nothing was done), or unknown (a timeout or a
//! lost connection: it may have committed).

use crate::cmd::bank::{self, Transfer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// A WATCH-guarded MULTI/EXEC moving money between two accounts.
    Transfer,
    /// An MGET of every account: a read-only transaction, whose sum must be the bank's total.
    Audit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    /// The server refused (`TRYAGAIN`…) before committing anything.
    Refused,
    Unknown,
    /// The cluster answered and wrote nothing: a transfer aborted by its WATCH (another
    /// transaction wrote a balance it read) or declined (not enough money).
    Aborted,
}

/// One operation of the history (a line of `history.jsonl`).
#[derive(Clone, Debug, Serialize)]
pub struct Op {
    pub client: usize,
    pub host: usize,
    pub kind: OpKind,
    pub invoke_ms: u64,
    pub complete_ms: u64,
    pub outcome: Outcome,
    /// An audit's sum of the balances it read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<i64>,
    /// What the server or the connection said, when not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One in this many operations is an audit.
const AUDIT_ONE_IN: u32 = 8;
/// Pause after a refusal (`TRYAGAIN`), as a client of a cluster that is failing over would.
const REFUSED_PAUSE: Duration = Duration::from_millis(20);
/// Back-off after a failed connection, doubled up to the cap.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What one client needs.
pub struct Client<'a> {
    pub id: usize,
    pub seed: u64,
    pub hosts: &'a [SocketAddr],
    pub accounts: &'a [String],
    pub started: Instant,
    pub stop: &'a AtomicBool,
}

impl Client<'_> {
    /// Runs until `stop`, starting at host `id % hosts` and moving to the next one whenever a
    /// connection fails.
    pub fn run(self) -> Vec<Op> {
        let mut rng = StdRng::seed_from_u64(self.seed ^ (self.id as u64) << 32);
        let mut history = vec![];
        let mut host = self.id % self.hosts.len();
        let mut backoff = BACKOFF_MIN;
        while !self.stop.load(Ordering::Relaxed) {
            let mut con = match bank::connect(self.hosts[host]) {
                Ok(con) => con,
                Err(_) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    host = (host + 1) % self.hosts.len();
                    continue;
                }
            };
            backoff = BACKOFF_MIN;
            while !self.stop.load(Ordering::Relaxed) {
                let op = self.one(&mut con, &mut rng, host);
                let (lost, refused) = (op.outcome == Outcome::Unknown, op.outcome == Outcome::Refused);
                history.push(op);
                if refused {
                    std::thread::sleep(REFUSED_PAUSE);
                }
                if lost {
                    host = (host + 1) % self.hosts.len();
                    break; // a new connection, to another host
                }
            }
        }
        history
    }

    fn one(&self, con: &mut redis::Connection, rng: &mut StdRng, host: usize) -> Op {
        let invoke_ms = self.started.elapsed().as_millis() as u64;
        let audit = rng.gen_ratio(1, AUDIT_ONE_IN);
        let (kind, result) = if audit {
            let r = redis::cmd("MGET").arg(self.accounts).query::<Vec<Option<i64>>>(con);
            (OpKind::Audit, r.map(|b| Some(b.iter().map(|v| v.unwrap_or(0)).sum::<i64>())))
        } else {
            let from = rng.gen_range(0..self.accounts.len());
            let to = (from + rng.gen_range(1..self.accounts.len())) % self.accounts.len();
            let amount = rng.gen_range(1..=5);
            let r = bank::transfer(con, &self.accounts[from], &self.accounts[to], amount);
            (OpKind::Transfer, r.map(|t| (t == Transfer::Committed).then_some(0)))
        };
        let complete_ms = self.started.elapsed().as_millis() as u64;
        let (outcome, sum, error) = match result {
            Ok(Some(sum)) => (Outcome::Ok, (kind == OpKind::Audit).then_some(sum), None),
            // Aborted by a WATCH, or declined: nothing written.
            Ok(None) => (Outcome::Aborted, None, None),
            Err(e) if is_definite(&e) => (Outcome::Refused, None, Some(e.to_string())),
            Err(e) => (Outcome::Unknown, None, Some(e.to_string())),
        };
        Op { client: self.id, host, kind, invoke_ms, complete_ms, outcome, sum, error }
    }
}

/// An error reply that says nothing was done: the server refused before committing anything.
/// Anything else — a timeout, a lost connection, an unknown outcome — may have committed.
fn is_definite(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        return false;
    }
    let text = e.to_string();
    ["TRYAGAIN", "NOREPLICAS", "CLUSTERDOWN", "LOADING", "EXECABORT"].iter().any(|w| text.contains(w))
}
