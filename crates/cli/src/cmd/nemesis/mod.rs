//! `waymark nemesis`: real hosts, each in a network namespace of its own, under faults drawn from
//! a seed — killed and restarted (the root's host too), paused, cut off — while bank clients run
//! through the Redis protocol; every operation is recorded and the history is checked (issue 31).
//!
//! Built so far: namespaces on a bridge, the kill, pause and isolate faults, the bank workload and
//! its checks (every audit and the final state hold the bank's total; after healing every host
//! serves every account with the same balances). Not yet: partitions other than a host cut off,
//! packet loss and a full disk (nftables, tmpfs), the simulator's checkers over the history, the
//! chart.

mod check;
mod faults;
mod hosts;
mod net;
mod workload;

use anyhow::{bail, Context, Result};
use clap::Args;
use faults::{Fault, FaultKind};
use hosts::Hosts;
use net::{Net, Tag};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct NemesisArgs {
    /// Hosts, each in its own network namespace (1 to 9).
    #[arg(long, default_value_t = 3)]
    hosts: usize,
    /// Seconds of workload; faults stop 3 s before the end.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Faults to draw from, comma-separated: kill, pause, isolate.
    #[arg(long, default_value = "kill,pause,isolate", value_delimiter = ',')]
    faults: Vec<String>,
    /// Seed of the fault schedule and of the clients' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bank clients (threads, one connection each, spread over the hosts).
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// Bank accounts.
    #[arg(long, default_value_t = 16)]
    accounts: usize,
    /// Where the cluster and the history go [default: a new temporary directory, removed when
    /// the run passes].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run every node with this deliberate protocol bug (`node.breaks`; e.g. `skip-lock`), to see
    /// the checks catch it.
    #[arg(long = "break")]
    breaks: Vec<String>,
}

/// Set by SIGINT or SIGTERM: every loop of the run ends, and what it created is removed.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Sleeps until `until`, waking early when the run is stopped; false if it was.
fn sleep_until(until: Instant) -> bool {
    while Instant::now() < until {
        if STOP.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
    }
    !STOP.load(Ordering::Relaxed)
}

pub fn run(args: NemesisArgs) -> Result<()> {
    let kinds: Vec<FaultKind> = args.faults.iter().map(|f| f.parse()).collect::<Result<_>>()?;
    if kinds.is_empty() {
        bail!("--faults: name at least one of kill, pause, isolate");
    }
    if args.accounts < 2 || args.clients == 0 {
        bail!("--accounts must be at least 2 and --clients at least 1");
    }
    let schedule = faults::schedule(args.seed, args.seconds, args.hosts, &kinds);
    println!("nemesis: {} hosts, {} s, seed {}; the schedule:", args.hosts, args.seconds, args.seed);
    for f in &schedule {
        println!("  {f}");
    }
    catch_signals();
    let (dir, ours) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("waymark-nemesis-{}", std::process::id())), true),
    };
    let net = Net::create(Tag::of_this_process(), args.hosts)?;
    let result = run_in(&args, &dir, &net, &schedule);
    drop(net);
    match &result {
        Ok(()) if ours => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        _ => println!("the cluster's directory (configs, logs, history.jsonl): {}", dir.display()),
    }
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted: every process, namespace and link of the run was removed");
    }
    result
}

fn run_in(args: &NemesisArgs, dir: &std::path::Path, net: &Net, schedule: &[Fault]) -> Result<()> {
    let replicas = 2.min(args.hosts);
    crate::cmd::set_quiet(true);
    crate::cmd::cluster::init(dir, &crate::cmd::cluster::Spec::local(args.hosts as u32, replicas, 64))?;
    crate::cmd::set_quiet(false);
    if !args.breaks.is_empty() {
        crate::cmd::cluster::set_breaks(dir, &args.breaks)?;
        println!("every node runs with the break(s) {}", args.breaks.join(", "));
    }
    let mut hosts = Hosts::place(dir, net)?;
    for h in 0..args.hosts {
        hosts.start(h)?;
    }
    hosts.wait_serving()?;
    println!("{} hosts serve, each in its own namespace", args.hosts);
    let accounts: Vec<String> = (0..args.accounts).map(|i| format!("acct{i}")).collect();
    let total = open_bank(hosts.hosts[0].redis, &accounts)?;
    let addrs: Vec<std::net::SocketAddr> = hosts.hosts.iter().map(|h| h.redis).collect();
    let started = Instant::now();
    let clients_stop = AtomicBool::new(false);
    let (history, windows) = std::thread::scope(|s| {
        let clients: Vec<_> = (0..args.clients)
            .map(|id| {
                let client = workload::Client {
                    id,
                    seed: args.seed,
                    hosts: &addrs,
                    accounts: &accounts,
                    started,
                    stop: &clients_stop,
                };
                s.spawn(move || client.run())
            })
            .collect();
        let windows = inject(&mut hosts, net, schedule, started, args.seconds);
        clients_stop.store(true, Ordering::Relaxed);
        let history: Vec<workload::Op> = clients.into_iter().flat_map(|c| c.join().unwrap_or_default()).collect();
        (history, windows)
    });
    let windows = windows?;
    write_history(dir, &history)?;
    if STOP.load(Ordering::Relaxed) {
        return Ok(()); // `run` says it was interrupted
    }
    let report = check::check(&history, &windows, total, &hosts, &accounts, args.seconds)?;
    println!("{report}");
    if !report.passed() {
        bail!("the nemesis found a violation (history: {})", dir.join("history.jsonl").display());
    }
    Ok(())
}

/// How long the bank may take to open: a host answers PING before its vnodes serve (`TRYAGAIN`).
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Every account gets 100, retried while the cluster starts; returns the total.
fn open_bank(addr: std::net::SocketAddr, accounts: &[String]) -> Result<i64> {
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        match crate::cmd::bank::open_accounts(addr, accounts, 100) {
            Ok(total) => return Ok(total),
            Err(e) if Instant::now() > deadline => {
                return Err(e.context(format!("opening the bank within {OPEN_TIMEOUT:?}")))
            }
            Err(_) if !sleep_until(Instant::now() + Duration::from_millis(200)) => bail!("interrupted"),
            Err(_) => {}
        }
    }
}

/// Runs the schedule; returns the windows each fault actually held (seconds since `started`),
/// after every fault is healed and every host runs again.
fn inject(hosts: &mut Hosts, net: &Net, schedule: &[Fault], started: Instant, seconds: u64) -> Result<Vec<Fault>> {
    let mut held = vec![];
    for f in schedule {
        if !sleep_until(started + Duration::from_millis(f.start_ms)) {
            break;
        }
        let start_ms = started.elapsed().as_millis() as u64;
        apply(hosts, net, f, true, started)?;
        if !sleep_until(started + Duration::from_millis(f.end_ms)) {
            break; // interrupted: dropping the hosts and the network undoes the fault
        }
        apply(hosts, net, f, false, started)?;
        held.push(Fault { start_ms, end_ms: started.elapsed().as_millis() as u64, ..f.clone() });
    }
    sleep_until(started + Duration::from_secs(seconds));
    Ok(held)
}

fn apply(hosts: &mut Hosts, net: &Net, f: &Fault, on: bool, started: Instant) -> Result<()> {
    let name = &hosts.hosts[f.host].name;
    let at_s = started.elapsed().as_secs_f64();
    println!("  {at_s:>6.1} s  {} {name}", if on { f.kind.name() } else { "heal" });
    match (f.kind, on) {
        (FaultKind::Kill, true) => hosts.kill(f.host),
        (FaultKind::Kill, false) => hosts.start(f.host),
        (FaultKind::Pause, on) => hosts.pause(f.host, on),
        (FaultKind::Isolate, on) => net.set_cut_off(f.host, on),
    }
}

fn write_history(dir: &std::path::Path, history: &[workload::Op]) -> Result<()> {
    let mut text = String::new();
    for op in history {
        text += &serde_json::to_string(op)?;
        text.push('\n');
    }
    std::fs::write(dir.join("history.jsonl"), text).context("writing the history")
}
