//! `waymark snapshot list|check|restore|expire`: the snapshot files of DESIGN §5, offline — no
//! running cluster is needed. The library (`waymark_server::snapshot`) does the work; this module
//! finds the root, prints tables and verdicts, and drives the progress bar.
//!
//! `create` asks a running cluster (its admin API) for a cut and the files of it; no transaction
//! is paused.

use super::admin_client::{self, Admin};
use super::cluster::{self, Spec};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use waymark_server::snapshot::catalog::{self, format_unix_ms, ChainListing, Listed, State};
use waymark_server::snapshot::chain::{load_chain, Chain};
use waymark_server::snapshot::create::{CreateRequest, Created};
use waymark_server::snapshot::expire::{self, Decision, Rule};
use waymark_server::snapshot::manifest::{bytes_of, increment_dir_name, Kind};
use waymark_server::snapshot::{check, restore};
use waymark_server::topology::Topology;

/// Where the snapshots are: `--path ROOT`, or `--dir D` (a `cluster init` directory: `D/snapshots`).
#[derive(Args, Clone, Debug)]
pub struct Root {
    /// The snapshot root directory (wins over --dir).
    #[arg(long)]
    path: Option<PathBuf>,
    /// A cluster directory (`waymark cluster init --dir`): its snapshots are in DIR/snapshots.
    #[arg(long)]
    dir: Option<PathBuf>,
}

impl Root {
    fn resolve(&self) -> Result<PathBuf> {
        match (&self.path, &self.dir) {
            (Some(path), _) => Ok(path.clone()),
            (None, Some(dir)) => Ok(dir.join("snapshots")),
            (None, None) => {
                bail!("where are the snapshots? give --path ROOT, or --dir DIR of a cluster (DIR/snapshots)")
            }
        }
    }
}

#[derive(Subcommand)]
pub enum SnapshotCmd {
    /// Take a snapshot of the running cluster: a consistent cut (no transaction is paused), then
    /// every host's files and the manifest. With --incremental, the next increment of NAME.
    Create {
        name: String,
        #[arg(long)]
        incremental: bool,
        #[command(flatten)]
        root: Root,
        #[command(flatten)]
        target: admin_client::Target,
    },
    /// The snapshots under the root: each chain's full snapshot and increments.
    List {
        #[command(flatten)]
        root: Root,
    },
    /// Verify a snapshot: every file's size and checksum, no log gap, every vnode's CutFinish,
    /// cut closure across replicas, equal replica data. Exits non-zero on any problem.
    Check {
        name: String,
        /// Check up to this increment (0 = the full snapshot) [default: the newest].
        #[arg(long)]
        increment: Option<u32>,
        #[command(flatten)]
        root: Root,
    },
    /// Rebuild the data at the snapshot's cut as a new local cluster in --to (then `cluster start`).
    Restore {
        name: String,
        /// Restore to this increment's cut (0 = the full snapshot) [default: the newest].
        #[arg(long)]
        increment: Option<u32>,
        /// The new cluster's directory (absent or empty).
        #[arg(long)]
        to: PathBuf,
        /// Hosts of the new cluster [default: the snapshot's].
        #[arg(long)]
        hosts: Option<u32>,
        /// Write the new cluster as `cluster init --insecure` does (plaintext, no password);
        /// by default it is secure, with a CA, certificates and a password of its own.
        #[arg(long)]
        insecure: bool,
        #[command(flatten)]
        root: Root,
    },
    /// Remove whole chains (a full snapshot with its increments); never a base a kept one needs.
    Expire {
        /// Keep the N chains whose newest member is newest; remove the others.
        #[arg(long, conflicts_with_all = ["older_than", "name"])]
        keep_last: Option<usize>,
        /// Remove chains whose newest member is older than this, e.g. "7d" or "12h".
        #[arg(long, conflicts_with = "name")]
        older_than: Option<String>,
        /// Remove this chain (with --increment: only that member, if nothing depends on it).
        #[arg(long)]
        name: Option<String>,
        #[arg(long, requires = "name")]
        increment: Option<u32>,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        root: Root,
    },
}

pub fn run(cmd: SnapshotCmd) -> Result<()> {
    match cmd {
        SnapshotCmd::Create { name, incremental, root, target } => {
            create(&target.resolve(root.dir.as_ref())?, name, incremental)
        }
        SnapshotCmd::List { root } => list(&root.resolve()?),
        SnapshotCmd::Check { name, increment, root } => check(&root.resolve()?, &name, increment),
        SnapshotCmd::Restore { name, increment, to, hosts, insecure, root } => {
            restore(&root.resolve()?, &name, increment, &to, hosts, !insecure).map(drop)
        }
        SnapshotCmd::Expire { keep_last, older_than, name, increment, dry_run, root } => {
            let root = root.resolve()?;
            let catalog = catalog::list(&root)?;
            let decisions = match (keep_last, older_than, name) {
                (Some(n), _, _) => expire::plan(&catalog, Rule::KeepLast(n)),
                (_, Some(age), _) => expire::plan(&catalog, Rule::OlderThan { cutoff_unix_ms: cutoff(&age)? }),
                (_, _, Some(name)) => vec![expire::plan_one(&catalog, &name, increment)?],
                _ => bail!("say what to remove: --keep-last N, --older-than AGE or --name NAME"),
            };
            carry_out(&catalog, &decisions, dry_run)
        }
    }
}

fn create(admin: &Admin, name: String, incremental: bool) -> Result<()> {
    let begun = Instant::now();
    let created: Created =
        admin.post("/snapshots", &CreateRequest { name, incremental }, std::time::Duration::from_secs(180))?;
    let what = match created.increment {
        0 => "full snapshot".to_string(),
        k => format!("increment {k}"),
    };
    println!("created {} {what}: cut {}", created.name, created.cut);
    let phases: &[&str] = match created.strategy {
        waymark_core::CutStrategy::Versions => &["snp_version", "map", "late", "skip"],
        _ => &["START", "STARTED", "FINISH", "END"],
    };
    let timings: Vec<String> = phases.iter().zip(&created.phases_ms).map(|(p, ms)| format!("{p} {ms:.1} ms")).collect();
    let paused = match created.strategy {
        waymark_core::CutStrategy::Blocking => "transactions held while it ran",
        _ => "no transaction paused",
    };
    println!("  {} cut: {:.1} ms, phases {} ({paused})", created.strategy, created.cut_ms, timings.join(", "));
    println!("  files: {} ({}), exported in {:.1} ms", created.files, human_bytes(created.bytes), created.export_ms);
    println!("  took {:.2} s in all", begun.elapsed().as_secs_f64());
    Ok(())
}

fn now_unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn cutoff(age: &str) -> Result<u64> {
    let age = humantime::parse_duration(age).with_context(|| format!("--older-than {age:?}: not a duration"))?;
    Ok(now_unix_ms().saturating_sub(age.as_millis() as u64))
}

fn list(root: &Path) -> Result<()> {
    let catalog = catalog::list(root)?;
    if catalog.chains.is_empty() {
        println!("no snapshots under {}", root.display());
    } else {
        println!("{:<20} {:>4} {:>6} {:<21} {:<12} {:>10}  BASE", "NAME", "INC", "CUT", "TIME (UTC)", "KIND", "SIZE");
    }
    for chain in &catalog.chains {
        for member in &chain.members {
            println!("{}", row(chain, member));
        }
    }
    for path in &catalog.ignored {
        println!("(ignored, not a snapshot: {})", path.display());
    }
    Ok(())
}

fn row(chain: &ChainListing, m: &Listed) -> String {
    let base = match m.increment {
        0 => "-".to_string(),
        1 => chain.name.clone(),
        k => format!("{}/{}", chain.name, increment_dir_name(k - 1)),
    };
    let (cut, time, kind, size) = match &m.state {
        State::Complete(manifest) => {
            let kind = match manifest.kind {
                Kind::Full => "full",
                Kind::Increment { .. } => "increment",
            };
            let time = format_unix_ms(manifest.created_unix_ms);
            (manifest.cut.to_string(), time, kind.to_string(), human_bytes(manifest.size_bytes()))
        }
        State::Incomplete => ("-".into(), format_unix_ms(m.modified_unix_ms), "INCOMPLETE".into(), "-".into()),
        State::Unreadable(e) => ("-".into(), format!("({e})"), "UNREADABLE".into(), "-".into()),
    };
    format!("{:<20} {:>4} {:>6} {:<21} {:<12} {:>10}  {base}", chain.name, m.increment, cut, time, kind, size)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn check(root: &Path, name: &str, increment: Option<u32>) -> Result<()> {
    let report = check::check(root, name, increment);
    for p in &report.problems {
        println!("{p}");
    }
    let upto = match report.target {
        Some((0, cut)) => format!("full snapshot, cut {cut}"),
        Some((k, cut)) => format!("{}, cut {cut}", increment_dir_name(k)),
        None => "unread".into(),
    };
    let checked = format!("{} files ({}), {} vnodes", report.files, human_bytes(report.bytes), report.vnodes);
    if report.ok() {
        println!("OK: {name} ({upto}): {checked} checked, no problem");
        fewer_copies(&report);
        return Ok(());
    }
    fewer_copies(&report);
    println!("FAILED: {name} ({upto}): {} problems in {checked}", report.problems.len());
    std::process::exit(1);
}

/// Says which partitions the snapshot holds in fewer copies than the cluster's replicas, and why.
fn fewer_copies(report: &check::Report) {
    if report.fewer_copies.is_empty() {
        return;
    }
    let least = report.fewer_copies.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let why = match report.hosts_down.is_empty() {
        true => "no host was down at the cut: one back after a failover holds no copy until it catches up".to_string(),
        false => format!("hosts down at the cut: {}", report.hosts_down.join(", ")),
    };
    println!(
        "fewer copies: {} partitions held by as few as {least} of {} replicas ({why})",
        report.fewer_copies.len(),
        report.replicas
    );
}

/// What a restore did: the cut it restored to and how fast the log replayed.
pub struct Restored {
    pub keys: usize,
    pub log_mb: f64,
    pub mb_per_s: f64,
}

/// Replays the snapshot into a new cluster in `to`: a secure one (TLS, a password) if `secure`.
pub fn restore(
    root: &Path,
    name: &str,
    increment: Option<u32>,
    to: &Path,
    hosts: Option<u32>,
    secure: bool,
) -> Result<Restored> {
    if to.exists() && std::fs::read_dir(to).with_context(|| format!("reading {}", to.display()))?.next().is_some() {
        bail!("{} is not empty: restore writes a new cluster into an empty directory", to.display());
    }
    let chain = load_chain(root, name, increment)?;
    let target = &chain.target().manifest;
    let shape = target.cluster.clone();
    let hosts = hosts.unwrap_or(shape.hosts.len() as u32);
    let begun = Instant::now();
    let rebuilt = replay_with_progress(&chain)?;
    let took = begun.elapsed().as_secs_f64().max(1e-6);
    let local = Spec::local(hosts, shape.replicas.min(hosts as usize), shape.partitions);
    cluster::init(to, &Spec { tls: secure, password: secure, ..local })?;
    let mut copies = 0;
    for (_, cfg) in cluster::hosts_of(to)? {
        let topology = Topology::new(&cfg.cluster)?;
        for (vnode, n) in restore::write_host(&rebuilt.partitions, &topology, &cfg.host, &cfg.data_dir)? {
            say!("  {vnode:<16} {n} keys");
            copies += n;
        }
    }
    let keys: usize = rebuilt.partitions.values().map(|s| s.len()).sum();
    let mb = rebuilt.log_bytes as f64 / 1e6;
    say!(
        "restored {name} to cut {} ({}): {} partitions, {keys} keys ({copies} with replicas) on {hosts} hosts; replayed {:.1} MB of log, {} records in {took:.2} s ({:.1} MB/s, {:.0} records/s)",
        target.cut,
        if target.kind == Kind::Full { "full snapshot".into() } else { increment_dir_name(target.kind.number()) },
        rebuilt.partitions.len(),
        mb,
        rebuilt.records,
        mb / took,
        rebuilt.records as f64 / took
    );
    say!("start it with: waymark cluster start --dir {}", to.display());
    Ok(Restored { keys, log_mb: mb, mb_per_s: mb / took })
}

/// Replays every vnode in parallel, one thread per core, with a progress bar in log bytes.
fn replay_with_progress(chain: &Chain) -> Result<restore::Rebuilt> {
    let total = bytes_of(chain.members.iter().flat_map(|m| &m.manifest.vnodes).flat_map(|v| &v.segments));
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{spinner} replaying [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
    )
    .context("progress bar template")?;
    bar.set_style(style.progress_chars("=> "));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let progress = |vnode: &str, bytes: u64, _records: u64| {
        bar.inc(bytes);
        bar.set_message(vnode.to_string());
    };
    let rebuilt = restore::rebuild(chain, threads, &progress);
    bar.finish_and_clear();
    Ok(rebuilt?)
}

fn carry_out(catalog: &catalog::Catalog, decisions: &[Decision], dry_run: bool) -> Result<()> {
    for d in decisions {
        let what = match d.increment {
            None => d.name.clone(),
            Some(k) => format!("{}/{}", d.name, increment_dir_name(k)),
        };
        if !d.remove {
            println!("kept     {what:<28} {}", d.reason);
            continue;
        }
        if !dry_run {
            expire::remove(catalog, d)?;
        }
        let verb = if dry_run { "would remove" } else { "removed" };
        println!("{verb:<8} {what:<28} {}", d.reason);
    }
    if decisions.is_empty() {
        println!("no snapshots under {}", catalog.root.display());
    }
    Ok(())
}
