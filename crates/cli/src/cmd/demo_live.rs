//! `waymark demo`: Waymark's main job on real processes. A 3-host cluster (2 replicas) on
//! loopback runs bank transfers through the Redis protocol while a full snapshot and then an
//! increment every second are taken; the host of the tree's root is killed with SIGKILL after two
//! seconds and left down until the last second. The survivors fail over (the few snapshots asked
//! during the failover window fail cleanly), then transfers and snapshots go on without it. Then
//! the newest increment and one taken while the host was down are restored into fresh clusters —
//! the second on 2 hosts — which are started and checked: the bank total is what it was at the
//! start and every partition's replicas hold the same data. Every process the demo starts, it
//! stops; it exits non-zero on any failure.

use super::admin_client::Admin;
use super::bank::{self, connect, Transfer};
use super::cluster::{self, Spec};
use super::snapshot;
use super::started::Started;
use anyhow::{bail, Context, Result};
use rand::Rng;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use waymark_server::snapshot::create::{CreateRequest, Created};

const SNAPSHOT: &str = "demo";
const BALANCE: i64 = 1_000;

pub struct Options {
    pub dir: Option<PathBuf>,
    pub seconds: u64,
    pub clients: usize,
    pub accounts: usize,
    /// The cluster's cut strategy (`cluster.strategy`).
    pub strategy: waymark_core::CutStrategy,
}

#[derive(Default)]
struct Counts {
    committed: AtomicU64,
    aborted: AtomicU64,
    errors: AtomicU64,
}

/// One attempt at a snapshot: what it gave, or why it failed.
struct Attempt {
    at_s: f64,
    /// Asked while the killed host was down.
    host_down: bool,
    result: Result<Created, String>,
}

pub fn run(opts: Options) -> Result<()> {
    if opts.seconds < 4 || opts.clients == 0 || opts.accounts < 2 {
        bail!("--seconds must be at least 4, --clients at least 1, --accounts at least 2");
    }
    let work = workdir(opts.dir.as_deref())?;
    super::set_quiet(true);
    let dir = work.join("cluster");
    println!(
        "Waymark demo in {}: 3 hosts, 2 replicas, {} bank clients, {}s, {} cuts",
        work.display(),
        opts.clients,
        opts.seconds,
        opts.strategy
    );
    cluster::init(&dir, &Spec { strategy: opts.strategy, ..Spec::local(3, 2, 16) })?;
    let started = Started::default();
    started.stop_on_signal("demo")?;
    started.add(&dir);
    cluster::start(&dir)?;
    let hosts = cluster::hosts_of(&dir)?;
    let redis: Vec<SocketAddr> = hosts.iter().map(|(_, c)| c.this_host().redis).collect();
    let accounts: Vec<String> = (0..opts.accounts).map(|i| format!("acct:{i}")).collect();
    let total = bank::open_accounts(redis[0], &accounts, BALANCE)?;
    let (stop, counts) = (Arc::new(AtomicBool::new(false)), Arc::new(Counts::default()));
    let clients: Vec<JoinHandle<()>> =
        (0..opts.clients).map(|i| spawn_client(i, &redis, &accounts, stop.clone(), counts.clone())).collect();
    let attempts = take_snapshots(&dir, opts.seconds);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.join();
    }
    let attempts = attempts?;
    let checks = restore_and_check(&work, &dir, &attempts, (opts.accounts, total), &started);
    started.stop_all();
    let checks = checks?;
    report(&counts, &attempts, &checks, total)?;
    if opts.dir.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(())
}

fn workdir(dir: Option<&Path>) -> Result<PathBuf> {
    let work = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("waymark-demo-{}", std::process::id())),
    };
    if work.exists() && std::fs::read_dir(&work)?.next().is_some() {
        bail!("{} is not empty: give the demo a new directory", work.display());
    }
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    Ok(work.canonicalize()?)
}

/// A client moving money between random accounts with WATCH/MULTI/EXEC until told to stop; it
/// moves to the next host when its host goes away.
fn spawn_client(
    i: usize,
    redis: &[SocketAddr],
    accounts: &[String],
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> JoinHandle<()> {
    let (redis, accounts) = (redis.to_vec(), accounts.to_vec());
    std::thread::spawn(move || {
        let mut rng = rand::thread_rng();
        let mut host = i % redis.len();
        let mut con = None;
        while !stop.load(Ordering::Relaxed) {
            let Some(c) = con.as_mut() else {
                con = connect(redis[host]).ok();
                if con.is_none() {
                    host = (host + 1) % redis.len();
                    std::thread::sleep(Duration::from_millis(100));
                }
                continue;
            };
            let a = rng.gen_range(0..accounts.len());
            let b = (a + rng.gen_range(1..accounts.len())) % accounts.len();
            match bank::transfer(c, &accounts[a], &accounts[b], rng.gen_range(1..50)) {
                Ok(Transfer::Committed) => counts.committed.fetch_add(1, Ordering::Relaxed),
                Ok(Transfer::Aborted | Transfer::Declined) => counts.aborted.fetch_add(1, Ordering::Relaxed),
                Err(_) => {
                    con = None;
                    host = (host + 1) % redis.len();
                    counts.errors.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    })
}

/// A full snapshot, then an increment every second; the victim (`victim`) is killed at the second
/// second and restarted at the last but one.
fn take_snapshots(dir: &Path, seconds: u64) -> Result<Vec<Attempt>> {
    let admin = Admin::for_cluster(dir)?;
    let begun = Instant::now();
    let (kill_at, back_at) = (2, seconds - 1);
    let mut attempts = vec![];
    for tick in 0..=seconds {
        wait_until(begun + Duration::from_secs(tick));
        if tick == kill_at {
            kill_victim(dir)?;
        }
        if tick == back_at {
            restart_victim(dir)?;
        }
        let req = CreateRequest { name: SNAPSHOT.into(), incremental: tick > 0 };
        let result = create(&admin, &req);
        let at_s = begun.elapsed().as_secs_f64();
        let host_down = (kill_at..back_at).contains(&tick);
        let down = if host_down { ", a host down" } else { "" };
        match &result {
            Ok(c) => println!("  {at_s:5.1}s snapshot {} #{:<2} cut {:<3} ok{down}", SNAPSHOT, c.increment, c.cut),
            Err(e) => println!("  {at_s:5.1}s snapshot failed cleanly: {}", one_line(e)),
        }
        if tick == 0 && result.is_err() {
            bail!("the first (full) snapshot failed: {}", result.err().unwrap_or_default());
        }
        attempts.push(Attempt { at_s, host_down, result });
    }
    Ok(attempts)
}

/// An error of several lines (one per host asked) on one line, cut to a terminal's width.
fn one_line(e: &str) -> String {
    let joined = e.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(150) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

fn create(admin: &Admin, req: &CreateRequest) -> Result<Created, String> {
    admin.post("/snapshots", req, Duration::from_secs(60)).map_err(|e| format!("{e:#}"))
}

fn wait_until(t: Instant) {
    if let Some(d) = t.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
}

/// The host killed: the root's, the hardest to lose (the tree elects another root before it can
/// record the host dead and promote its partitions' replicas).
fn victim(dir: &Path) -> Result<(String, PathBuf)> {
    let hosts = cluster::hosts_of(dir)?;
    let topology = waymark_server::topology::Topology::new(&hosts[0].1.cluster)?;
    let (host_dir, cfg) = hosts
        .into_iter()
        .find(|(_, c)| topology.managers_on(&c.host).any(|m| m.parents.is_empty()))
        .context("no host of the demo cluster runs the root")?;
    Ok((cfg.host, host_dir))
}

fn kill_victim(dir: &Path) -> Result<()> {
    let (name, host_dir) = victim(dir)?;
    let pid = cluster::running_pid(&host_dir).with_context(|| format!("{name} is not running"))?;
    cluster::kill_and_wait(pid, &host_dir);
    println!("  killed {name} (pid {pid}) with SIGKILL");
    Ok(())
}

fn restart_victim(dir: &Path) -> Result<()> {
    let (name, host_dir) = victim(dir)?;
    let exe = std::env::current_exe()?;
    let mut child = cluster::spawn_node(&exe, &host_dir)?;
    let cfg = waymark_server::config::NodeConfig::load(&host_dir.join("waymark.toml"))?;
    cluster::wait_serving(&host_dir, &cfg, Some(&mut child), Instant::now() + Duration::from_secs(60))?;
    println!("  restarted {name} (pid {})", child.id());
    Ok(())
}

/// A restored cluster, checked.
struct Check {
    increment: u32,
    cut: u64,
    hosts: u32,
    restored: snapshot::Restored,
    total: i64,
}

/// Restores the newest increment (3 hosts) and one taken while the host was down (2 hosts; an
/// earlier one at random if none was), starts each, and checks the bank total and replica
/// agreement there.
fn restore_and_check(
    work: &Path,
    dir: &Path,
    attempts: &[Attempt],
    (accounts, total): (usize, i64),
    started: &Started,
) -> Result<Vec<Check>> {
    let ok: Vec<&Created> = attempts.iter().filter_map(|a| a.result.as_ref().ok()).collect();
    let newest = ok.last().context("no snapshot succeeded")?;
    let during: Vec<&Created> =
        attempts.iter().filter(|a| a.host_down).filter_map(|a| a.result.as_ref().ok()).collect();
    let earlier = match during.last() {
        Some(c) => *c,
        None => ok[rand::thread_rng().gen_range(0..ok.len().saturating_sub(1).max(1))],
    };
    let mut checks = vec![];
    for (created, hosts) in [(*newest, 3), (earlier, 2)] {
        let to = work.join(format!("restored-{}-on-{hosts}", created.increment));
        println!(
            "restoring {SNAPSHOT} #{} (cut {}) onto {hosts} hosts in {}",
            created.increment,
            created.cut,
            to.display()
        );
        let restored =
            snapshot::restore(&dir.join("snapshots"), SNAPSHOT, Some(created.increment), &to, Some(hosts), false)?;
        started.add(&to);
        cluster::start(&to)?;
        let found = bank_total(&to, accounts)?;
        replicas_agree(&to)?;
        checks.push(Check { increment: created.increment, cut: created.cut, hosts, restored, total: found });
        cluster::stop(&to)?;
    }
    if checks.iter().any(|c| c.total != total) {
        bail!("a restored bank total differs from {total}");
    }
    Ok(checks)
}

/// The sum of every account's balance, read in one transaction (MGET) from the first host.
fn bank_total(dir: &Path, accounts: usize) -> Result<i64> {
    let hosts = cluster::hosts_of(dir)?;
    let keys: Vec<String> = (0..accounts).map(|i| format!("acct:{i}")).collect();
    bank::read_total(hosts[0].1.this_host().redis, &keys)
}

/// Every partition's replicas hold the same keys, versions and values (digests from /status).
fn replicas_agree(dir: &Path) -> Result<()> {
    let admins: Vec<String> = cluster::hosts_of(dir)?.iter().map(|(_, c)| c.this_host().admin.to_string()).collect();
    match super::replicas::disagreements(&admins)?.first() {
        Some(d) => bail!("replicas differ: {d}"),
        None => Ok(()),
    }
}

fn report(counts: &Counts, attempts: &[Attempt], checks: &[Check], total: i64) -> Result<()> {
    let ok: Vec<&Created> = attempts.iter().filter_map(|a| a.result.as_ref().ok()).collect();
    let failed = attempts.len() - ok.len();
    let during = attempts.iter().filter(|a| a.host_down && a.result.is_ok()).count();
    let mut cut_ms: Vec<f64> = ok.iter().map(|c| c.cut_ms).collect();
    cut_ms.sort_by(f64::total_cmp);
    let p50 = cut_ms.get(cut_ms.len() / 2).copied().unwrap_or(0.0);
    let max = cut_ms.last().copied().unwrap_or(0.0);
    println!("\nWaymark demo report");
    println!(
        "  transfers: {} committed, {} aborted (WATCH), {} interrupted by the killed host",
        counts.committed.load(Ordering::Relaxed),
        counts.aborted.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed)
    );
    println!(
        "  snapshots: {} taken (1 full, {} increments; {during} while the root's host was down), {failed} failed \
         cleanly during the failover window",
        ok.len(),
        ok.len().saturating_sub(1)
    );
    println!("  cut latency: p50 {p50:.1} ms, max {max:.1} ms — no transaction paused");
    for c in checks {
        println!(
            "  restore #{} (cut {}) onto {} hosts: {} keys, {:.2} MB of log at {:.1} MB/s; bank total {} (expected {total}); replicas agree",
            c.increment, c.cut, c.hosts, c.restored.keys, c.restored.log_mb, c.restored.mb_per_s, c.total
        );
    }
    if let Some(Attempt { at_s, result: Err(e), .. }) = attempts.last() {
        bail!("the last snapshot (at {at_s:.1}s, after the host came back) failed: {e}");
    }
    println!("  verdict: PASS");
    Ok(())
}
