//! The nemesis's workloads: bank clients, or list-append clients (Elle's workload: MULTI/EXEC
//! transactions that GET lists and APPEND unique elements to them), spread over the hosts,
//! through the Redis protocol, each operation recorded with its invoke and completion times and its outcome — ok, aborted (its
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
    /// A MULTI/EXEC of list reads then appends (`micro`).
    Append,
}

/// Which workload the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Bank,
    /// List-append transactions, checked by the simulator's serializability checker.
    Append,
}

impl Workload {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Bank => "bank",
            Workload::Append => "append",
        }
    }
}

/// One step of a list-append transaction: a list key is `list<key>`, its value the elements
/// appended so far, each followed by a comma.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Micro {
    Append {
        key: u64,
        elem: u64,
    },
    /// The list read; `None` until EXEC answered.
    Read {
        key: u64,
        list: Option<Vec<u64>>,
    },
}

/// The Redis key of list `key`.
pub fn list_key(key: u64) -> String {
    format!("list{key}")
}

/// A list's elements from its value (`None`: the key does not exist, the empty list).
pub fn parse_list(value: Option<&str>) -> Result<Vec<u64>, String> {
    let text = value.unwrap_or_default();
    text.split(',').filter(|e| !e.is_empty()).map(|e| e.parse().map_err(|_| format!("not a list: {text:?}"))).collect()
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
    /// A list-append transaction's steps (reads filled in when it committed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub micro: Vec<Micro>,
}

/// One in this many operations is an audit.
const AUDIT_ONE_IN: u32 = 8;
/// Pause after a refusal (`TRYAGAIN`), as a client of a cluster that is failing over would.
const REFUSED_PAUSE: Duration = Duration::from_millis(20);
/// Back-off after a failed connection, doubled up to the cap.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Lists of the append workload written at a time...
pub const LIST_KEYS: u64 = 8;
/// ...for this long, then the next eight: a list's value is rewritten whole by each APPEND, so a
/// list that grew for the whole run made the log grow with its square (a 300 s run filled a
/// 256 MiB disk by itself).
const LIST_LIFE_MS: u64 = 3_000;

/// Every list a run of `seconds` may touch.
pub fn list_keys(seconds: u64) -> u64 {
    (seconds * 1000 / LIST_LIFE_MS + 2) * LIST_KEYS
}
/// Element numbers: client `c` appends `(c + 1) * ELEMS_PER_CLIENT + n` for its `n`-th (far more
/// than a client appends in a run).
const ELEMS_PER_CLIENT: u64 = 10_000_000;

/// What one client needs.
pub struct Client<'a> {
    pub id: usize,
    pub workload: Workload,
    pub seed: u64,
    pub hosts: &'a [SocketAddr],
    pub accounts: &'a [String],
    pub started: Instant,
    pub stop: &'a AtomicBool,
    /// Elements this client appended so far (the append workload).
    pub appended: std::cell::Cell<u64>,
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
        match self.workload {
            Workload::Bank => self.bank_op(con, rng, host),
            Workload::Append => self.append_op(con, rng, host),
        }
    }

    fn bank_op(&self, con: &mut redis::Connection, rng: &mut StdRng, host: usize) -> Op {
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
        Op { client: self.id, host, kind, invoke_ms, complete_ms, outcome, sum, error, micro: vec![] }
    }

    /// One transaction: GET one or two lists, then APPEND a unique element to one or two, in one
    /// MULTI/EXEC (reads first, so none sees the transaction's own appends).
    fn append_op(&self, con: &mut redis::Connection, rng: &mut StdRng, host: usize) -> Op {
        let mut micro = vec![];
        let first = self.started.elapsed().as_millis() as u64 / LIST_LIFE_MS * LIST_KEYS;
        let keys = first..first + LIST_KEYS;
        for _ in 0..rng.gen_range(1..=2) {
            micro.push(Micro::Read { key: rng.gen_range(keys.clone()), list: None });
        }
        for _ in 0..rng.gen_range(1..=2) {
            // Unique across the run (and readable): the client's number, then its own count.
            let elem = (self.id as u64 + 1) * ELEMS_PER_CLIENT + self.appended.get() % ELEMS_PER_CLIENT;
            self.appended.set(self.appended.get() + 1);
            micro.push(Micro::Append { key: rng.gen_range(keys.clone()), elem });
        }
        let invoke_ms = self.started.elapsed().as_millis() as u64;
        let result = exec_lists(con, &micro);
        let complete_ms = self.started.elapsed().as_millis() as u64;
        let (outcome, error) = match result {
            Ok(replies) => match fill_reads(&mut micro, &replies) {
                Ok(()) => (Outcome::Ok, None),
                Err(e) => (Outcome::Unknown, Some(e)),
            },
            Err(e) => (exec_outcome(&e), Some(e.to_string())),
        };
        Op { client: self.id, host, kind: OpKind::Append, invoke_ms, complete_ms, outcome, sum: None, error, micro }
    }
}

/// MULTI, the transaction's commands, EXEC: EXEC's replies, one per command.
fn exec_lists(con: &mut redis::Connection, micro: &[Micro]) -> redis::RedisResult<Vec<redis::Value>> {
    redis::cmd("MULTI").query::<()>(con)?;
    for m in micro {
        let queued = match m {
            Micro::Read { key, .. } => redis::cmd("GET").arg(list_key(*key)).query::<String>(con),
            Micro::Append { key, elem } => redis::cmd("APPEND").arg(list_key(*key)).arg(format!("{elem},")).query(con),
        };
        if let Err(e) = queued {
            let _ = redis::cmd("DISCARD").query::<()>(con);
            return Err(e);
        }
    }
    redis::cmd("EXEC").query(con)
}

/// What an error of a MULTI/EXEC says became of the transaction: the server's words for "nothing
/// was written" make it aborted (a conflict, a timeout before any commit) or refused; a lost
/// connection, a timeout or the server's "unknown" leave it unknown.
fn exec_outcome(e: &redis::RedisError) -> Outcome {
    let text = e.to_string();
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || text.contains("unknown") {
        Outcome::Unknown
    } else if is_definite(e) || text.contains("unavailable") {
        Outcome::Refused
    } else if text.contains("aborted") || text.contains("nothing was written") {
        Outcome::Aborted
    } else {
        Outcome::Unknown
    }
}

/// The lists EXEC answered, into the transaction's reads (one reply per step, in order).
fn fill_reads(micro: &mut [Micro], replies: &[redis::Value]) -> Result<(), String> {
    if replies.len() != micro.len() {
        return Err(format!("EXEC answered {} replies to {} commands", replies.len(), micro.len()));
    }
    for (m, reply) in micro.iter_mut().zip(replies) {
        if let Micro::Read { list, .. } = m {
            let value: Option<String> = redis::from_redis_value(reply).map_err(|e| e.to_string())?;
            *list = Some(parse_list(value.as_deref())?);
        }
    }
    Ok(())
}

/// An error reply that says nothing was done: the server refused before committing anything.
/// Anything else — a timeout, a lost connection, an unknown outcome — may have committed.
fn is_definite(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        return false;
    }
    // The client library names some codes itself (`TryAgain: …`), so the kind is asked too.
    if matches!(
        e.kind(),
        redis::ErrorKind::TryAgain | redis::ErrorKind::ClusterDown | redis::ErrorKind::BusyLoadingError
    ) {
        return true;
    }
    let text = e.to_string();
    ["TRYAGAIN", "NOREPLICAS", "CLUSTERDOWN", "LOADING", "EXECABORT"].iter().any(|w| text.contains(w))
}
