//! The clients of a run: each its own connection, driving one workload until the run's end.
//! `bank`: WATCH-guarded MULTI/EXEC transfers between two accounts on different partitions,
//! retried (bounded) while a WATCH aborts them. `set` / `get`: single keys, `pipeline` commands a
//! round trip.

use super::after_write::AfterWrite;
use super::stats::{Outcome, Recorder};
use crate::cmd::bank::{self, Transfer};
use clap::ValueEnum;
use rand::rngs::ThreadRng;
use rand::Rng;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use waymark_core::Placement;

/// Attempts of one transfer before it is given up as an error (a WATCH abort each time).
const TRANSFER_ATTEMPTS_MAX: u64 = 1_000;
/// Tries to draw a payee on another partition than the payer's.
const PAYEE_DRAWS_MAX: usize = 64;
/// Pause before reconnecting after an error.
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);
/// Largest amount moved by one transfer (balances start at `BALANCE`).
const AMOUNT_MAX: i64 = 50;
pub const BALANCE: i64 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bank,
    Set,
    Get,
}

/// What the clients work on, the same for every run of one invocation.
#[derive(Clone)]
pub struct Workload {
    pub kind: Kind,
    pub pipeline: usize,
    /// `bank`: the accounts, each with its partition when the placement is known.
    pub accounts: Arc<Vec<(String, Option<u32>)>>,
    pub keyspace: u64,
    pub value: Arc<Vec<u8>>,
    /// `set --verify`: every key a SET was acknowledged for (a pipeline's keys once all of its
    /// SETs were), to read back after the runs.
    pub acknowledged: Option<Arc<Mutex<BTreeSet<String>>>>,
    /// `set --after-write CMD`: sent after each SET on the same connection, its reply checked.
    pub after_write: Option<Arc<AfterWrite>>,
}

impl Workload {
    /// Account names for the bank: with a placement, each on a partition of its own as long as
    /// there are partitions left, so a transfer always spans two partitions.
    pub fn accounts(count: usize, placement: Option<&Placement>) -> Vec<(String, Option<u32>)> {
        let Some(placement) = placement else {
            return (0..count).map(|i| (format!("bench:acct:{i}"), None)).collect();
        };
        let partitions = placement.partitions() as usize;
        let mut used = vec![false; partitions];
        let mut out = Vec::with_capacity(count);
        // Each candidate lands on a random partition: a bounded number of tries covers them.
        let tries_max = (count * 64).max(partitions * 64) as u64;
        for i in 0..tries_max {
            if out.len() == count {
                break;
            }
            let name = format!("bench:acct:{i}");
            let p = placement.partition_of(name.as_bytes()).0;
            if out.len() >= partitions || !used[p as usize] {
                used[p as usize] = true;
                out.push((name, Some(p)));
            }
        }
        out
    }

    pub fn key(&self, rng: &mut ThreadRng) -> String {
        format!("bench:key:{}", rng.gen_range(0..self.keyspace.max(1)))
    }
}

/// How a run starts its clients together: each connects and waits at `connected`; the run then
/// sets `end` and meets them at `go`.
pub struct Start {
    pub connected: Barrier,
    pub go: Barrier,
    pub end: OnceLock<Instant>,
}

impl Start {
    pub fn new(clients: usize) -> Start {
        Start { connected: Barrier::new(clients + 1), go: Barrier::new(clients + 1), end: OnceLock::new() }
    }
}

/// Starts `clients` threads, spread over `redis`, each working until the run's end.
pub fn spawn(
    clients: usize,
    redis: &[SocketAddr],
    work: &Workload,
    recorder: &Arc<Recorder>,
    start: &Arc<Start>,
) -> Vec<JoinHandle<()>> {
    (0..clients)
        .map(|i| {
            let addr = redis[i % redis.len()];
            let (work, recorder, start) = (work.clone(), recorder.clone(), start.clone());
            std::thread::spawn(move || client(addr, &work, &recorder, &start))
        })
        .collect()
}

fn client(addr: SocketAddr, work: &Workload, rec: &Recorder, start: &Start) {
    let mut con = bank::connect(addr).map_err(|e| rec.error(format!("connecting to {addr}: {e}"))).ok();
    start.connected.wait();
    start.go.wait();
    let Some(end) = start.end.get().copied() else { return };
    let mut rng = rand::thread_rng();
    while Instant::now() < end {
        let Some(c) = con.as_mut() else {
            rec.record(Instant::now(), Duration::ZERO, Outcome::Error);
            std::thread::sleep(RECONNECT_PAUSE);
            con = bank::connect(addr).map_err(|e| rec.error(format!("connecting to {addr}: {e}"))).ok();
            continue;
        };
        let began = Instant::now();
        let outcome = match work.kind {
            Kind::Bank => transfer(c, work, &mut rng),
            Kind::Set | Kind::Get => single_keys(c, work, &mut rng, rec),
        };
        let outcome = outcome.unwrap_or_else(|e| {
            rec.error(format!("{addr}: {e}"));
            con = None;
            Outcome::Error
        });
        let now = Instant::now();
        rec.record(now, now - began, outcome);
    }
}

/// One transfer between two accounts, retried while WATCH aborts it.
fn transfer(con: &mut redis::Connection, work: &Workload, rng: &mut ThreadRng) -> Result<Outcome, String> {
    let accounts = &work.accounts;
    let n = accounts.len();
    let a = rng.gen_range(0..n);
    let mut b = (a + rng.gen_range(1..n)) % n;
    for _ in 0..PAYEE_DRAWS_MAX {
        if accounts[a].1.is_none() || accounts[a].1 != accounts[b].1 {
            break;
        }
        b = (a + rng.gen_range(1..n)) % n;
    }
    let amount = rng.gen_range(1..=AMOUNT_MAX);
    for retries in 0..TRANSFER_ATTEMPTS_MAX {
        match bank::transfer(con, &accounts[a].0, &accounts[b].0, amount).map_err(|e| e.to_string())? {
            Transfer::Committed => return Ok(Outcome::Committed { ops: 1, retries }),
            Transfer::Declined => return Ok(Outcome::Declined),
            Transfer::Aborted => continue,
        }
    }
    Err(format!("a transfer aborted {TRANSFER_ATTEMPTS_MAX} times in a row"))
}

/// `pipeline` SETs or GETs of random keys in one round trip (with `--after-write`, that command
/// after each SET, in the same round trip; a reply short of the copies asked is an error).
fn single_keys(
    con: &mut redis::Connection,
    work: &Workload,
    rng: &mut ThreadRng,
    rec: &Recorder,
) -> Result<Outcome, String> {
    let mut pipe = redis::pipe();
    let keys: Vec<String> = (0..work.pipeline).map(|_| work.key(rng)).collect();
    let after = work.after_write.as_deref().filter(|_| work.kind == Kind::Set);
    for key in &keys {
        match work.kind {
            Kind::Set => pipe.cmd("SET").arg(key).arg(work.value.as_slice()).ignore(),
            _ => pipe.cmd("GET").arg(key).ignore(),
        };
        if let Some(after) = after {
            pipe.add_command(after.cmd());
        }
    }
    let ops = work.pipeline as u64;
    match pipe.query::<Vec<redis::Value>>(con) {
        Ok(replies) => {
            // The connection is in step (every reply was read): a short count is counted, not
            // reconnected for.
            if let Some(why) = after.and_then(|a| replies.iter().find_map(|r| a.check(r).err())) {
                rec.error(why);
                return Ok(Outcome::Error);
            }
        }
        // Past `maxmemory`: the connection stays in step (every reply of the pipeline was read).
        Err(e) if e.code() == Some("OOM") => return Ok(Outcome::Refused { ops }),
        Err(e) => return Err(e.to_string()),
    }
    if let (Kind::Set, Some(acknowledged)) = (work.kind, &work.acknowledged) {
        acknowledged.lock().unwrap_or_else(|e| e.into_inner()).extend(keys);
    }
    Ok(Outcome::Committed { ops, retries: 0 })
}

/// `set --verify`: reads every acknowledged key back (MGET batches); how many were read, or
/// the keys missing or changed.
pub fn verify_acknowledged(addr: SocketAddr, work: &Workload) -> anyhow::Result<usize> {
    const BATCH: usize = 1_000;
    let Some(acknowledged) = &work.acknowledged else { return Ok(0) };
    let keys: Vec<String> = acknowledged.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
    let mut con = bank::connect(addr)?;
    let mut wrong = vec![];
    for batch in keys.chunks(BATCH) {
        let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(batch).query(&mut con)?;
        wrong
            .extend(batch.iter().zip(got).filter(|(_, v)| v.as_deref() != Some(work.value.as_slice())).map(|(k, _)| k));
    }
    if let Some(first) = wrong.first() {
        anyhow::bail!("{} of {} acknowledged keys are missing or changed, {first} first", wrong.len(), keys.len());
    }
    Ok(keys.len())
}

/// For `get`: every key of the keyspace gets a value first (MSET batches), so reads find data.
pub fn preload(addr: SocketAddr, work: &Workload) -> anyhow::Result<()> {
    const BATCH: u64 = 1_000;
    let mut con = bank::connect(addr)?;
    for start in (0..work.keyspace).step_by(BATCH as usize) {
        let mut mset = redis::cmd("MSET");
        for k in start..(start + BATCH).min(work.keyspace) {
            mset.arg(format!("bench:key:{k}")).arg(work.value.as_slice());
        }
        mset.query::<()>(&mut con)?;
    }
    Ok(())
}
