//! Running seeds: one seed gives a `SeedReport`; many give a `Summary`.

use crate::checkers::{self, Violation};
use crate::config::{SimConfig, WorkloadKind};
use crate::faults::FaultCounts;
use crate::history::{History, Outcome};
use crate::matrix::{self, Shape};
use crate::world::World;
use waymark_core::CutStrategy;

#[derive(Clone, Debug, Default)]
pub struct CutMetrics {
    /// Longest time without any commit acknowledgement, in an interval overlapping a cut.
    pub stall_during_cuts_us: u64,
    /// The same, away from cuts (the baseline).
    pub stall_outside_cuts_us: u64,
    /// Invoke-to-commit latencies of transactions whose life overlapped a cut.
    pub latencies_during_cuts_us: Vec<u64>,
    /// The same for transactions that overlapped no cut.
    pub latencies_outside_cuts_us: Vec<u64>,
    pub cut_latencies_us: Vec<u64>,
    /// Commits per 10 ms bucket from 50 ms before to 150 ms after each cut began, summed over cuts.
    pub throughput_buckets: [u64; 20],
    pub buckets_cuts: u64,
    /// How long replies were held for real-time safety.
    pub held_replies_us: Vec<u64>,
    /// How long transactions were held back by a cut before they could start.
    pub commit_stalls_us: Vec<u64>,
}

impl CutMetrics {
    /// Merges another seed's metrics: longest stalls, all samples, bucket sums.
    pub fn add(&mut self, o: &CutMetrics) {
        self.stall_during_cuts_us = self.stall_during_cuts_us.max(o.stall_during_cuts_us);
        self.stall_outside_cuts_us = self.stall_outside_cuts_us.max(o.stall_outside_cuts_us);
        self.latencies_during_cuts_us.extend(&o.latencies_during_cuts_us);
        self.latencies_outside_cuts_us.extend(&o.latencies_outside_cuts_us);
        self.cut_latencies_us.extend(&o.cut_latencies_us);
        for (a, b) in self.throughput_buckets.iter_mut().zip(o.throughput_buckets) {
            *a += b;
        }
        self.buckets_cuts += o.buckets_cuts;
        self.held_replies_us.extend(&o.held_replies_us);
        self.commit_stalls_us.extend(&o.commit_stalls_us);
    }
}

#[derive(Clone, Debug)]
pub struct SeedReport {
    pub seed: u64,
    pub trace_hash: u64,
    pub events: u64,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub faults: FaultCounts,
    pub cuts_ok: u64,
    pub cuts_failed: u64,
    pub cuts_verified: u64,
    /// Verified cuts a dead host's vnodes had no part in.
    pub cuts_verified_without_a_host: u64,
    /// Messages of the cut process sent in the run.
    pub cut_messages: u64,
    /// Transactions refused by the `versions` guard (`AbortReason::SnapshotOrder`).
    pub snapshot_order_aborts: u64,
    pub metrics: CutMetrics,
    pub tree: crate::tree::stats::TreeStats,
    pub violations: Vec<Violation>,
    /// Keys the primaries expired (`waymark_core::expiry`), counted by the vnodes running at the end.
    pub keys_expired: u64,
}

pub fn run_seed(cfg: &SimConfig) -> SeedReport {
    let mut world = World::new(cfg.clone());
    world.run();
    report(&world)
}

/// Checks a world that has run and sums up what happened in it.
pub fn report(world: &World) -> SeedReport {
    let cfg = &world.cfg;
    let checked = checkers::check_all(world);
    let count = |o: Outcome| world.history.txns.iter().filter(|t| t.outcome == o && t.kind != "setup").count() as u64;
    let declared = world.declared_cuts();
    SeedReport {
        seed: cfg.seed,
        trace_hash: world.trace.hash(),
        events: world.trace.events,
        committed: count(Outcome::Committed),
        aborted: count(Outcome::Aborted),
        unknown: count(Outcome::Unknown),
        faults: world.faults.counts.clone(),
        cuts_ok: declared.iter().filter(|d| d.ok).count() as u64,
        cuts_failed: declared.iter().filter(|d| !d.ok).count() as u64,
        cuts_verified: checked.cuts_verified as u64,
        cuts_verified_without_a_host: checked.cuts_verified_without_a_host as u64,
        cut_messages: world.cut_messages,
        snapshot_order_aborts: world.snapshot_order_aborts,
        keys_expired: world.nodes.iter().filter_map(|n| n.vnode.as_ref()).map(|v| v.keys_expired()).sum(),
        tree: world.tree_stats.clone(),
        metrics: CutMetrics {
            held_replies_us: world.held_replies_us.clone(),
            commit_stalls_us: world.commit_stalls_us.clone(),
            ..cut_metrics(&world.history, cfg.duration_us)
        },
        violations: checked.violations,
    }
}

fn cut_metrics(h: &History, duration_us: u64) -> CutMetrics {
    let mut commits: Vec<u64> =
        h.committed().filter(|t| t.kind != "setup" && t.completed_us <= duration_us).map(|t| t.completed_us).collect();
    commits.sort_unstable();
    let mut m = CutMetrics::default();
    for pair in commits.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let overlaps = h.cuts.iter().any(|c| a < c.ended_us && b > c.begun_us);
        let slot = if overlaps { &mut m.stall_during_cuts_us } else { &mut m.stall_outside_cuts_us };
        *slot = (*slot).max(b - a);
    }
    for t in h.committed().filter(|t| t.kind != "setup" && t.completed_us <= duration_us) {
        let overlaps = h.cuts.iter().any(|c| t.invoked_us < c.ended_us && t.completed_us > c.begun_us);
        let slot = if overlaps { &mut m.latencies_during_cuts_us } else { &mut m.latencies_outside_cuts_us };
        slot.push(t.completed_us - t.invoked_us);
    }
    for c in h.cuts.iter().filter(|c| c.ok) {
        m.cut_latencies_us.push(c.ended_us - c.begun_us);
        if c.begun_us < 50_000 || c.begun_us + 150_000 > duration_us {
            continue;
        }
        m.buckets_cuts += 1;
        for t in &commits {
            let rel = *t as i64 - c.begun_us as i64 + 50_000;
            if (0..200_000).contains(&rel) {
                m.throughput_buckets[(rel / 10_000) as usize] += 1;
            }
        }
    }
    m
}

/// The command that reproduces one seed.
pub fn reproduce(cfg: &SimConfig) -> String {
    let workload = match cfg.workload {
        WorkloadKind::Bank => "bank",
        WorkloadKind::Append => "append",
        WorkloadKind::Expiry => "expiry",
        WorkloadKind::Hash => "hash",
        WorkloadKind::Sets => "sets",
        WorkloadKind::Lists => "lists",
    };
    let mut cmd = format!(
        "cargo run --profile sim -p waymark-sim -- --seed {} --workload {workload} --vnodes {} --replicas {}",
        cfg.seed, cfg.vnodes, cfg.replicas
    );
    if cfg.cuts {
        cmd.push_str(" --cuts");
    }
    if cfg.tree {
        cmd.push_str(&format!(" --tree --fanout {}", cfg.fanout));
    }
    if cfg.failover {
        cmd.push_str(" --failover");
        if !cfg.aimed_faults {
            cmd.push_str(" --no-aimed-faults");
        }
        if cfg.catch_up {
            cmd.push_str(" --catch-up");
        }
    }
    if cfg.strategy != CutStrategy::Consistent {
        cmd.push_str(&format!(" --strategy {}", cfg.strategy));
    }
    if !cfg.faults {
        cmd.push_str(" --no-faults");
    } else if !cfg.net_faults {
        cmd.push_str(" --no-net-faults");
    }
    if cfg.cut_start_spread_us != 20_000 {
        cmd.push_str(&format!(" --cut-spread-ms {}", cfg.cut_start_spread_us / 1000));
    }
    if !cfg.real_time_safety {
        cmd.push_str(" --no-real-time");
    }
    if cfg.breaks != Default::default() {
        cmd.push_str(&format!(" --break {}", cfg.breaks));
    }
    let default = SimConfig::new(cfg.seed, cfg.workload);
    if cfg.clients != default.clients {
        cmd.push_str(&format!(" --clients {}", cfg.clients));
    }
    if cfg.duration_us != default.duration_us {
        cmd.push_str(&format!(" --duration-ms {}", cfg.duration_us / 1000));
    }
    cmd
}

#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub passed: u64,
    pub failed: u64,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub faults: FaultCounts,
    pub cuts_ok: u64,
    pub cuts_failed: u64,
    pub cuts_verified: u64,
    pub cuts_verified_without_a_host: u64,
    pub cut_messages: u64,
    pub snapshot_order_aborts: u64,
    pub violations: u64,
    /// Every seed's cut metrics, merged.
    pub metrics: CutMetrics,
    pub tree: crate::tree::stats::TreeStats,
    pub first_failure: Option<FirstFailure>,
}

/// The first seed that failed, and the command that reproduces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstFailure {
    pub seed: u64,
    pub reproduce: String,
}

impl Summary {
    pub fn add(&mut self, r: &SeedReport, cfg: &SimConfig) {
        self.seeds += 1;
        if r.violations.is_empty() {
            self.passed += 1;
        } else {
            self.failed += 1;
            if self.first_failure.is_none() {
                self.first_failure = Some(FirstFailure { seed: r.seed, reproduce: reproduce(cfg) });
            }
        }
        self.committed += r.committed;
        self.aborted += r.aborted;
        self.unknown += r.unknown;
        self.faults.add(&r.faults);
        self.cuts_ok += r.cuts_ok;
        self.cuts_failed += r.cuts_failed;
        self.cuts_verified += r.cuts_verified;
        self.cuts_verified_without_a_host += r.cuts_verified_without_a_host;
        self.cut_messages += r.cut_messages;
        self.snapshot_order_aborts += r.snapshot_order_aborts;
        self.violations += r.violations.len() as u64;
        self.metrics.add(&r.metrics);
        self.tree.add(&r.tree);
    }

    /// Messages of the cut process per cut begun.
    pub fn messages_per_cut(&self) -> f64 {
        self.cut_messages as f64 / (self.cuts_ok + self.cuts_failed).max(1) as f64
    }

    pub fn latency_percentile_us(&self, p: f64) -> u64 {
        percentile_us(&self.metrics.cut_latencies_us, p)
    }
}

/// The `p` quantile (0..=1) of `values`, 0 when empty.
pub fn percentile_us(values: &[u64], p: f64) -> u64 {
    let mut v = values.to_vec();
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Runs `count` seeds from `start` with `base` as the template.
pub fn run_many(base: &SimConfig, start: u64, count: u64, each: impl FnMut(&SeedReport, &SimConfig)) -> Summary {
    run_many_in(base, start, count, None, each)
}

/// `run_many`, each seed in its shape of `matrix` when one is given (`matrix::of_seed`).
pub fn run_many_in(
    base: &SimConfig,
    start: u64,
    count: u64,
    matrix: Option<&[Shape]>,
    mut each: impl FnMut(&SeedReport, &SimConfig),
) -> Summary {
    let mut summary = Summary::default();
    for seed in start..start + count {
        let mut cfg = SimConfig { seed, ..base.clone() };
        if let Some(shapes) = matrix {
            matrix::of_seed(shapes, seed).apply(&mut cfg);
        }
        let r = run_seed(&cfg);
        each(&r, &cfg);
        summary.add(&r, &cfg);
    }
    summary
}
