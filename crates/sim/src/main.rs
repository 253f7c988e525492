//! `waymark-sim`: run seeds of the deterministic simulator and report what the checkers found.

use anyhow::{bail, Result};
use clap::{Parser, ValueEnum};
use std::time::Instant;
use waymark_core::{Breaks, CutStrategy};
use waymark_sim::matrix;
use waymark_sim::run::{percentile_us, reproduce, run_many_in, run_seed, Summary};
use waymark_sim::{SimConfig, WorkloadKind};

#[derive(Clone, Copy, ValueEnum)]
enum Workload {
    Bank,
    Append,
    /// Values set with and without deadlines, read, expired and persisted (issue 34).
    Expiry,
    /// Hashes: fields changed, read whole, hashes dropped, replaced, renamed, expired (issue 35).
    Hash,
    /// Sets: members added, removed, moved, popped, unions and intersections stored (issue 35).
    Sets,
    /// Lists: elements pushed, popped, moved, blocked on, trimmed, lists dropped (issue 35).
    Lists,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Strategy {
    Consistent,
    Blocking,
    Versions,
}

#[derive(Parser)]
#[command(name = "waymark-sim", about = "Deterministic simulation of a Waymark cluster, with faults and checkers")]
struct Args {
    /// Run this many seeds.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed of the range.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Run exactly this one seed (overrides --seeds/--start).
    #[arg(long)]
    seed: Option<u64>,
    /// Print every event of the run (with --seed; with --tree-only, to stderr).
    #[arg(long)]
    trace: bool,
    #[arg(long, value_enum, default_value_t = Workload::Bank)]
    workload: Workload,
    /// Store vnodes, one per simulated host.
    #[arg(long, default_value_t = 3)]
    vnodes: usize,
    /// Replicas per partition (primary + backups).
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// Virtual milliseconds of workload per seed.
    #[arg(long, default_value_t = 1000)]
    duration_ms: u64,
    /// Take consistent cuts at random times and restore every successful one.
    #[arg(long)]
    cuts: bool,
    /// How a cut snapshots the cluster; with --tree, run by the tree's cut process (consistent or
    /// blocking), else by the cut coordinator.
    #[arg(long, value_enum, default_value_t = Strategy::Consistent)]
    strategy: Strategy,
    /// Run every seed under all three strategies and compare them (implies --cuts).
    #[arg(long)]
    compare: bool,
    /// Inject no faults.
    #[arg(long)]
    no_faults: bool,
    /// Inject no duplicated or long-delayed messages (the regression seeds kept before them).
    #[arg(long)]
    no_net_faults: bool,
    /// With --failover: no host cut off while it runs, none killed right after a commit decision
    /// (the failover regression seeds kept before them).
    #[arg(long)]
    no_aimed_faults: bool,
    /// Deliberately break the protocol (comma-separated): see `Breaks::NAMES`.
    #[arg(long = "break")]
    breaks: Option<String>,
    /// Turn off real-time safety (replies revealing an after-transaction are not held).
    #[arg(long)]
    no_real_time: bool,
    /// `--tree`: the root promotes the replicas of a host recorded dead (the cluster setting
    /// `failover = on`; issue 30).
    #[arg(long)]
    failover: bool,
    /// With --failover: a host that comes back catches up on the partitions it lost, and every
    /// partition is brought back to --replicas members (the cluster setting `catch_up = on`;
    /// issue 33).
    #[arg(long)]
    catch_up: bool,
    /// Clients also scan the whole keyspace now and then (`SCAN`), checked by the `scans` checker.
    #[arg(long)]
    scans: bool,
    /// A cut's Start reaches each vnode up to this many ms late (the cut process's spread).
    #[arg(long, default_value_t = 20)]
    cut_spread_ms: u64,
    /// Run the cut process on the cluster tree (seed 004): alterations over manager vnodes, with
    /// manager crashes and md5 corruption among the faults (implies --cuts). With `--strategy
    /// versions` the tree runs as well but the cut coordinator runs the cuts, as on a node.
    #[arg(long)]
    tree: bool,
    /// Simulate the cluster tree alone: metadata alterations and cut processes, no transactions.
    #[arg(long)]
    tree_only: bool,
    /// Cut-process latency on the tree against a ring, at 1 000 and 10 000 vnodes.
    #[arg(long)]
    scale: bool,
    /// Fan-out of the tree (with --tree or --scale).
    #[arg(long, default_value_t = 16)]
    fanout: usize,
    /// Leaves (store vnodes) of the tree alone (with --tree-only).
    #[arg(long, default_value_t = 24)]
    leaves: usize,
    /// Spread the seeds over the topology matrix (`matrix.rs`): replicas 1-3 with 2-12 store
    /// vnodes; with --tree, fan-outs 2-5 over 3-12 store vnodes; with --tree-only, fan-outs 2-5
    /// over 6-25 leaves. Overrides --vnodes, --replicas, --fanout and --leaves.
    #[arg(long)]
    matrix: bool,
    /// Explore every delivery order of Ignite's small-case matrix instead of running seeds.
    #[arg(long)]
    explore: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let base = config(&args)?;
    if args.explore {
        return explore();
    }
    if args.scale {
        return scale(args.fanout);
    }
    if args.tree_only {
        return tree(&args);
    }
    if let Some(seed) = args.seed {
        return run_one(SimConfig { seed, trace: args.trace, ..base });
    }
    let t0 = Instant::now();
    let shapes = args.matrix.then(|| if base.tree { matrix::tree_shapes() } else { matrix::store_shapes() });
    let shapes = shapes.as_deref();
    if let Some(shapes) = shapes {
        println!("topology matrix: {} shapes, seed s in shape s mod {}", shapes.len(), shapes.len());
    }
    let summary = run_many_in(&base, args.start, args.seeds, shapes, |r, cfg| {
        for v in &r.violations {
            println!("seed {} VIOLATION {v:#}\n  reproduce: {}", r.seed, reproduce(cfg));
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut others = vec![];
    if args.compare {
        for strategy in [CutStrategy::Consistent, CutStrategy::Blocking, CutStrategy::Versions] {
            if strategy != base.strategy {
                let cfg = SimConfig { strategy, ..base.clone() };
                let s = run_many_in(&cfg, args.start, args.seeds, shapes, |r, cfg| {
                    for v in &r.violations {
                        println!("seed {} VIOLATION {v:#}\n  reproduce: {}", r.seed, reproduce(cfg));
                    }
                });
                others.push((strategy, s));
            }
        }
    }
    print_summary(&summary, &base, secs, &others);
    if summary.failed > 0 || others.iter().any(|(_, s)| s.failed > 0) {
        std::process::exit(1);
    }
    Ok(())
}

fn explore() -> Result<()> {
    let reports = waymark_sim::explore::run_matrix(true);
    let failed = reports.iter().filter(|r| !r.violations.is_empty() || r.truncated).count();
    println!("{} passed, {failed} failed", reports.len() - failed);
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn tree(args: &Args) -> Result<()> {
    use waymark_sim::tree::{TreeConfig, TreeWorld};
    let t0 = Instant::now();
    let (mut failed, mut total) = (0u64, waymark_sim::tree::TreeReport::default());
    let mut latencies = vec![];
    let seeds = match args.seed {
        Some(seed) => seed..seed + 1,
        None => args.start..args.start + args.seeds,
    };
    let count = seeds.end - seeds.start;
    let shapes = matrix::tree_only_shapes();
    if args.matrix {
        println!("topology matrix: {} shapes, seed s in shape s mod {}", shapes.len(), shapes.len());
    }
    for seed in seeds {
        let mut cfg = TreeConfig::new(seed);
        cfg.fanout = if args.fanout == 16 { 4 } else { args.fanout.clamp(2, 64) };
        cfg.leaves = args.leaves.clamp(1, 10_000);
        if args.matrix {
            matrix::of_seed(&shapes, seed).apply_to_tree(&mut cfg);
        }
        cfg.faults = !args.no_faults;
        cfg.breaks = config(args)?.breaks;
        cfg.trace = args.trace;
        let mut flags = args.breaks.as_ref().map(|b| format!(" --break {b}")).unwrap_or_default();
        flags.push_str(&format!(" --fanout {} --leaves {}", cfg.fanout, cfg.leaves));
        let r = TreeWorld::new(cfg).run();
        for v in &r.violations {
            println!("seed {seed} VIOLATION {v:#}\n  reproduce: cargo run --profile sim -p waymark-sim -- --tree-only{flags} --seeds 1 --start {seed}");
        }
        failed += !r.violations.is_empty() as u64;
        latencies.extend(&r.cut_latencies_us);
        add(&mut total, &r);
    }
    let t = &total;
    println!(
        "tree seeds {} ({:.1}/s) | alterations ok {} failed {} retried {} | failovers {} switch-backs {} | secondary parents started {} stopped {} | root terms {} (by a secondary {}) | relayed {} | boots by parent {} | manager crashes {} (whole hosts {}) splits {} (one-way {}) duplicates {} long delays {} md5 corruptions {} | cuts ok {} failed {} latency p50 {:.1} ms p99 {:.1} ms",
        count,
        count as f64 / t0.elapsed().as_secs_f64().max(1e-9),
        t.tree.alterations_ok, t.tree.alterations_failed, t.tree.retried, t.tree.failovers, t.tree.switch_backs,
        t.tree.secondaries_started, t.tree.secondaries_stopped, t.tree.root_terms, t.tree.secondary_root_terms, t.tree.relayed, t.tree.boots_by_parent, t.tree.manager_crashes, t.host_crashes, t.splits, t.one_way_splits, t.duplicates, t.long_delays,
        t.tree.md5_corruptions,
        t.cuts_ok, t.cuts_failed,
        percentile_us(&latencies, 0.5) as f64 / 1e3,
        percentile_us(&latencies, 0.99) as f64 / 1e3,
    );
    println!("{} passed, {failed} failed", count - failed);
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn add(total: &mut waymark_sim::tree::TreeReport, r: &waymark_sim::tree::TreeReport) {
    total.tree.add(&r.tree);
    total.splits += r.splits;
    total.one_way_splits += r.one_way_splits;
    total.host_crashes += r.host_crashes;
    total.duplicates += r.duplicates;
    total.long_delays += r.long_delays;
    total.cuts_ok += r.cuts_ok;
    total.cuts_failed += r.cuts_failed;
}

fn scale(fanout: usize) -> Result<()> {
    println!("cut process (START, STARTED, FINISH, END), no transactions, fan-out {fanout}:");
    for row in waymark_sim::tree::scale::run(&[1_000, 10_000], fanout, 1) {
        println!(
            "{:>6} vnodes: tree {:>8.1} ms {:>7} messages | ring {:>9.1} ms {:>7} messages | ring/tree latency {:.0}x",
            row.vnodes,
            row.tree_latency_us as f64 / 1e3,
            row.tree_messages,
            row.ring_latency_us as f64 / 1e3,
            row.ring_messages,
            row.ring_latency_us as f64 / row.tree_latency_us.max(1) as f64
        );
    }
    Ok(())
}

fn config(args: &Args) -> Result<SimConfig> {
    let workload = match args.workload {
        Workload::Bank => WorkloadKind::Bank,
        Workload::Append => WorkloadKind::Append,
        Workload::Expiry => WorkloadKind::Expiry,
        Workload::Hash => WorkloadKind::Hash,
        Workload::Sets => WorkloadKind::Sets,
        Workload::Lists => WorkloadKind::Lists,
    };
    if args.vnodes == 0 || args.replicas == 0 || args.replicas > args.vnodes {
        bail!("--replicas must be between 1 and --vnodes ({}), got {}", args.vnodes, args.replicas);
    }
    let mut breaks = Breaks::default();
    for name in args.breaks.iter().flat_map(|b| b.split(',')) {
        if !breaks.enable(name) {
            bail!("unknown --break {name:?}; known: {}", Breaks::NAMES.join(", "));
        }
    }
    let mut cfg = SimConfig::new(args.start, workload);
    cfg.vnodes = args.vnodes;
    cfg.replicas = args.replicas;
    cfg.clients = args.clients;
    cfg.duration_us = args.duration_ms * 1000;
    cfg.cuts = args.cuts || args.compare;
    cfg.strategy = match args.strategy {
        Strategy::Consistent => CutStrategy::Consistent,
        Strategy::Blocking => CutStrategy::Blocking,
        Strategy::Versions => CutStrategy::Versions,
    };
    cfg.faults = !args.no_faults;
    cfg.net_faults = !args.no_net_faults;
    cfg.aimed_faults = !args.no_aimed_faults;
    cfg.breaks = breaks;
    cfg.real_time_safety = !args.no_real_time;
    cfg.failover = args.failover;
    cfg.catch_up = args.catch_up && args.failover;
    cfg.scans = args.scans;
    cfg.cut_start_spread_us = args.cut_spread_ms * 1000;
    cfg.tree = args.tree;
    cfg.cuts |= args.tree;
    cfg.fanout = if args.fanout == 16 { 2 } else { args.fanout.max(2) };
    Ok(cfg)
}

fn run_one(cfg: SimConfig) -> Result<()> {
    let r = run_seed(&cfg);
    println!(
        "seed {} trace {:016x} events {} committed {} aborted {} unknown {} cuts ok {} failed {} verified {}",
        r.seed, r.trace_hash, r.events, r.committed, r.aborted, r.unknown, r.cuts_ok, r.cuts_failed, r.cuts_verified
    );
    println!("faults {:?}", r.faults);
    for v in &r.violations {
        println!("VIOLATION {v:#}");
    }
    let (passed, failed) = if r.violations.is_empty() { (1, 0) } else { (0, 1) };
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn print_summary(s: &Summary, cfg: &SimConfig, secs: f64, others: &[(CutStrategy, Summary)]) {
    let f = &s.faults;
    println!(
        "seeds {} ({:.1} seeds/s) | txns committed {} aborted {} unknown {} | faults: crashes {} (whole hosts {}) torn {} partitions {} (one-way {}) breaks {} clogs {} duplicates {} long delays {}",
        s.seeds,
        s.seeds as f64 / secs.max(1e-9),
        s.committed,
        s.aborted,
        s.unknown,
        f.crashes,
        f.host_crashes,
        f.torn,
        f.partitions,
        f.one_way,
        f.breaks,
        f.clogs,
        f.duplicates,
        f.long_delays
    );
    if cfg.failover {
        println!(
            "failover faults: hosts cut off while running {} | hosts killed or cut off right after a commit decision {}",
            f.isolated_hosts, f.nears_struck
        );
    }
    if cfg.cuts {
        print_cuts(cfg.strategy.name(), s);
        for (strategy, o) in others {
            print_cuts(strategy.name(), o);
        }
    }
    if !others.is_empty() {
        let mut all = vec![(cfg.strategy, s)];
        all.extend(others.iter().map(|(st, o)| (*st, o)));
        all.sort_by_key(|(st, _)| *st as u8);
        print_comparison(&all);
    }
    println!("violations {}", s.violations);
    if cfg.tree {
        let t = &s.tree;
        println!(
            "tree: alterations ok {} failed {} retried {} | failovers {} switch-backs {} | secondary parents started {} stopped {} | root terms {} (by a secondary {}) | boots by parent {} | manager crashes {} md5 corruptions {}",
            t.alterations_ok, t.alterations_failed, t.retried, t.failovers, t.switch_backs, t.secondaries_started, t.secondaries_stopped, t.root_terms, t.secondary_root_terms, t.boots_by_parent, t.manager_crashes, t.md5_corruptions
        );
        if cfg.failover {
            let mut w = t.failover_windows_us.clone();
            w.sort_unstable();
            let ms = |q: f64| w.get(((w.len() as f64 - 1.0) * q) as usize).map_or(0.0, |us| *us as f64 / 1000.0);
            println!(
                "failover: partitions promoted {} | availability {:.1}% (partition-time with a serving primary) | windows {} (host down → a chain without it in use) p50 {:.1} ms p99 {:.1} ms max {:.1} ms | cuts verified without a dead host {}",
                t.promoted_partitions,
                100.0 * t.availability.share(),
                w.len(),
                ms(0.5),
                ms(0.99),
                ms(1.0),
                s.cuts_verified_without_a_host
            );
        }
        if cfg.catch_up {
            println!(
                "catch-up: partitions rejoined by a learner {} | of those, copies at the end {} | learners still catching up at the end {}",
                t.rejoined, t.rejoined_copies, t.learners_at_end
            );
        }
    }
    if let Some(f) = &s.first_failure {
        println!("first failing seed {}: {}", f.seed, f.reproduce);
    }
    let passed = s.passed + others.iter().map(|(_, o)| o.passed).sum::<u64>();
    let failed = s.failed + others.iter().map(|(_, o)| o.failed).sum::<u64>();
    println!("{passed} passed, {failed} failed");
}

/// The strategies side by side on the same seeds (the table of `docs/ARCHITECTURE.md`).
fn print_comparison(all: &[(CutStrategy, &Summary)]) {
    let ms = |us: u64| us as f64 / 1e3;
    println!("| strategy | cuts ok / failed / verified | cut latency p50 / p99 | longest commit stall during cuts (outside) | transactions held back (longest) | replies held | messages per cut | committed / aborted (by the versions guard) | violations |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (strategy, s) in all {
        let m = &s.metrics;
        println!(
            "| {strategy} | {} / {} / {} | {:.1} / {:.1} ms | {:.1} ms ({:.1} ms) | {} ({:.1} ms) | {} | {:.1} | {} / {} ({}) | {} |",
            s.cuts_ok,
            s.cuts_failed,
            s.cuts_verified,
            ms(s.latency_percentile_us(0.5)),
            ms(s.latency_percentile_us(0.99)),
            ms(m.stall_during_cuts_us),
            ms(m.stall_outside_cuts_us),
            m.commit_stalls_us.len(),
            ms(percentile_us(&m.commit_stalls_us, 1.0)),
            m.held_replies_us.len(),
            s.messages_per_cut(),
            s.committed,
            s.aborted,
            s.snapshot_order_aborts,
            s.violations,
        );
    }
}

fn print_cuts(name: &str, s: &Summary) {
    println!(
        "cuts[{name}]: started {} succeeded {} failed {} restored+verified {} | cut latency p50 {:.1} ms p99 {:.1} ms | longest commit stall during cuts {:.1} ms (outside cuts {:.1} ms)",
        s.cuts_ok + s.cuts_failed,
        s.cuts_ok,
        s.cuts_failed,
        s.cuts_verified,
        s.latency_percentile_us(0.5) as f64 / 1e3,
        s.latency_percentile_us(0.99) as f64 / 1e3,
        s.metrics.stall_during_cuts_us as f64 / 1e3,
        s.metrics.stall_outside_cuts_us as f64 / 1e3,
    );
    let ms = |v: &[u64], p: f64| percentile_us(v, p) as f64 / 1e3;
    let (during, outside) = (&s.metrics.latencies_during_cuts_us, &s.metrics.latencies_outside_cuts_us);
    println!(
        "cuts[{name}]: commit latency of transactions overlapping a cut p50 {:.1} p99 {:.1} max {:.1} ms; overlapping none p50 {:.1} p99 {:.1} max {:.1} ms",
        ms(during, 0.5), ms(during, 0.99), ms(during, 1.0), ms(outside, 0.5), ms(outside, 0.99), ms(outside, 1.0)
    );
    let stalls = &s.metrics.commit_stalls_us;
    println!(
        "cuts[{name}]: transactions held back by a cut {} | longest {:.1} ms, p99 {:.1} ms",
        stalls.len(),
        ms(stalls, 1.0),
        ms(stalls, 0.99)
    );
    let held = &s.metrics.held_replies_us;
    println!(
        "cuts[{name}]: replies held for real-time safety {} | held p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        held.len(),
        ms(held, 0.5),
        ms(held, 0.99),
        ms(held, 1.0)
    );
    if s.metrics.buckets_cuts > 0 {
        let per: Vec<String> = s
            .metrics
            .throughput_buckets
            .iter()
            .map(|b| format!("{:.1}", *b as f64 / s.metrics.buckets_cuts as f64))
            .collect();
        println!("cuts[{name}]: commits per 10 ms from -50 ms to +150 ms around cut start: {}", per.join(" "));
    }
}
