//! `waymark bench --etcd ENDPOINTS`: the `set` and `bank` workloads against an etcd cluster, for
//! the replicated peers of `bench/peers.sh` (issue 38). etcd's JSON gRPC gateway (`POST
//! /v3/kv/put`, `/v3/kv/txn`; keys and values in base64, 64-bit integers as strings) over `ureq`:
//! the `etcd-client` crate compiles its protobufs at build time and needs `protoc`, which CI does
//! not have. Each client is a thread with its own keep-alive connection to one member (clients
//! spread over the members, as over Waymark's hosts; a follower forwards writes to the leader).
//!
//! - `set`: a put of a random key of the keyspace.
//! - `bank`: one Txn reading both accounts (their values and mod revisions, at one revision),
//!   then a Txn that compares both mod revisions with what was read and, if neither moved, puts
//!   both new balances; retried (bounded) while a compare fails — the WATCH of Waymark's bank.

use super::stats::{Outcome, Recorder};
use super::workload::{Kind, Start, Workload};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::Rng;
use serde_json::{json, Value};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Longest wait for one request.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed request.
const ERROR_PAUSE: Duration = Duration::from_millis(50);
/// Attempts of one transfer before it is given up as an error (a failed compare each time).
const TRANSFER_ATTEMPTS_MAX: u64 = 1_000;
const AMOUNT_MAX: i64 = 50;

#[derive(Debug, Error)]
pub enum EtcdError {
    #[error("{0}: {1}")]
    Request(String, String),
    #[error("{0}: unexpected reply: {1}")]
    Reply(String, String),
}

/// One client's connection to one member.
pub struct Etcd {
    agent: ureq::Agent,
    base: String,
}

/// How a transfer attempt ended.
enum Transfer {
    Committed,
    /// A balance moved between the read and the write (a compare failed): nothing was written.
    Aborted,
    Declined,
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// A 64-bit integer of the gateway's JSON: a string, or absent when zero.
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

impl Etcd {
    /// `endpoint`: `http://host:port` or `host:port`.
    pub fn new(endpoint: &str) -> Etcd {
        let base = if endpoint.contains("://") { endpoint.to_string() } else { format!("http://{endpoint}") };
        let agent = ureq::AgentBuilder::new().timeout(IO_TIMEOUT).max_idle_connections_per_host(1).build();
        Etcd { agent, base: base.trim_end_matches('/').to_string() }
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let url = format!("{}{path}", self.base);
        match self.agent.post(&url).send_json(body) {
            Ok(resp) => resp.into_json().map_err(|e| EtcdError::Reply(url, e.to_string())),
            Err(ureq::Error::Status(code, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                Err(EtcdError::Request(url, format!("HTTP {code}: {}", text.chars().take(300).collect::<String>())))
            }
            Err(e) => Err(EtcdError::Request(url, e.to_string())),
        }
    }

    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), EtcdError> {
        self.post("/v3/kv/put", &json!({ "key": b64(key.as_bytes()), "value": b64(value) })).map(|_| ())
    }

    /// Both accounts' balances and mod revisions, read in one Txn (so at one revision).
    fn read_two(&self, a: &str, b: &str) -> Result<[(i64, i64); 2], EtcdError> {
        let body = json!({ "success": [
            { "request_range": { "key": b64(a.as_bytes()) } },
            { "request_range": { "key": b64(b.as_bytes()) } },
        ]});
        let reply = self.post("/v3/kv/txn", &body)?;
        let bad = |what: &str| EtcdError::Reply("/v3/kv/txn".into(), format!("{what}: {reply}"));
        let responses = reply["responses"].as_array().ok_or_else(|| bad("no responses"))?;
        let mut out = [(0, 0); 2];
        for (slot, r) in out.iter_mut().zip(responses) {
            // An account never written reads as absent: balance 0, mod revision 0.
            if let Some(kv) = r["response_range"]["kvs"].get(0) {
                let value = kv["value"].as_str().and_then(|v| B64.decode(v).ok()).ok_or_else(|| bad("a value"))?;
                let balance =
                    std::str::from_utf8(&value).ok().and_then(|s| s.parse().ok()).ok_or_else(|| bad("a balance"))?;
                *slot = (balance, int(&kv["mod_revision"]));
            }
        }
        Ok(out)
    }

    fn transfer(&self, from: &str, to: &str, amount: i64) -> Result<Transfer, EtcdError> {
        let [(fb, fr), (tb, tr)] = self.read_two(from, to)?;
        if fb < amount {
            return Ok(Transfer::Declined);
        }
        let compare = |key: &str, rev: i64| json!({ "key": b64(key.as_bytes()), "target": "MOD", "result": "EQUAL", "mod_revision": rev.to_string() });
        let put = |key: &str, balance: i64| json!({ "request_put": { "key": b64(key.as_bytes()), "value": b64(balance.to_string().as_bytes()) } });
        let body = json!({
            "compare": [compare(from, fr), compare(to, tr)],
            "success": [put(from, fb - amount), put(to, tb + amount)],
        });
        let reply = self.post("/v3/kv/txn", &body)?;
        // proto3 JSON leaves `succeeded: false` out.
        Ok(if reply["succeeded"].as_bool().unwrap_or(false) { Transfer::Committed } else { Transfer::Aborted })
    }
}

/// Every account gets `balance`.
pub fn open_accounts(endpoint: &str, accounts: &[String], balance: i64) -> Result<(), EtcdError> {
    let etcd = Etcd::new(endpoint);
    accounts.iter().try_for_each(|a| etcd.put(a, balance.to_string().as_bytes()))
}

/// Starts `clients` threads, spread over `endpoints`, each working until the run's end.
pub fn spawn(
    clients: usize,
    endpoints: &[String],
    work: &Workload,
    recorder: &Arc<Recorder>,
    start: &Arc<Start>,
) -> Vec<JoinHandle<()>> {
    (0..clients)
        .map(|i| {
            let etcd = Etcd::new(&endpoints[i % endpoints.len()]);
            let (work, recorder, start) = (work.clone(), recorder.clone(), start.clone());
            std::thread::spawn(move || client(&etcd, &work, &recorder, &start))
        })
        .collect()
}

fn client(etcd: &Etcd, work: &Workload, rec: &Recorder, start: &Start) {
    start.connected.wait();
    start.go.wait();
    let Some(end) = start.end.get().copied() else { return };
    let mut rng = rand::thread_rng();
    while Instant::now() < end {
        let began = Instant::now();
        let outcome = match work.kind {
            Kind::Bank => bank(etcd, work, &mut rng),
            _ => etcd.put(&work.key(&mut rng), &work.value).map(|()| Outcome::Committed { ops: 1, retries: 0 }),
        };
        let outcome = outcome.unwrap_or_else(|e| {
            rec.error(format!("etcd {}: {e}", etcd.base));
            std::thread::sleep(ERROR_PAUSE);
            Outcome::Error
        });
        let now = Instant::now();
        rec.record(now, now - began, outcome);
    }
}

/// One transfer between two distinct accounts, retried while a compare fails.
fn bank(etcd: &Etcd, work: &Workload, rng: &mut rand::rngs::ThreadRng) -> Result<Outcome, EtcdError> {
    let n = work.accounts.len();
    let a = rng.gen_range(0..n);
    let b = (a + rng.gen_range(1..n)) % n;
    let amount = rng.gen_range(1..=AMOUNT_MAX);
    for retries in 0..TRANSFER_ATTEMPTS_MAX {
        match etcd.transfer(&work.accounts[a].0, &work.accounts[b].0, amount)? {
            Transfer::Committed => return Ok(Outcome::Committed { ops: 1, retries }),
            Transfer::Declined => return Ok(Outcome::Declined),
            Transfer::Aborted => continue,
        }
    }
    Err(EtcdError::Reply("/v3/kv/txn".into(), format!("a transfer's compare failed {TRANSFER_ATTEMPTS_MAX} times")))
}
