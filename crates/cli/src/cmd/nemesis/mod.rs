//! `waymark nemesis`: real hosts, each in a network namespace of its own, under faults drawn from
//! a seed — killed and restarted (the root's host too), paused, cut off, partitioned, lossy, out
//! of disk — while bank clients run through the Redis protocol; every operation is recorded and
//! the history is checked (issue 31).
//!
//! Built so far: namespaces on a bridge, the six faults, the bank workload and its checks (every
//! audit and the final state hold the bank's total; after healing every host serves every account
//! with the same balances, and the replicas of every partition agree). Not yet: the simulator's
//! checkers over the history, a list-append workload, the chart.

mod chart;
mod check;
mod disks;
mod faults;
mod hosts;
mod lists;
mod net;
mod snapshots;
mod workload;

use anyhow::{bail, Context, Result};
use clap::Args;
use disks::Disks;
use faults::{Detail, Fault, FaultKind};
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
    /// Faults to draw from, comma-separated: kill, pause, isolate (a host's link down), partition
    /// (nftables: a minority apart, a bridge, one way), loss (nftables: a share of a host's
    /// packets dropped), disk (a host's data tmpfs filled up).
    #[arg(long, default_value = "kill,pause,isolate,partition,loss,disk", value_delimiter = ',')]
    faults: Vec<String>,
    /// Seed of the fault schedule and of the clients' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// What the clients run: the bank (WATCH transfers, audits), or list appends (MULTI/EXEC of
    /// GETs and APPENDs, checked by the simulator's serializability checker).
    #[arg(long, value_enum, default_value_t = workload::Workload::Bank)]
    workload: workload::Workload,
    /// Clients (threads, one connection each, spread over the hosts).
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
    /// Where the chart goes (PNG: operations per second, each fault's window in a strip under
    /// it) [default: DIR/chart.png].
    #[arg(long)]
    chart: Option<PathBuf>,
    /// Print the schedule the seed draws and stop (needs no root).
    #[arg(long)]
    schedule_only: bool,
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
        bail!("--faults: name at least one of kill, pause, isolate, partition, loss, disk");
    }
    if kinds.contains(&FaultKind::Partition) && args.hosts < 2 {
        bail!("the partition fault needs at least 2 hosts");
    }
    if kinds.iter().any(|k| k.needs_nftables()) {
        Net::check_nftables()?;
    }
    if args.accounts < 2 || args.clients == 0 {
        bail!("--accounts must be at least 2 and --clients at least 1");
    }
    let schedule = faults::schedule(args.seed, args.seconds, args.hosts, &kinds);
    println!("nemesis: {} hosts, {} s, seed {}; the schedule:", args.hosts, args.seconds, args.seed);
    for f in &schedule {
        println!("  {f}");
    }
    if args.schedule_only {
        return Ok(());
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
            println!(
                "the run's directory was removed: --dir DIR keeps it (history, logs, chart), --chart FILE the chart"
            );
        }
        _ => println!("the cluster's directory (configs, logs, history.jsonl): {}", dir.display()),
    }
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted: every process, namespace and link of the run was removed");
    }
    result
}

fn run_in(args: &NemesisArgs, dir: &std::path::Path, net: &Net, schedule: &[Fault]) -> Result<()> {
    // Declared before the hosts, so dropped after them: a tmpfs is unmounted once its node stopped.
    let disks = prepare(args, dir)?;
    let mut hosts = Hosts::place(dir, net)?;
    for h in 0..args.hosts {
        hosts.start(h)?;
    }
    hosts.wait_serving()?;
    println!("{} hosts serve, each in its own namespace", args.hosts);
    let accounts: Vec<String> = (0..args.accounts).map(|i| format!("acct{i}")).collect();
    let total = open_bank(hosts.hosts[0].redis, &accounts)?;
    let mut nemesis = Nemesis { hosts: &mut hosts, net, disks: &disks };
    let (history, windows, snapshots) = drive(args, dir, &mut nemesis, schedule, &accounts)?;
    // A node that stopped by itself is started again for the checks, and said.
    let stopped = hosts.restart_stopped()?;
    if !stopped.is_empty() {
        if let Err(e) = hosts.wait_serving() {
            println!("a node that stopped by itself did not start again: {e:#}");
        }
    }
    write_history(dir, &history)?;
    if STOP.load(Ordering::Relaxed) {
        return Ok(()); // `run` says it was interrupted
    }
    let restored = snapshots.iter().any(|a| a.result.is_ok()).then(|| {
        let lists = workload::list_keys(args.seconds);
        let verified = snapshots::verify(dir, args.hosts as u32, args.workload, (&accounts, total), lists);
        verified.map_err(|e| format!("{e:#}"))
    });
    let (windows, snapshots) = (&windows, &snapshots);
    let (hosts, accounts, seconds, workload) = (&hosts, &accounts, args.seconds, args.workload);
    let run = check::Run { stopped, workload, windows, total, hosts, accounts, seconds, snapshots, restored };
    let report = check::check(&history, run)?;
    println!("{report}");
    println!("replay: {}", replay_command(args));
    draw_chart(args, dir, &report, windows);
    if !report.passed() {
        save_statuses(dir, hosts);
        bail!("the nemesis found a violation (history: {})", dir.join("history.jsonl").display());
    }
    Ok(())
}

/// The cluster written in `dir` (its nodes with `--break`s if asked), and with the `disk` fault
/// every host's data directory on a tmpfs of its own.
fn prepare(args: &NemesisArgs, dir: &std::path::Path) -> Result<Disks> {
    let replicas = 2.min(args.hosts);
    crate::cmd::set_quiet(true);
    crate::cmd::cluster::init(dir, &crate::cmd::cluster::Spec::local(args.hosts as u32, replicas, 64))?;
    crate::cmd::set_quiet(false);
    if !args.breaks.is_empty() {
        crate::cmd::cluster::set_breaks(dir, &args.breaks)?;
        println!("every node runs with the break(s) {}", args.breaks.join(", "));
    }
    match args.faults.iter().any(|f| f == FaultKind::Disk.name()) {
        true => Disks::mount(crate::cmd::cluster::hosts_of(dir)?.into_iter().map(|(_, c)| c.data_dir).collect()),
        false => Ok(Disks::none()),
    }
}

/// The run itself: the clients and the snapshot taker in threads while the schedule is injected;
/// the history, the windows the faults held and the snapshots' attempts.
fn drive(
    args: &NemesisArgs,
    dir: &std::path::Path,
    nemesis: &mut Nemesis,
    schedule: &[Fault],
    accounts: &[String],
) -> Result<(Vec<workload::Op>, Vec<Fault>, Vec<snapshots::Attempt>)> {
    let addrs: Vec<std::net::SocketAddr> = nemesis.hosts.hosts.iter().map(|h| h.redis).collect();
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let clients: Vec<_> = (0..args.clients)
            .map(|id| {
                let (workload, seed, hosts, stop) = (args.workload, args.seed, &addrs[..], &stop);
                let appended = std::cell::Cell::new(0);
                let client = workload::Client { id, workload, appended, seed, hosts, accounts, started, stop };
                s.spawn(move || client.run())
            })
            .collect();
        let snapshots = s.spawn(|| snapshots::take_while_running(dir, started, &stop));
        let windows = inject(nemesis, schedule, started, args.seconds);
        stop.store(true, Ordering::Relaxed);
        let history: Vec<workload::Op> = clients.into_iter().flat_map(|c| c.join().unwrap_or_default()).collect();
        let snapshots = snapshots.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the snapshot thread panicked")));
        Ok((history, windows?, snapshots?))
    })
}

/// The command line that runs this schedule and these clients again.
fn replay_command(args: &NemesisArgs) -> String {
    let breaks: String = args.breaks.iter().map(|b| format!(" --break {b}")).collect();
    format!(
        "waymark nemesis --hosts {} --seconds {} --seed {} --faults {} --workload {} --clients {} --accounts {}{breaks}",
        args.hosts,
        args.seconds,
        args.seed,
        args.faults.join(","),
        args.workload.name(),
        args.clients,
        args.accounts
    )
}

fn draw_chart(args: &NemesisArgs, dir: &std::path::Path, report: &check::Report, windows: &[Fault]) {
    let chart = args.chart.clone().unwrap_or_else(|| dir.join("chart.png"));
    let series = chart::Series {
        title: format!("waymark nemesis: {} hosts, seed {}, faults {}", args.hosts, args.seed, args.faults.join(",")),
        ok: &report.ok_per_second,
        not_ok: &report.not_ok_per_second,
        windows,
    };
    match chart::draw(&series, &chart) {
        Ok(()) => println!("chart: {}", chart.display()),
        Err(e) => println!("no chart: {e}"),
    }
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

/// What the faults act on.
struct Nemesis<'a> {
    hosts: &'a mut Hosts,
    net: &'a Net,
    disks: &'a Disks,
}

/// Runs the schedule; returns the windows each fault actually held (seconds since `started`),
/// after every fault is healed and every host runs again.
fn inject(nemesis: &mut Nemesis, schedule: &[Fault], started: Instant, seconds: u64) -> Result<Vec<Fault>> {
    let mut held = vec![];
    for f in schedule {
        if !sleep_until(started + Duration::from_millis(f.start_ms)) {
            break;
        }
        let start_ms = started.elapsed().as_millis() as u64;
        nemesis.apply(f, true, started)?;
        if !sleep_until(started + Duration::from_millis(f.end_ms)) {
            break; // interrupted: dropping the hosts and the network undoes the fault
        }
        nemesis.apply(f, false, started)?;
        held.push(Fault { start_ms, end_ms: started.elapsed().as_millis() as u64, ..f.clone() });
    }
    sleep_until(started + Duration::from_secs(seconds));
    Ok(held)
}

impl Nemesis<'_> {
    fn apply(&mut self, f: &Fault, on: bool, started: Instant) -> Result<()> {
        let name = self.hosts.hosts[f.host].name.clone();
        let at_s = started.elapsed().as_secs_f64();
        let what = match &f.detail {
            Detail::Partition(p) => p.to_string(),
            _ => name,
        };
        println!("  {at_s:>6.1} s  {} {what}", if on { f.kind.name() } else { "heal" });
        match (f.kind, &f.detail, on) {
            (FaultKind::Kill, _, true) => self.hosts.kill(f.host),
            (FaultKind::Kill, _, false) => self.hosts.start(f.host),
            (FaultKind::Pause, _, on) => self.hosts.pause(f.host, on),
            (FaultKind::Isolate, _, on) => self.net.set_cut_off(f.host, on),
            (FaultKind::Partition, Detail::Partition(p), on) => self.net.set_partition(p, on),
            (FaultKind::Loss, Detail::Loss { percent }, on) => self.net.set_loss(f.host, *percent, on),
            (FaultKind::Disk, _, true) => self.fill_disk(f.host),
            (FaultKind::Disk, _, false) => self.free_disk(f.host),
            (kind, detail, _) => bail!("fault {} drawn with {detail:?}", kind.name()),
        }
    }

    fn fill_disk(&mut self, h: usize) -> Result<()> {
        let written = self.disks.fill(h)?;
        println!("           its disk full ({} MiB written)", written >> 20);
        Ok(())
    }

    /// Frees the disk, and starts the node again if the full disk stopped it.
    fn free_disk(&mut self, h: usize) -> Result<()> {
        self.disks.free(h)?;
        if self.hosts.restart_if_stopped(h)? {
            println!("           {} had stopped on the full disk: started again", self.hosts.hosts[h].name);
        }
        Ok(())
    }
}

/// Each host's `/status` (its vnodes, their parents, held replies, waiting reads, prepared
/// branches), saved beside the history for a failed run's diagnosis.
fn save_statuses(dir: &std::path::Path, hosts: &Hosts) {
    for h in &hosts.hosts {
        let url = format!("http://{}/status", h.admin);
        let text = match ureq::get(&url).timeout(Duration::from_secs(10)).call() {
            Ok(resp) => resp.into_string().unwrap_or_else(|e| format!("unreadable: {e}")),
            Err(e) => format!("no answer: {e}"),
        };
        let _ = std::fs::write(dir.join(format!("status-{}.json", h.name)), text);
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
