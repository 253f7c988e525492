//! Bank transfers through real nodes, for the tests that kill hosts under them: each transfer is
//! one `MULTI`/`EXEC` — take from one account, give to another, and record the transfer under its
//! own key — issued by clients that go through the hosts in turn; and the checks on what the
//! clients were told: every acknowledged transfer is recorded, the balances are the initial ones
//! plus exactly the recorded transfers, and no transfer refused as not written is recorded.

use super::Cluster;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

pub const ACCOUNTS: usize = 10;
pub const INITIAL_BALANCE: i64 = 100;
const TRANSFERS_PER_CLIENT_MAX: usize = 100_000;
const AMOUNT_MAX: i64 = 10;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longer than the node's own client timeout (5 s): the node answers first.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(7);
/// After an error, before the client's next transfer: no busy loop against a dead host.
const ERROR_PAUSE: Duration = Duration::from_millis(20);
const VERIFY_BATCH: usize = 200;
/// Errors by which the server says the transaction was not written (every attempt aborted).
const NOT_WRITTEN: [&str; 2] = ["(nothing was written)", "by conflicting transactions; try again"];

pub fn account(i: usize) -> String {
    format!("acct:{i}")
}

pub struct Transfer {
    pub key: String,
    pub from: usize,
    pub to: usize,
    pub amount: i64,
    /// When it was issued, from the start of the run.
    pub at: Duration,
    /// `Ok` if `EXEC` answered with its replies; otherwise the error, and its outcome is unknown.
    pub outcome: Result<(), String>,
}

impl Transfer {
    fn record(&self) -> String {
        format!("{} {} {}", account(self.from), account(self.to), self.amount)
    }
}

pub async fn connect(url: &str) -> redis::RedisResult<MultiplexedConnection> {
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
pub async fn client(id: usize, urls: Vec<String>, start: Instant, until: Instant) -> Vec<Transfer> {
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

/// The record of each transfer, read through `hosts` in turn (pipelined in batches).
fn read_records(cluster: &Cluster, hosts: &[&str], transfers: &[Transfer]) -> Vec<Option<String>> {
    let mut connections: Vec<redis::Connection> = hosts.iter().map(|h| cluster.redis(h)).collect();
    let mut records = vec![];
    for (i, batch) in transfers.chunks(VERIFY_BATCH).enumerate() {
        let mut pipe = redis::pipe();
        for t in batch {
            pipe.get(&t.key);
        }
        let con = &mut connections[i % hosts.len()];
        let got: Vec<Option<String>> = pipe.query(con).expect("GET the transfer records");
        records.extend(got);
    }
    records
}
/// Counts of (acknowledged, unknown) among `transfers` issued in `[from, to)`.
pub fn counts(transfers: &[Transfer], from: Duration, to: Duration) -> (usize, usize) {
    let window: Vec<&Transfer> = transfers.iter().filter(|t| t.at >= from && t.at < to).collect();
    let acknowledged = window.iter().filter(|t| t.outcome.is_ok()).count();
    (acknowledged, window.len() - acknowledged)
}

pub async fn set_initial_balances(cluster: &Cluster) {
    let mut con = connect(&cluster.hosts[0].redis_url()).await.expect("connect to node1");
    let mut mset = redis::cmd("MSET");
    for i in 0..ACCOUNTS {
        mset.arg(account(i)).arg(INITIAL_BALANCE);
    }
    mset.exec_async(&mut con).await.expect("MSET the initial balances");
}

/// How many transfers were acknowledged, in each phase of the run (name, from, to), and why the
/// others are unknown.
pub fn report(transfers: &[Transfer], phases: &[(&str, Duration, Duration)]) {
    let (acknowledged, unknown) = counts(transfers, Duration::ZERO, Duration::MAX);
    eprintln!("transfers: {acknowledged} acknowledged, {unknown} outcome unknown");
    for (phase, from, to) in phases {
        let (a, u) = counts(transfers, *from, *to);
        let secs =
            to.min(&transfers.iter().map(|t| t.at).max().unwrap_or_default()).saturating_sub(*from).as_secs_f64();
        eprintln!("  {phase}: {a} acknowledged ({:.0}/s), {u} unknown", a as f64 / secs.max(1e-3));
    }
    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for e in transfers.iter().filter_map(|t| t.outcome.as_ref().err()) {
        *errors.entry(e.as_str()).or_default() += 1;
    }
    for (e, n) in errors {
        eprintln!("  {n} × {e}");
    }
}

/// The balances the recorded transfers give (read through `hosts`); checks that every acknowledged transfer is recorded,
/// each record is the transfer's, and no transfer refused as not written is recorded.
pub fn balances_of_recorded_transfers(cluster: &Cluster, hosts: &[&str], transfers: &[Transfer]) -> Vec<i64> {
    let records = read_records(cluster, hosts, transfers);
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
