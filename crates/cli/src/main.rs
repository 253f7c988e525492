//! The `waymark` command: run a host (`node`), a local cluster (`cluster init|start|stop`), its
//! snapshots (`snapshot list|check|restore|expire`), the demo, the benchmark (`bench`) and the
//! nemesis. Errors reach the user through
//! `anyhow`, with what was wrong and where.

mod cmd;

/// glibc's malloc was ~9% of a node's CPU under the bank workload (many small, short-lived
/// allocations moving between the vnode threads and the runtime's), and its arena growth and page
/// faults a third of a restore's replay (docs/BENCHMARKS.md); mimalloc is made for that pattern.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "waymark",
    version,
    about = "Waymark: a transactional key-value store with non-blocking consistent snapshots"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one host of a cluster: its vnodes, peer links, Redis port and admin API. Stops cleanly
    /// on SIGTERM or SIGINT.
    Node {
        /// The host's configuration file (TOML).
        #[arg(long)]
        config: PathBuf,
    },
    /// A local cluster on 127.0.0.1, run in the background (like `cockroach demo` or `tiup playground`).
    #[command(subcommand)]
    Cluster(cmd::cluster::ClusterCmd),
    /// Snapshots on disk: list, check, restore into a new cluster, expire.
    #[command(subcommand)]
    Snapshot(cmd::snapshot::SnapshotCmd),
    /// Throughput, commit latency and cut latency of a workload (bank transfers, SET, GET) on a
    /// running cluster or one it starts, with a cut of the whole cluster every --cut-every or none;
    /// --compare-cuts runs both and prints the ratios. A table, --json and a PNG --chart;
    /// `bench chart` draws the chart of bench/strategies.sh's JSON.
    #[command(args_conflicts_with_subcommands = true)]
    Bench(Box<cmd::bench::BenchArgs>),
    /// Real hosts under faults: each host in a network namespace of its own (needs root), killed
    /// and restarted, paused, cut off, on a schedule drawn from --seed, while bank clients run;
    /// the history is checked (every audit and the final state hold the bank's total).
    Nemesis(cmd::nemesis::NemesisArgs),
    /// Waymark's main job on real processes: a 3-host cluster on loopback runs bank transfers
    /// while a full snapshot and an increment every second are taken, a host is killed and
    /// restarted, then two snapshots are restored into fresh clusters and checked there.
    /// With --simulated: the same job on a simulated cluster, under injected faults, many seeds.
    Demo {
        /// Run the simulated demo instead (deterministic, many seeds, faults injected).
        #[arg(long)]
        simulated: bool,
        /// Where the demo's clusters go [default: a new temporary directory, removed on success].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Seconds of transfers and snapshots.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Bank clients (one connection each).
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Bank accounts.
        #[arg(long, default_value_t = 64)]
        accounts: usize,
        /// How the demo cluster's cuts snapshot it: `consistent`, `blocking` or `versions` (`cluster.strategy`).
        #[arg(long, default_value = "consistent")]
        strategy: waymark_core::CutStrategy,
        /// --simulated: how many simulated runs (seeds).
        #[arg(long, default_value_t = 50)]
        runs: u64,
        /// --simulated: first seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// --simulated: virtual milliseconds of workload per run.
        #[arg(long, default_value_t = 1000)]
        duration_ms: u64,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Node { config } => cmd::node::run(&config),
        Command::Cluster(c) => cmd::cluster::run(c),
        Command::Snapshot(c) => cmd::snapshot::run(c),
        Command::Bench(args) => cmd::bench::run(*args),
        Command::Nemesis(args) => cmd::nemesis::run(args),
        Command::Demo { simulated: true, runs, seed, duration_ms, .. } => cmd::demo::simulated(runs, seed, duration_ms),
        Command::Demo { dir, seconds, clients, accounts, strategy, .. } => {
            cmd::demo_live::run(cmd::demo_live::Options { dir, seconds, clients, accounts, strategy })
        }
    }
}
