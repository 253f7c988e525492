//! Issue 30 on real processes: bank transfers on a 3-host cluster (2 replicas) while one host is
//! SIGKILLed and left down — each host in turn, node1 (the root's host) included, each on a cluster
//! of its own. The survivors keep serving: the tree's root records the host dead and promotes its
//! partitions' replicas, and transactions whose near died are resolved by the participants left.
//! Whatever the clients were told, once every account is writable again:
//! - every account takes a transaction through each surviving host (within a generous bound: the
//!   failover window itself is measured by `bench/failover.sh` — the ignored test at the end — not
//!   asserted here);
//! - every transfer whose `EXEC` was acknowledged is recorded, and the balances are the initial
//!   ones plus exactly the recorded transfers (the money adds up);
//! - the copies of each partition on the survivors agree, and nothing stays prepared;
//! - a snapshot taken with the host still down (`waymark snapshot create`: a cut over the live
//!   hosts) checks — saying which partitions it holds in fewer copies — and restores onto 2 new
//!   hosts with every account and the bank total exact.

mod common;

use common::bank::{self, account, ACCOUNTS, INITIAL_BALANCE, RESPONSE_TIMEOUT};
use common::{poll, replicas_agree_live, restore_and_start, waymark_said, Cluster, Spec, SETTLED_WITHIN};
use std::time::Duration;
use tokio::time::Instant;

const CLIENTS: usize = 4;
const KILL_AT: Duration = Duration::from_secs(2);
/// Transfers go on this long after the kill.
const DOWN_FOR: Duration = Duration::from_secs(6);
/// Generous: the failover grace is 1 s (200 hops of 5 ms), then a few alteration rounds on a debug
/// build and 2 shared cores.
const WRITABLE_WITHIN: Duration = Duration::from_secs(30);

/// One `MULTI`/`EXEC` touching account `i` through `host` (adds 0: the balance stays exact).
fn touch(cluster: &Cluster, host: &str, i: usize) -> Result<(), String> {
    let mut con = cluster.redis(host);
    let done: redis::RedisResult<()> = redis::pipe().atomic().incr(account(i), 0).ignore().query(&mut con);
    done.map_err(|e| format!("{} through {host}: {e}", account(i)))
}

async fn transfer_while_a_host_is_down(cluster: &mut Cluster, victim: &str) -> Vec<bank::Transfer> {
    let urls: Vec<String> = cluster.hosts.iter().map(|h| h.redis_url()).collect();
    let start = Instant::now();
    let until = start + KILL_AT + DOWN_FOR;
    let clients: Vec<_> = (0..CLIENTS).map(|id| tokio::spawn(bank::client(id, urls.clone(), start, until))).collect();
    tokio::time::sleep_until(start + KILL_AT).await;
    eprintln!("{:?}: SIGKILL {victim} (pid {}), left down", start.elapsed(), cluster.pid(victim));
    cluster.kill(victim);
    let mut transfers = vec![];
    for c in clients {
        let issued = tokio::time::timeout(KILL_AT + DOWN_FOR + 2 * RESPONSE_TIMEOUT, c).await;
        transfers.extend(issued.expect("a client ran past its time").expect("a client panicked"));
    }
    transfers
}

async fn survives_the_loss_of(victim: &str) {
    let mut cluster = Cluster::start(&Spec::new(3, 2));
    bank::set_initial_balances(&cluster).await;
    let transfers = transfer_while_a_host_is_down(&mut cluster, victim).await;
    bank::report(&transfers, &[("before the kill", Duration::ZERO, KILL_AT), ("host down", KILL_AT, Duration::MAX)]);
    let (acknowledged_after, _) = bank::counts(&transfers, KILL_AT, Duration::MAX);
    eprintln!("{victim} down: {acknowledged_after} transfers acknowledged after the kill");

    let survivors: Vec<String> = cluster.hosts.iter().map(|h| h.name.clone()).filter(|h| h != victim).collect();
    let survivors: Vec<&str> = survivors.iter().map(String::as_str).collect();
    let t0 = std::time::Instant::now();
    poll(&format!("every account writable through every host but {victim}"), WRITABLE_WITHIN, || {
        (0..ACCOUNTS).try_for_each(|i| survivors.iter().try_for_each(|h| touch(&cluster, h, i)))
    });
    eprintln!("{victim} down: every account writable {:?} after the clients stopped", t0.elapsed());

    let expected = bank::balances_of_recorded_transfers(&cluster, &survivors, &transfers);
    assert_eq!(expected.iter().sum::<i64>(), ACCOUNTS as i64 * INITIAL_BALANCE, "the money adds up");
    let accounts: Vec<String> = (0..ACCOUNTS).map(account).collect();
    for h in &survivors {
        let balances: Vec<i64> = redis::cmd("MGET").arg(&accounts).query(&mut cluster.redis(h)).expect("MGET");
        assert_eq!(balances, expected, "balances read on {h} vs. initial + recorded transfers");
    }
    let partitions = cluster.hosts[0].cfg.cluster.partitions;
    poll("the survivors settle (nothing prepared, copies agree)", SETTLED_WITHIN, || {
        replicas_agree_live(&cluster.store_vnodes_of(&survivors)?, partitions)
    });
    a_snapshot_without_it_restores(&cluster, victim, &expected);
}

/// How long one `waymark snapshot` command may take (a debug build on 2 shared cores).
const SNAPSHOT_WITHIN: Duration = Duration::from_secs(120);

fn waymark(words: &[&str]) -> (bool, String) {
    waymark_said(words, SNAPSHOT_WITHIN)
}

/// The manifest of snapshot `outage` records, for every partition, the chain in force at the cut
/// (primary first): none holds a vnode of `victim`, and each vnode listed is in the chains of the
/// partitions it holds.
fn the_manifest_records_the_chains_without(dir: &std::path::Path, victim: &str) {
    let path = find_file(dir, "outage", "manifest.json", 4).expect("the snapshot's manifest");
    let text = std::fs::read_to_string(&path).expect("the manifest");
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("a JSON manifest");
    let mut chains = std::collections::BTreeMap::new();
    for v in manifest["vnodes"].as_array().expect("vnodes") {
        let name = v["vnode"].as_str().expect("a vnode name");
        for (p, chain) in v["chains"].as_object().expect("chains recorded") {
            let chain: Vec<&str> = chain.as_array().expect("a chain").iter().filter_map(|c| c.as_str()).collect();
            assert!(chain.contains(&name), "{name} holds partition {p} but its chain is {chain:?}");
            assert!(!chain.iter().any(|c| c.ends_with(&format!("@{victim}"))), "partition {p}: {chain:?}");
            chains.insert(p.clone(), chain.iter().map(|c| c.to_string()).collect::<Vec<_>>());
        }
    }
    assert_eq!(chains.len() as u64, manifest["cluster"]["partitions"].as_u64().expect("partitions"), "{chains:?}");
}

/// The first file called `file` in a directory called `parent`, at most `depth` levels below `dir`.
fn find_file(dir: &std::path::Path, parent: &str, file: &str, depth: usize) -> Option<std::path::PathBuf> {
    let candidate = dir.join(parent).join(file);
    if candidate.is_file() {
        return Some(candidate);
    }
    let entries = std::fs::read_dir(dir).ok()?;
    let subdirs = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir());
    subdirs.filter(|_| depth > 0).find_map(|d| find_file(&d, parent, file, depth - 1))
}

/// With `victim` still down: a snapshot of the survivors, its check, and its restore onto 2 new
/// hosts, whose balances must be `expected`.
fn a_snapshot_without_it_restores(cluster: &Cluster, victim: &str, expected: &[i64]) {
    let dir = cluster.dir().display().to_string();
    // Right after the failover a cut may be refused (TRYAGAIN) or fail across a late host record:
    // asked again within the bound.
    let created = poll(&format!("a snapshot with {victim} down"), WRITABLE_WITHIN, || {
        let (ok, text) = waymark(&["snapshot", "create", "outage", "--dir", &dir]);
        ok.then_some(text.clone()).ok_or(text)
    });
    eprintln!("{victim} down: {}", created.trim());
    let (ok, checked) = waymark(&["snapshot", "check", "outage", "--dir", &dir]);
    assert!(ok && checked.contains("OK:"), "snapshot check with {victim} down:\n{checked}");
    assert!(
        checked.contains("fewer copies:") && checked.contains(victim),
        "the check says what is missing:\n{checked}"
    );
    the_manifest_records_the_chains_without(cluster.dir(), victim);
    let restored = restore_and_start(&dir, "outage", 2, SNAPSHOT_WITHIN);
    let accounts: Vec<String> = (0..ACCOUNTS).map(account).collect();
    let balances: Vec<Option<i64>> =
        redis::cmd("MGET").arg(&accounts).query(&mut restored.redis("node1")).expect("MGET");
    assert!(balances.iter().all(Option::is_some), "an account is missing from the restore: {balances:?}");
    let total: i64 = balances.iter().flatten().sum();
    assert_eq!(total, expected.iter().sum::<i64>(), "the restored bank total (snapshot taken with {victim} down)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_serves_every_account_with_any_one_host_left_down_and_the_money_adds_up() {
    for victim in ["node1", "node2", "node3"] {
        eprintln!("--- {victim} ---");
        survives_the_loss_of(victim).await;
    }
}

/// Kills of each host in turn, each on a fresh cluster, for `bench/failover.sh`.
const KILLS_PER_HOST: usize = 4;
/// How often the window's probe tries every account.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// The failover window of one kill: from the SIGKILL until every account took a transaction
/// through every survivor, probed while the clients go on; and the transfers acknowledged per
/// second (clients through the survivors) before the kill, during the window and after it.
async fn failover_window(victim: &str) -> (Duration, [f64; 3]) {
    let mut cluster = Cluster::start(&Spec::new(3, 2));
    bank::set_initial_balances(&cluster).await;
    // Through the survivors only, so that the rates before and after compare the same clients (the
    // test above also sends through the victim, so that transactions it coordinates die with it).
    let urls: Vec<String> = cluster.hosts.iter().filter(|h| h.name != victim).map(|h| h.redis_url()).collect();
    let start = Instant::now();
    let until = start + KILL_AT + DOWN_FOR;
    let clients: Vec<_> = (0..CLIENTS).map(|id| tokio::spawn(bank::client(id, urls.clone(), start, until))).collect();
    tokio::time::sleep_until(start + KILL_AT).await;
    cluster.kill(victim);
    let killed = Instant::now();
    let survivors: Vec<String> = cluster.hosts.iter().map(|h| h.name.clone()).filter(|h| h != victim).collect();
    let mut window = None;
    while window.is_none() && killed.elapsed() < DOWN_FOR {
        let all = (0..ACCOUNTS).all(|i| survivors.iter().all(|h| touch(&cluster, h, i).is_ok()));
        if all {
            window = Some(killed.elapsed());
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    let mut transfers = vec![];
    for c in clients {
        transfers.extend(c.await.expect("a client panicked"));
    }
    let window = window.unwrap_or(DOWN_FOR);
    let healed = KILL_AT + window;
    let rate = |from: Duration, to: Duration| bank::counts(&transfers, from, to).0 as f64 / (to - from).as_secs_f64();
    (window, [rate(Duration::ZERO, KILL_AT), rate(KILL_AT, healed), rate(healed, KILL_AT + DOWN_FOR)])
}

/// `bench/failover.sh`: the failover window over 12 kills (each host 4 times, node1 included) with
/// p50 and max, and the transfer rate before, during and after. A benchmark, not a check: run with
/// `--ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn failover_window_over_twelve_kills() {
    let mut windows = vec![];
    let mut rates = vec![];
    for round in 0..KILLS_PER_HOST {
        for victim in ["node1", "node2", "node3"] {
            let (window, rate) = failover_window(victim).await;
            println!(
                "kill {} of {victim}: every account writable after {:.0} ms; transfers/s before {:.0}, during {:.0}, after {:.0}",
                round + 1,
                window.as_secs_f64() * 1e3,
                rate[0],
                rate[1],
                rate[2]
            );
            windows.push(window);
            rates.push(rate);
        }
    }
    windows.sort();
    let mean = |i: usize| rates.iter().map(|r| r[i]).sum::<f64>() / rates.len() as f64;
    println!(
        "failover window over {} kills: p50 {:.0} ms, max {:.0} ms; transfers/s before {:.0}, during {:.0}, after {:.0}",
        windows.len(),
        windows[windows.len() / 2].as_secs_f64() * 1e3,
        windows[windows.len() - 1].as_secs_f64() * 1e3,
        mean(0),
        mean(1),
        mean(2)
    );
}

/// Issue 30, item 6: with `cluster.min_copies = 2`, once a dead host's partitions moved, a write
/// to a partition left with one copy is refused with Redis's `NOREPLICAS` (nothing is written),
/// while reads of it go on and a partition whose two copies both survived takes writes.
#[test]
fn min_copies_refuses_writes_to_a_partition_left_with_fewer_copies() {
    let mut cluster = Cluster::init(&Spec::new(3, 2));
    cluster.edit_configs(|text| text.replacen("[cluster]\n", "[cluster]\nmin_copies = 2\n", 1));
    assert_eq!(cluster.hosts[0].cfg.cluster.min_copies, 2, "the edited config sets min_copies");
    let names = ["node1", "node2", "node3"];
    for name in names {
        cluster.spawn(name);
    }
    for name in names {
        cluster.wait_serving(name);
    }
    let keys: Vec<String> = (0..ACCOUNTS).map(account).collect();
    let mut con = cluster.redis("node1");
    for k in &keys {
        let _: () = redis::cmd("SET").arg(k).arg(1).query(&mut con).expect("SET with every host up");
    }
    cluster.kill("node3");
    let (refused, taken) =
        poll("writes refused on one-copy partitions, taken on two-copy ones", WRITABLE_WITHIN, || {
            let mut con = cluster.redis("node1");
            let (mut refused, mut taken) = (vec![], vec![]);
            for k in &keys {
                match redis::cmd("SET").arg(k).arg(2).query::<()>(&mut con) {
                    Ok(()) => taken.push(k.clone()),
                    Err(e) if e.code() == Some("NOREPLICAS") => refused.push(k.clone()),
                    Err(e) => return Err(format!("{k}: {e}")),
                }
            }
            match refused.is_empty() || taken.is_empty() {
                true => Err(format!("{} refused, {} taken", refused.len(), taken.len())),
                false => Ok((refused, taken)),
            }
        });
    eprintln!("node3 down, min_copies 2: {} keys refused, {} taken", refused.len(), taken.len());
    let mut con = cluster.redis("node2");
    for k in &refused {
        let v: i64 = redis::cmd("GET").arg(k).query(&mut con).expect("a read of a one-copy partition");
        assert_eq!(v, 1, "{k}: the refused write wrote nothing");
    }
}
