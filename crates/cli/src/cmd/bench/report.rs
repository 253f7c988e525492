//! The report of an invocation: one table row per run, then — with a run without cuts and runs
//! with them — the ratio lines the targets are stated in (issue 14): throughput with cuts against
//! without, the worst second against the median second, the max commit latency against p99.

use super::stats::RunStats;
use super::workload::Kind;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// What was run, on what.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    pub workload: Kind,
    pub clients: usize,
    pub pipeline: usize,
    pub hosts: usize,
    /// `redis-protocol` (Waymark, or any server given by --redis) or `etcd`.
    pub system: &'static str,
    /// `--after-write`: the command sent after each write.
    pub after_write: Option<String>,
    pub replicas: Option<usize>,
    pub seconds: u64,
    pub warmup_s: f64,
    pub machine_cores: usize,
}

/// A run with cuts against the run without of the same round.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub round: u32,
    pub cut_every_ms: f64,
    pub throughput: f64,
    /// The target for `throughput`: cuts every second cost ≤ 2%, every 100 ms ≤ 5%.
    pub throughput_target: Option<f64>,
    pub worst_over_median: f64,
    pub max_over_p99: f64,
    pub p99_ratio: f64,
}

/// One interval's throughput ratio over every round (`--rounds`): the median, and the spread.
#[derive(Clone, Debug, Serialize)]
pub struct RatioOverRounds {
    pub cut_every_ms: f64,
    pub rounds: usize,
    pub throughput_median: f64,
    pub throughput_min: f64,
    pub throughput_max: f64,
    pub throughput_target: Option<f64>,
}

#[derive(Serialize)]
pub struct Report {
    pub setup: Setup,
    pub runs: Vec<RunStats>,
    pub ratios: Vec<Ratio>,
    /// With more than one round: each interval's ratios summed up.
    pub over_rounds: Vec<RatioOverRounds>,
}

/// Targets: ≥ 0.95× the median second, max ≤ 2× p99.
const WORST_OVER_MEDIAN_MIN: f64 = 0.95;
const MAX_OVER_P99_MAX: f64 = 2.0;

impl Report {
    pub fn new(setup: Setup, runs: Vec<RunStats>) -> Report {
        let ratios: Vec<Ratio> = runs.iter().filter_map(|r| Self::ratio(&runs, r)).collect();
        let rounds = runs.iter().map(|r| r.round).max().unwrap_or(1);
        let over_rounds = if rounds > 1 { over_rounds(&ratios) } else { vec![] };
        Report { setup, runs, ratios, over_rounds }
    }

    /// Run `r` (with cuts) against the run without cuts of its round.
    fn ratio(runs: &[RunStats], r: &RunStats) -> Option<Ratio> {
        let every = r.cut_every_ms?;
        let base = runs.iter().find(|b| b.cut_every_ms.is_none() && b.round == r.round)?;
        Some(Ratio {
            round: r.round,
            cut_every_ms: every,
            throughput: div(r.throughput_per_s, base.throughput_per_s),
            throughput_target: throughput_target(every),
            worst_over_median: r.worst_over_median,
            max_over_p99: div(r.latency_ms.max, r.latency_ms.p99),
            p99_ratio: div(r.latency_ms.p99, base.latency_ms.p99),
        })
    }

    pub fn print(&self) {
        let s = &self.setup;
        println!(
            "\nwaymark bench: {:?} workload, {} clients{}, {} hosts{}, {} s measured after {:.0} s warm-up, {} cores",
            s.workload,
            s.clients,
            if s.pipeline > 1 { format!(" (pipeline {})", s.pipeline) } else { String::new() },
            s.hosts,
            s.replicas.map(|r| format!(" (R={r})")).unwrap_or_default(),
            s.seconds,
            s.warmup_s,
            s.machine_cores,
        );
        println!(
            "{:<14} {:>10} {:>8} {:>8} {:>9} {:>8} {:>12} {:>8} {:>8} {:>7} {:>6} {:>20}",
            "run",
            "ops/s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "worst/median",
            "aborted",
            "retried",
            "errors",
            "cuts",
            "cut p50/p99/max ms"
        );
        for r in &self.runs {
            let cuts = &r.cuts;
            println!(
                "{:<14} {:>10.1} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>12.3} {:>8} {:>8} {:>7} {:>6} {:>20}",
                r.label,
                r.throughput_per_s,
                r.latency_ms.p50,
                r.latency_ms.p99,
                r.latency_ms.p999,
                r.latency_ms.max,
                r.worst_over_median,
                r.aborted,
                r.retried,
                r.errors,
                if cuts.failed > 0 { format!("{}!{}", cuts.count, cuts.failed) } else { cuts.count.to_string() },
                if cuts.count == 0 {
                    "-".into()
                } else {
                    format!("{:.1}/{:.1}/{:.1}", cuts.latency_ms_p50, cuts.latency_ms_p99, cuts.latency_ms_max)
                },
            );
        }
        for r in &self.ratios {
            let target = match r.throughput_target {
                Some(t) => format!(" (target ≥ {t:.2}: {})", verdict(r.throughput >= t)),
                None => String::new(),
            };
            let round = if self.over_rounds.is_empty() { String::new() } else { format!(", round {}", r.round) };
            println!(
                "cuts every {}{round}: throughput {:.3}x of no cuts{target}; worst second {:.3}x the median (target ≥ {WORST_OVER_MEDIAN_MIN}: {}); max latency {:.2}x p99 (target ≤ {MAX_OVER_P99_MAX}: {}); p99 {:.2}x of no cuts",
                every_text(r.cut_every_ms),
                r.throughput,
                r.worst_over_median,
                verdict(r.worst_over_median >= WORST_OVER_MEDIAN_MIN),
                r.max_over_p99,
                verdict(r.max_over_p99 <= MAX_OVER_P99_MAX),
                r.p99_ratio,
            );
        }
        for o in &self.over_rounds {
            let target = match o.throughput_target {
                Some(t) => format!(" (target ≥ {t:.2}: {})", verdict(o.throughput_median >= t)),
                None => String::new(),
            };
            println!(
                "cuts every {}, {} rounds: throughput {:.3}x of no cuts, the median of the rounds' ratios (from {:.3}x to {:.3}x){target}",
                every_text(o.cut_every_ms),
                o.rounds,
                o.throughput_median,
                o.throughput_min,
                o.throughput_max,
            );
        }
        for r in &self.runs {
            if let Some(h) = r.held.filter(|h| h.count > 0) {
                let share = 100.0 * h.count as f64 / r.committed.max(1) as f64;
                println!(
                    "{}: {} replies held for real-time safety ({share:.1}% of the ops committed), {:.2} ms each on average",
                    r.label, h.count, h.mean_ms
                );
            }
        }
        for r in self.runs.iter().filter(|r| r.first_error.is_some()) {
            println!("{}: first error: {}", r.label, r.first_error.as_deref().unwrap_or_default());
        }
    }

    pub fn write_json(&self, file: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).context("rendering the JSON report")?;
        std::fs::write(file, text + "\n").with_context(|| format!("writing {}", file.display()))
    }
}

fn throughput_target(every_ms: f64) -> Option<f64> {
    if every_ms >= 1000.0 {
        Some(0.98)
    } else if every_ms >= 100.0 {
        Some(0.95)
    } else {
        None
    }
}

/// Each interval's throughput ratios over the rounds, in the order the intervals first appear.
fn over_rounds(ratios: &[Ratio]) -> Vec<RatioOverRounds> {
    let mut intervals: Vec<f64> = vec![];
    for r in ratios {
        if !intervals.contains(&r.cut_every_ms) {
            intervals.push(r.cut_every_ms);
        }
    }
    intervals
        .into_iter()
        .map(|every| {
            let mut t: Vec<f64> = ratios.iter().filter(|r| r.cut_every_ms == every).map(|r| r.throughput).collect();
            t.sort_by(f64::total_cmp);
            let mid = t.len() / 2;
            let median = if t.len() % 2 == 1 { t[mid] } else { (t[mid - 1] + t[mid]) / 2.0 };
            RatioOverRounds {
                cut_every_ms: every,
                rounds: t.len(),
                throughput_median: median,
                throughput_min: t[0],
                throughput_max: t[t.len() - 1],
                throughput_target: throughput_target(every),
            }
        })
        .collect()
}

fn div(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

pub fn every_text(ms: f64) -> String {
    if ms >= 1000.0 && ms % 1000.0 == 0.0 {
        format!("{}s", ms / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(round: u32, every: f64, throughput: f64) -> Ratio {
        let (worst_over_median, max_over_p99, p99_ratio) = (1.0, 1.0, 1.0);
        let throughput_target = throughput_target(every);
        Ratio { round, cut_every_ms: every, throughput, throughput_target, worst_over_median, max_over_p99, p99_ratio }
    }

    #[test]
    fn each_interval_gets_the_median_of_its_rounds_ratios() {
        let ratios = [ratio(1, 1000.0, 0.90), ratio(1, 100.0, 0.80), ratio(2, 100.0, 1.00), ratio(2, 1000.0, 1.10)];
        let ratios = [&ratios[..], &[ratio(3, 1000.0, 0.97), ratio(3, 100.0, 0.95)]].concat();
        let o = over_rounds(&ratios);
        assert_eq!(o.len(), 2);
        assert_eq!((o[0].cut_every_ms, o[0].rounds, o[0].throughput_median), (1000.0, 3, 0.97));
        assert_eq!((o[0].throughput_min, o[0].throughput_max), (0.90, 1.10));
        assert_eq!((o[1].cut_every_ms, o[1].throughput_median, o[1].throughput_target), (100.0, 0.95, Some(0.95)));
        let even = over_rounds(&ratios[..4]);
        assert!(
            (even[0].throughput_median - 1.0).abs() < 1e-9,
            "the mean of the middle two: {}",
            even[0].throughput_median
        );
    }
}
