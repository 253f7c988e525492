//! Bank transfers on a 3-host cluster (2 replicas, fsync always, a checkpoint every second) while
//! one host is SIGKILLed and restarted — from its last checkpoint and the log after it. Each
//! transfer is one `MULTI`/`EXEC`: take from one account, give to another, and record the transfer
//! under its own key. Whatever the clients were told, once the cluster has settled:
//! - every transfer whose `EXEC` was acknowledged is recorded (durability);
//! - the balances are the initial ones plus exactly the transfers that are recorded — none half
//!   applied, none applied without its record (atomicity), so the money adds up;
//! - every partition's replicas hold the same data;
//! - a transfer the server refused saying nothing was written is indeed not recorded;
//! - and the cluster commits again through every host on every partition's chain.

mod common;

use common::{replicas_agree, Cluster, Spec, SETTLED_WITHIN};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

const ACCOUNTS: usize = 10;
const INITIAL_BALANCE: i64 = 100;
const CLIENTS: usize = 4;
const RUN_FOR: Duration = Duration::from_secs(8);
const KILL_AT: Duration = Duration::from_secs(2);
const RESTART_AT: Duration = Duration::from_secs(4);
const TRANSFERS_PER_CLIENT_MAX: usize = 100_000;
const AMOUNT_MAX: i64 = 10;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longer than the node's own client timeout (5 s): the node answers first.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(7);
/// After an error, before the client's next transfer: no busy loop against a dead host.
const ERROR_PAUSE: Duration = Duration::from_millis(20);
const VERIFY_BATCH: usize = 200;
const KILLED: &str = "node2";
/// Often enough that the killed host has checkpointed before it is killed.
const CHECKPOINT_EVERY: &str = "1s";
/// Errors by which the server says the transaction was not written (every attempt aborted).
const NOT_WRITTEN: [&str; 2] = ["(nothing was written)", "by conflicting transactions; try again"];

fn account(i: usize) -> String {
    format!("acct:{i}")
}

struct Transfer {
    key: String,
    from: usize,
    to: usize,
    amount: i64,
    /// When it was issued, from the start of the run.
    at: Duration,
    /// `Ok` if `EXEC` answered with its replies; otherwise the error, and its outcome is unknown.
    outcome: Result<(), String>,
}

impl Transfer {
    fn record(&self) -> String {
        format!("{} {} {}", account(self.from), account(self.to), self.amount)
    }
}

async fn connect(url: &str) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let config =
        AsyncConnectionConfig::new().set_connection_timeout(CONNECT_TIMEOUT).set_response_timeout(RESPONSE_TIMEOUT);
    client.get_multiplexed_async_connection_with_config(&config).await
}

/// Why a transfer's outcome is unknown, and whether its connection may still be used.
struct Failure {
    error: String,
    connection_lost: bool,
}

impl From<redis::RedisError> for Failure {
    fn from(e: redis::RedisError) -> Self {
        let connection_lost =
            e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal();
        Failure { error: e.to_string(), connection_lost }
    }
}

/// One transfer as one transaction; `Ok` if `EXEC` answered its three replies.
async fn transfer(con: &mut Option<MultiplexedConnection>, url: &str, t: &Transfer) -> Result<(), Failure> {
    if con.is_none() {
        *con = Some(connect(url).await?);
    }
    let con = con.as_mut().expect("connected above");
    // MULTI … EXEC spelled out (not `pipe().atomic()`), so that an error EXEC answers keeps its text.
    let (exec,): (Value,) = redis::pipe()
        .cmd("MULTI")
        .ignore()
        .cmd("INCRBY")
        .arg(account(t.from))
        .arg(-t.amount)
        .ignore()
        .cmd("INCRBY")
        .arg(account(t.to))
        .arg(t.amount)
        .ignore()
        .cmd("SET")
        .arg(&t.key)
        .arg(t.record())
        .ignore()
        .cmd("EXEC")
        .query_async(con)
        .await?;
    match exec {
        Value::Array(replies) if replies.len() == 3 => Ok(()),
        other => Err(Failure { error: format!("EXEC answered {other:?}"), connection_lost: false }),
    }
}

/// A client issuing transfers until `until`, each through the next host in turn; it reconnects
/// after a connection is lost. Returns every transfer it issued.
async fn client(id: usize, urls: Vec<String>, start: Instant, until: Instant) -> Vec<Transfer> {
    let mut rng = StdRng::seed_from_u64(id as u64);
    let mut connections: Vec<Option<MultiplexedConnection>> = urls.iter().map(|_| None).collect();
    let mut issued = vec![];
    for n in 0..TRANSFERS_PER_CLIENT_MAX {
        if Instant::now() >= until {
            break;
        }
        let host = (id + n) % urls.len();
        let from = rng.gen_range(0..ACCOUNTS);
        let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
        let amount = rng.gen_range(1..=AMOUNT_MAX);
        let key = format!("transfer:{id}:{n}");
        let mut t = Transfer { key, from, to, amount, at: start.elapsed(), outcome: Ok(()) };
        if let Err(failure) = transfer(&mut connections[host], &urls[host], &t).await {
            // Only a lost connection is replaced: fewer new connections, fewer ephemeral ports
            // taken while the killed host's ports wait for it.
            if failure.connection_lost {
                connections[host] = None;
            }
            t.outcome = Err(failure.error);
            tokio::time::sleep(ERROR_PAUSE).await;
        }
        issued.push(t);
    }
    issued
}

/// The record of each transfer, read through the hosts in turn (pipelined in batches).
fn read_records(cluster: &Cluster, transfers: &[Transfer]) -> Vec<Option<String>> {
    let mut connections: Vec<redis::Connection> = cluster.hosts.iter().map(|h| cluster.redis(&h.name)).collect();
    let mut records = vec![];
    for (i, batch) in transfers.chunks(VERIFY_BATCH).enumerate() {
        let mut pipe = redis::pipe();
        for t in batch {
            pipe.get(&t.key);
        }
        let con = &mut connections[i % cluster.hosts.len()];
        let got: Vec<Option<String>> = pipe.query(con).expect("GET the transfer records");
        records.extend(got);
    }
    records
}

/// Counts of (acknowledged, unknown) among `transfers` issued in `[from, to)`.
fn counts(transfers: &[Transfer], from: Duration, to: Duration) -> (usize, usize) {
    let window: Vec<&Transfer> = transfers.iter().filter(|t| t.at >= from && t.at < to).collect();
    let acknowledged = window.iter().filter(|t| t.outcome.is_ok()).count();
    (acknowledged, window.len() - acknowledged)
}

async fn set_initial_balances(cluster: &Cluster) {
    let mut con = connect(&cluster.hosts[0].redis_url()).await.expect("connect to node1");
    let mut mset = redis::cmd("MSET");
    for i in 0..ACCOUNTS {
        mset.arg(account(i)).arg(INITIAL_BALANCE);
    }
    mset.exec_async(&mut con).await.expect("MSET the initial balances");
}

/// The run: clients transfer for `RUN_FOR`; `KILLED` is SIGKILLed at `KILL_AT` (once it has written
/// a checkpoint) and restarted at `RESTART_AT`. Returns every transfer issued.
async fn transfer_while_a_host_is_killed_and_restarted(cluster: &mut Cluster) -> Vec<Transfer> {
    let urls: Vec<String> = cluster.hosts.iter().map(|h| h.redis_url()).collect();
    let start = Instant::now();
    let clients: Vec<_> =
        (0..CLIENTS).map(|id| tokio::spawn(client(id, urls.clone(), start, start + RUN_FOR))).collect();
    tokio::time::sleep_until(start + KILL_AT).await;
    let store = format!("store0@{KILLED}");
    let stores = cluster.store_vnodes().expect("/status");
    let checkpoints = stores.iter().find(|v| v["id"] == *store).and_then(|v| v["checkpoints"].as_u64());
    assert!(
        checkpoints.is_some_and(|n| n > 0),
        "{store} wrote no checkpoint before the kill ({checkpoints:?}): it would restart from its log alone"
    );
    eprintln!("{:?}: SIGKILL {KILLED} (pid {})", start.elapsed(), cluster.pid(KILLED));
    cluster.kill(KILLED);
    tokio::time::sleep_until(start + RESTART_AT).await;
    cluster.spawn(KILLED);
    eprintln!("{:?}: restarted {KILLED} (pid {})", start.elapsed(), cluster.pid(KILLED));
    let mut transfers = vec![];
    for c in clients {
        let issued = tokio::time::timeout(RUN_FOR + 2 * RESPONSE_TIMEOUT, c).await;
        transfers.extend(issued.expect("a client ran past its time").expect("a client panicked"));
    }
    transfers
}

/// How many transfers were acknowledged, per phase of the run, and why the others are unknown.
fn report(transfers: &[Transfer]) {
    let (acknowledged, unknown) = counts(transfers, Duration::ZERO, Duration::MAX);
    eprintln!("transfers: {acknowledged} acknowledged, {unknown} outcome unknown");
    for (phase, from, to) in [
        ("before the kill", Duration::ZERO, KILL_AT),
        ("while down", KILL_AT, RESTART_AT),
        ("after the restart", RESTART_AT, Duration::MAX),
    ] {
        let (a, u) = counts(transfers, from, to);
        eprintln!("  {phase}: {a} acknowledged, {u} unknown");
    }
    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for e in transfers.iter().filter_map(|t| t.outcome.as_ref().err()) {
        *errors.entry(e.as_str()).or_default() += 1;
    }
    for (e, n) in errors {
        eprintln!("  {n} × {e}");
    }
}

/// The balances the recorded transfers give; checks that every acknowledged transfer is recorded,
/// each record is the transfer's, and no transfer refused as not written is recorded.
fn balances_of_recorded_transfers(cluster: &Cluster, transfers: &[Transfer]) -> Vec<i64> {
    let records = read_records(cluster, transfers);
    let mut balances = vec![INITIAL_BALANCE; ACCOUNTS];
    let (mut lost, mut written_after_all) = (vec![], vec![]);
    for (t, record) in transfers.iter().zip(&records) {
        match (record, &t.outcome) {
            (Some(r), outcome) => {
                assert_eq!(*r, t.record(), "the record of {}", t.key);
                balances[t.from] -= t.amount;
                balances[t.to] += t.amount;
                if let Err(e) = outcome.as_ref().map_err(String::as_str) {
                    if NOT_WRITTEN.iter().any(|n| e.contains(n)) {
                        written_after_all.push(format!("{}: {e}", t.key));
                    }
                }
            }
            (None, Ok(())) => lost.push(t.key.as_str()),
            (None, Err(_)) => {}
        }
    }
    assert!(lost.is_empty(), "{} acknowledged transfers are not recorded: {lost:?}", lost.len());
    assert!(written_after_all.is_empty(), "refused as not written, but recorded: {written_after_all:?}");
    balances
}

/// Each host coordinates one transaction writing to every primary, so on every chain (the
/// restarted host's store vnode is on two of the three).
fn assert_commits_through_every_host(cluster: &Cluster) {
    let keys = cluster.key_per_primary();
    for h in &cluster.hosts {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for k in &keys {
            pipe.set(k, &h.name).ignore();
        }
        let done: redis::RedisResult<()> = pipe.query(&mut cluster.redis(&h.name));
        assert!(done.is_ok(), "after the restart, a transaction through {} on every chain: {done:?}", h.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_transfers_survive_a_host_killed_and_restarted_and_the_money_adds_up() {
    let mut cluster = Cluster::start(&Spec::new(3, 2).checkpoint_every(CHECKPOINT_EVERY));
    set_initial_balances(&cluster).await;
    let transfers = transfer_while_a_host_is_killed_and_restarted(&mut cluster).await;
    report(&transfers);
    assert!(transfers.iter().any(|t| t.outcome.is_ok()), "no transfer was acknowledged");

    cluster.wait_serving(KILLED);
    cluster.settled(SETTLED_WITHIN);
    let expected = balances_of_recorded_transfers(&cluster, &transfers);
    assert_eq!(expected.iter().sum::<i64>(), ACCOUNTS as i64 * INITIAL_BALANCE);
    let accounts: Vec<String> = (0..ACCOUNTS).map(account).collect();
    for h in &cluster.hosts {
        let balances: Vec<i64> = redis::cmd("MGET").arg(&accounts).query(&mut cluster.redis(&h.name)).expect("MGET");
        assert_eq!(balances, expected, "balances read on {} vs. initial + recorded transfers", h.name);
    }
    let replicas = cluster.hosts[0].cfg.cluster.replicas;
    replicas_agree(&cluster.store_vnodes().expect("/status"), replicas).expect("replicas agree");
    assert_commits_through_every_host(&cluster);
}
