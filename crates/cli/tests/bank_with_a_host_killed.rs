//! Bank transfers on a 3-host cluster (2 replicas, fsync always, a checkpoint every second) while
//! one host is SIGKILLed and restarted — from its last checkpoint and the log after it. Each
//! transfer is one `MULTI`/`EXEC`: take from one account, give to another, and record the transfer
//! under its own key. Whatever the clients were told, once the cluster has settled:
//! - every transfer whose `EXEC` was acknowledged is recorded (durability);
//! - the balances are the initial ones plus exactly the transfers that are recorded — none half
//!   applied, none applied without its record (atomicity), so the money adds up;
//! - the copies of every partition agree (the restarted host holds none of those a failover moved
//!   while it was down);
//! - a transfer the server refused saying nothing was written is indeed not recorded;
//! - and the cluster commits again through every host on every partition's chain.

mod common;

use common::bank::{self, account, Transfer, ACCOUNTS, INITIAL_BALANCE, RESPONSE_TIMEOUT};
use common::{Cluster, Spec, SETTLED_WITHIN};
use std::time::Duration;
use tokio::time::Instant;

const CLIENTS: usize = 4;
const RUN_FOR: Duration = Duration::from_secs(8);
const KILL_AT: Duration = Duration::from_secs(2);
const RESTART_AT: Duration = Duration::from_secs(4);
const KILLED: &str = "node2";
/// Often enough that the killed host has checkpointed before it is killed.
const CHECKPOINT_EVERY: &str = "1s";

/// The run: clients transfer for `RUN_FOR`; `KILLED` is SIGKILLed at `KILL_AT` (once it has written
/// a checkpoint) and restarted at `RESTART_AT`. Returns every transfer issued.
async fn transfer_while_a_host_is_killed_and_restarted(cluster: &mut Cluster) -> Vec<Transfer> {
    let urls: Vec<String> = cluster.hosts.iter().map(|h| h.redis_url()).collect();
    let start = Instant::now();
    let clients: Vec<_> =
        (0..CLIENTS).map(|id| tokio::spawn(bank::client(id, urls.clone(), start, start + RUN_FOR))).collect();
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
    bank::set_initial_balances(&cluster).await;
    let transfers = transfer_while_a_host_is_killed_and_restarted(&mut cluster).await;
    let phases = [
        ("before the kill", Duration::ZERO, KILL_AT),
        ("while down", KILL_AT, RESTART_AT),
        ("after the restart", RESTART_AT, Duration::MAX),
    ];
    bank::report(&transfers, &phases);
    assert!(transfers.iter().any(|t| t.outcome.is_ok()), "no transfer was acknowledged");

    cluster.wait_serving(KILLED);
    cluster.settled(SETTLED_WITHIN);
    let hosts: Vec<&str> = cluster.hosts.iter().map(|h| h.name.as_str()).collect();
    let expected = bank::balances_of_recorded_transfers(&cluster, &hosts, &transfers);
    assert_eq!(expected.iter().sum::<i64>(), ACCOUNTS as i64 * INITIAL_BALANCE);
    let accounts: Vec<String> = (0..ACCOUNTS).map(account).collect();
    for h in &cluster.hosts {
        let balances: Vec<i64> = redis::cmd("MGET").arg(&accounts).query(&mut cluster.redis(&h.name)).expect("MGET");
        assert_eq!(balances, expected, "balances read on {} vs. initial + recorded transfers", h.name);
    }
    // The MGETs' read-only commits finish at their participants after the client has its answer:
    // settled again, not checked once (CI once saw one such branch still prepared).
    cluster.settled(SETTLED_WITHIN);
    assert_commits_through_every_host(&cluster);
}
