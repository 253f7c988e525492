//! `waymark bench`: a workload (`bank`, `set`, `get`) against a running cluster (`--dir`, or
//! `--redis` with `--admin`), or one it starts for itself (`--start-hosts N`, stopped by pid at
//! the end, also on Ctrl-C), with a cut of the whole cluster every `--cut-every` or none.
//! `--compare-cuts` runs the same workload without cuts, then with each `--cut-every`, on the same
//! cluster in one invocation, and prints the ratios issue 14's targets are stated in. It reports a
//! table, JSON (`--json`) and a PNG chart (`--chart`); it exits non-zero if the cluster answered
//! any error (a failed command, a failed cut). `--redis` also drives any Redis-protocol server
//! (with `--after-write`, e.g. Valkey's `WAITAOF 1 1 0` after each SET), and `--etcd` an etcd
//! cluster (`set` and `bank`), the replicated peers of `bench/peers.sh`. `waymark bench chart`
//! draws the chart of `bench/strategies.sh`'s JSON.

mod after_write;
mod chart;
mod cuts;
mod etcd;
mod held;
mod report;
mod stats;
mod strategies;
mod workload;

use super::admin_client::{Admin, Target};
use super::cluster::{self, Spec};
use super::started::Started;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use report::{every_text, Report, Setup};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use waymark_core::{CutStrategy, Placement};
use waymark_server::topology::Topology;
pub use workload::Kind;
use workload::Workload;

/// Most clients of one run (each a thread and a connection).
const CLIENTS_MAX: usize = 1_024;
const PIPELINE_MAX: usize = 10_000;
/// Shortest interval between cuts.
/// --rounds: each round is a run per interval and one without cuts.
const ROUNDS_MAX: u32 = 20;
const CUT_EVERY_MIN: Duration = Duration::from_millis(1);
/// How often the progress bar is redrawn.
const PROGRESS_TICK: Duration = Duration::from_millis(200);

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCmd>,
    /// A running cluster's `cluster init` directory (its hosts, and its admin token); with
    /// --start-hosts, where the new cluster goes (must be empty).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Redis addresses of a running cluster, e.g. 127.0.0.1:6380,127.0.0.1:6381 (clients are
    /// spread over them); cuts need --admin and --token-file too.
    #[arg(long, value_delimiter = ',')]
    redis: Vec<SocketAddr>,
    /// An etcd cluster's client endpoints instead, e.g. http://127.0.0.1:2379,... (`set` and
    /// `bank`, through etcd's JSON gateway; no cuts).
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// set: a command sent on the same connection after every SET, its reply checked, e.g.
    /// "WAITAOF 1 1 0" (fsynced here and on one replica) or "WAIT 1 0"; a reply that reports
    /// fewer copies than asked counts as an error.
    #[arg(long)]
    after_write: Option<String>,
    #[command(flatten)]
    admin: Target,
    /// Start a local cluster of this many hosts for the benchmark (in --dir or a temporary
    /// directory) and stop it at the end.
    #[arg(long)]
    start_hosts: Option<u32>,
    /// --start-hosts: copies of each partition.
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    /// --start-hosts: partitions.
    #[arg(long, default_value_t = 64)]
    partitions: u32,
    /// --start-hosts: store vnodes per host; one by default, as `cluster init` writes (fewer,
    /// fuller group commits: docs/BENCHMARKS.md, 2026-12-04).
    #[arg(long, default_value_t = 1)]
    stores: u32,
    /// --start-hosts: `always` (fsync per group commit) or `never`.
    #[arg(long, default_value = "always")]
    fsync: String,
    /// --start-hosts: how a cut snapshots the cluster, `consistent`, `blocking` or `versions`.
    #[arg(long, default_value = "consistent")]
    strategy: CutStrategy,
    /// --start-hosts: preallocate WAL segments (`--wal-preallocate false` to measure what it saves).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    wal_preallocate: bool,
    /// --start-hosts: each host's `limits.maxmemory_bytes` (default: the node's, from the
    /// machine's memory). Past it writes answer `-OOM`, counted as refused, not as errors.
    #[arg(long)]
    maxmemory_bytes: Option<u64>,
    /// --start-hosts: a secure cluster, as `cluster init` writes by default (TLS on every port,
    /// a client password); without it the cluster is `--insecure`, to measure the protocols alone.
    #[arg(long)]
    tls: bool,
    /// set: read every key a SET was acknowledged for back after the runs, and fail if one is
    /// missing or changed (each client remembers its acknowledged keys).
    #[arg(long)]
    verify: bool,
    #[arg(long, value_enum, default_value_t = Kind::Bank)]
    workload: Kind,
    /// Clients, each its own connection.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// set/get: commands sent per round trip.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Unmeasured time before each run's measured seconds, e.g. "1s".
    #[arg(long, default_value = "1s")]
    warmup: humantime::Duration,
    /// A cut of the whole cluster (POST /cuts) this often, e.g. "1s" or "100ms"; none without it.
    /// With --compare-cuts, a list: one run per interval, e.g. "1s,100ms".
    #[arg(long, value_delimiter = ',')]
    cut_every: Vec<humantime::Duration>,
    /// Run without cuts, then with each --cut-every, and print the ratios.
    #[arg(long)]
    compare_cuts: bool,
    /// With --compare-cuts: repeat the comparison this many times on the same cluster, every
    /// other round in reverse order, and report each ratio's median over the rounds — on a
    /// noisy machine two identical runs differ by more than a cut costs.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// bank: accounts (on distinct partitions while there are partitions left).
    #[arg(long, default_value_t = 64)]
    accounts: usize,
    /// set/get: distinct keys.
    #[arg(long, default_value_t = 100_000)]
    keyspace: u64,
    /// set/get: bytes per value.
    #[arg(long, default_value_t = 3)]
    value_size: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw throughput and p99 latency per second, cuts marked, as a PNG here.
    #[arg(long)]
    chart: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Draw the chart of `bench/strategies.sh`'s JSON: a panel per cut interval, each strategy's
    /// transfers per second as the median of its rounds in a band of their min–max, the run
    /// without cuts as the reference, each strategy's cuts as ticks under the panel.
    Chart {
        /// The script's `OUT_DIR/strategies.json`.
        #[arg(long)]
        from: PathBuf,
        /// Where the PNG goes.
        #[arg(long)]
        out: PathBuf,
    },
}

/// The cluster a benchmark talks to.
struct Tested {
    redis: Vec<SocketAddr>,
    /// `--etcd`: the members' client endpoints (`redis` is then empty).
    etcd: Vec<String>,
    admin: Option<Admin>,
    /// Every host's admin address, whose `/metrics` say how many replies were held (empty when
    /// the cluster was given by Redis addresses).
    metrics: Vec<String>,
    placement: Option<Arc<Placement>>,
    replicas: Option<usize>,
    /// A temporary directory of a cluster the benchmark started, removed at the end.
    remove: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if let Some(BenchCmd::Chart { from, out }) = &args.command {
        strategies::draw(from, out)?;
        println!("chart: {}", out.display());
        return Ok(());
    }
    check(&args)?;
    let started = Started::default();
    let mut target = resolve(&args, &started)?;
    let outcome = run_all(&args, &mut target);
    started.stop_all();
    if let Some(dir) = &target.remove {
        let _ = std::fs::remove_dir_all(dir);
    }
    let report = outcome?;
    report.print();
    if let Some(file) = &args.json {
        report.write_json(file)?;
    }
    if let Some(file) = &args.chart {
        chart::draw(&report, file).with_context(|| format!("writing {}", file.display()))?;
    }
    let errors: u64 = report.runs.iter().map(|r| r.errors).sum();
    let failed_cuts: usize = report.runs.iter().map(|r| r.cuts.failed).sum();
    if errors > 0 || failed_cuts > 0 {
        let why: Vec<String> = report
            .runs
            .iter()
            .flat_map(|r| r.cuts.list.iter().filter(|c| !c.ok))
            .map(|c| format!("cut at {:.2} s: {}", c.at_s, c.error.as_deref().unwrap_or("failed")))
            .collect();
        bail!(
            "the cluster answered {errors} errors and {failed_cuts} cuts failed{}",
            why.iter().map(|w| format!("\n  {w}")).collect::<String>()
        );
    }
    Ok(())
}

fn check(args: &BenchArgs) -> Result<()> {
    if args.clients == 0 || args.clients > CLIENTS_MAX {
        bail!("--clients must be in 1..={CLIENTS_MAX}");
    }
    if args.pipeline == 0 || args.pipeline > PIPELINE_MAX || (args.pipeline > 1 && args.workload == Kind::Bank) {
        bail!("--pipeline must be in 1..={PIPELINE_MAX}, and 1 for the bank (a transfer waits for its reads)");
    }
    if args.seconds == 0 || args.seconds > stats::SECONDS_MAX {
        bail!("--seconds must be in 1..={}", stats::SECONDS_MAX);
    }
    if args.workload == Kind::Bank && args.accounts < 2 {
        bail!("--accounts must be at least 2");
    }
    if args.cut_every.iter().any(|d| *d.as_ref() < CUT_EVERY_MIN) {
        bail!("--cut-every must be at least {CUT_EVERY_MIN:?}");
    }
    if args.cut_every.len() > 1 && !args.compare_cuts {
        bail!("several --cut-every intervals need --compare-cuts");
    }
    if args.compare_cuts && args.cut_every.is_empty() {
        bail!("--compare-cuts needs --cut-every");
    }
    if args.verify && args.workload != Kind::Set {
        bail!("--verify is for the set workload");
    }
    if args.rounds == 0 || args.rounds > ROUNDS_MAX || (args.rounds > 1 && !args.compare_cuts) {
        bail!("--rounds must be in 1..={ROUNDS_MAX}, and more than 1 only with --compare-cuts");
    }
    let sources = [args.start_hosts.is_some(), !args.redis.is_empty(), !args.etcd.is_empty()];
    if sources.iter().filter(|s| **s).count() > 1 || (!args.etcd.is_empty() && args.dir.is_some()) {
        bail!("give one of --start-hosts N, --dir D, --redis ADDR,... or --etcd ENDPOINT,...");
    }
    if !args.etcd.is_empty()
        && (args.workload == Kind::Get || args.pipeline > 1 || !args.cut_every.is_empty() || args.verify)
    {
        bail!("--etcd runs the set and bank workloads, one request a round trip, without cuts or --verify");
    }
    if let Some(after) = &args.after_write {
        if args.workload != Kind::Set || !args.etcd.is_empty() {
            bail!("--after-write is for the set workload over the Redis protocol");
        }
        after_write::AfterWrite::parse(after)?;
    }
    Ok(())
}

fn resolve(args: &BenchArgs, started: &Started) -> Result<Tested> {
    if let Some(hosts) = args.start_hosts {
        let (dir, remove) = match &args.dir {
            Some(d) => (d.clone(), None),
            None => {
                let d = std::env::temp_dir().join(format!("waymark-bench-{}", std::process::id()));
                (d.clone(), Some(d))
            }
        };
        super::set_quiet(true);
        let spec = Spec {
            fsync: args.fsync.clone(),
            stores: args.stores,
            strategy: args.strategy,
            wal_preallocate: args.wal_preallocate,
            maxmemory_bytes: args.maxmemory_bytes,
            tls: args.tls,
            password: args.tls,
            ..Spec::local(hosts, args.replicas.min(hosts as usize), args.partitions)
        };
        cluster::init(&dir, &spec)?;
        started.stop_on_signal("benchmark")?;
        started.add(&dir);
        eprintln!("starting a {hosts}-host cluster in {}", dir.display());
        cluster::start(&dir)?;
        let mut t = of_dir(&dir, &args.admin)?;
        t.remove = remove;
        return Ok(t);
    }
    if let Some(dir) = &args.dir {
        return of_dir(dir, &args.admin);
    }
    if !args.etcd.is_empty() {
        let etcd = args.etcd.clone();
        return Ok(Tested {
            redis: vec![],
            etcd,
            admin: None,
            metrics: vec![],
            placement: None,
            replicas: None,
            remove: None,
        });
    }
    if args.redis.is_empty() {
        bail!(
            "which cluster? give --start-hosts N, --dir D (of `cluster init`), --redis ADDR,... or --etcd ENDPOINT,..."
        );
    }
    let admin = if args.cut_every.is_empty() { None } else { Some(args.admin.resolve(None)?) };
    let redis = args.redis.clone();
    Ok(Tested { redis, etcd: vec![], admin, metrics: vec![], placement: None, replicas: None, remove: None })
}

fn of_dir(dir: &Path, admin: &Target) -> Result<Tested> {
    let hosts = cluster::hosts_of(dir)?;
    // The clients speak as the hosts ask: TLS with the cluster's CA, AUTH with its password.
    let first = &hosts[0].1;
    let ca_pem = match &first.tls {
        Some(tls) => Some(std::fs::read(&tls.ca).with_context(|| format!("reading {}", tls.ca.display()))?),
        None => None,
    };
    let password = first.password.as_ref().map(|p| String::from_utf8_lossy(p).into_owned());
    if ca_pem.is_some() || password.is_some() {
        super::bank::use_client_auth(ca_pem, password);
    }
    let redis = hosts.iter().map(|(_, c)| c.this_host().redis).collect();
    let cluster_cfg = &hosts[0].1.cluster;
    let topology = Topology::new(cluster_cfg).context("reading the cluster's placement")?;
    let admin = admin.resolve(Some(&dir.to_path_buf()))?;
    let metrics = hosts.iter().map(|(_, c)| c.this_host().admin.to_string()).collect();
    Ok(Tested {
        redis,
        etcd: vec![],
        admin: Some(admin),
        metrics,
        placement: Some(topology.placement.clone()),
        replicas: Some(topology.placement.chain(waymark_core::PartitionId(0)).len()),
        remove: None,
    })
}

fn run_all(args: &BenchArgs, target: &mut Tested) -> Result<Report> {
    let work = Workload {
        kind: args.workload,
        pipeline: args.pipeline,
        accounts: Arc::new(Workload::accounts(args.accounts, target.placement.as_deref())),
        keyspace: args.keyspace,
        value: Arc::new(vec![b'x'; args.value_size]),
        acknowledged: (args.verify && args.workload == Kind::Set).then(Default::default),
        after_write: match &args.after_write {
            Some(text) => Some(Arc::new(after_write::AfterWrite::parse(text)?)),
            None => None,
        },
    };
    match args.workload {
        Kind::Bank if !target.etcd.is_empty() => {
            let names: Vec<String> = work.accounts.iter().map(|(a, _)| a.clone()).collect();
            etcd::open_accounts(&target.etcd[0], &names, workload::BALANCE).context("opening the accounts in etcd")?;
        }
        Kind::Bank => {
            let names: Vec<String> = work.accounts.iter().map(|(a, _)| a.clone()).collect();
            super::bank::open_accounts(target.redis[0], &names, workload::BALANCE)?;
        }
        Kind::Get => workload::preload(target.redis[0], &work).context("loading the keys to GET")?,
        Kind::Set => {}
    }
    let mut plan: Vec<Option<Duration>> = args.cut_every.iter().map(|d| Some(*d.as_ref())).collect();
    if args.compare_cuts || plan.is_empty() {
        plan.insert(0, None);
    }
    let mut runs = vec![];
    for round in 1..=args.rounds {
        // Every other round backwards, so that a cluster that speeds up or slows down as it runs
        // favours neither the runs with cuts nor the run without.
        let order: Vec<Option<Duration>> =
            if round % 2 == 0 { plan.iter().rev().copied().collect() } else { plan.clone() };
        for cut_every in order {
            runs.push(one_run(args, target, &work, cut_every, round)?);
        }
    }
    if work.acknowledged.is_some() {
        let read = workload::verify_acknowledged(target.redis[0], &work).context("verifying the acknowledged SETs")?;
        eprintln!("verified: every one of the {read} keys a SET was acknowledged for reads back its value");
    }
    let refused: u64 = runs.iter().map(|r| r.refused).sum();
    if refused > 0 {
        eprintln!("refused: {refused} writes answered -OOM (past limits.maxmemory_bytes)");
    }
    let setup = Setup {
        workload: args.workload,
        clients: args.clients,
        pipeline: args.pipeline,
        hosts: target.redis.len().max(target.etcd.len()),
        system: if target.etcd.is_empty() { "redis-protocol" } else { "etcd" },
        after_write: args.after_write.clone(),
        replicas: target.replicas,
        seconds: args.seconds,
        warmup_s: args.warmup.as_secs_f64(),
        machine_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    };
    Ok(Report::new(setup, runs))
}

fn one_run(
    args: &BenchArgs,
    target: &mut Tested,
    work: &Workload,
    cut_every: Option<Duration>,
    round: u32,
) -> Result<stats::RunStats> {
    let label = match cut_every {
        Some(d) => format!("cuts {}", every_text(d.as_secs_f64() * 1000.0)),
        None => "no cuts".into(),
    };
    let label = if args.rounds > 1 { format!("{label} #{round}") } else { label };
    let recorder = Arc::new(stats::Recorder::new(args.seconds));
    let admin_tls = target.admin.as_ref().and_then(|a| a.tls());
    let held_before = held::scrape(&target.metrics, admin_tls.clone());
    let start = Arc::new(workload::Start::new(args.clients));
    let clients = if target.etcd.is_empty() {
        workload::spawn(args.clients, &target.redis, work, &recorder, &start)
    } else {
        etcd::spawn(args.clients, &target.etcd, work, &recorder, &start)
    };
    // The run's clock starts once every client has connected (each within CLIENT_IO_TIMEOUT).
    start.connected.wait();
    let from = Instant::now() + *args.warmup.as_ref();
    let end = from + Duration::from_secs(args.seconds);
    recorder.start_at(from);
    let _ = start.end.set(end);
    start.go.wait();
    let cutter = match (cut_every, target.admin.take()) {
        (Some(every), Some(admin)) => Some(cuts::spawn(admin, every, from, end)),
        (Some(_), None) => bail!("cuts need the admin API: give --dir, or --admin and --token-file"),
        (None, admin) => {
            target.admin = admin;
            None
        }
    };
    progress(&label, &recorder, from, end);
    for c in clients {
        let _ = c.join();
    }
    let cuts = match cutter {
        Some(handle) => {
            let (admin, cuts) = handle.join().map_err(|_| anyhow::anyhow!("the cut thread panicked"))?;
            target.admin = Some(admin);
            cuts
        }
        None => vec![],
    };
    let mut run = recorder.summary(label, cut_every, cuts);
    run.round = round;
    if let (Some(before), Some(after)) = (held_before, held::scrape(&target.metrics, admin_tls)) {
        run.held = Some(held::HeldReplies::between(before, after));
    }
    Ok(run)
}

/// A progress bar on stderr until `end` (hidden when stderr is not a terminal).
fn progress(label: &str, recorder: &stats::Recorder, from: Instant, end: Instant) {
    let total = end.saturating_duration_since(Instant::now());
    let bar = ProgressBar::new(total.as_millis() as u64);
    if let Ok(style) = ProgressStyle::with_template("{prefix:>10} [{bar:40}] {elapsed_precise} {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    let begun = Instant::now();
    let mut last = (begun, recorder.committed_live.load(std::sync::atomic::Ordering::Relaxed));
    while Instant::now() < end {
        std::thread::sleep(PROGRESS_TICK.min(end.saturating_duration_since(Instant::now())));
        let now = Instant::now();
        let done = recorder.committed_live.load(std::sync::atomic::Ordering::Relaxed);
        let rate = (done - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-3);
        last = (now, done);
        let phase = if now < from { "warm-up" } else { "measuring" };
        bar.set_position(now.duration_since(begun).as_millis() as u64);
        bar.set_message(format!("{phase}: {rate:.0} ops/s"));
    }
    bar.finish_and_clear();
}
