//! What a run measured: each finished operation is recorded once, with its latency, into the
//! second of the run it finished in and into the whole run's histogram; operations that finish in
//! the warm-up or after the end are not recorded. The summary (`RunStats`) is what the report,
//! the JSON and the chart show.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Latencies are recorded in microseconds, from 1 µs to this; a longer one is clamped to it.
const LATENCY_US_MAX: u64 = 120_000_000;
/// The whole run's histogram: 3 significant digits (p99.9 within 0.1%).
const RUN_SIGFIGS: u8 = 3;
/// A second's histogram: 2 significant digits keep one second small (~20 KB).
const SECOND_SIGFIGS: u8 = 2;
/// Longest run: bounds the memory of the per-second histograms.
pub const SECONDS_MAX: u64 = 3_600;

/// How one operation (one transaction, or one pipelined batch of single-key commands) ended.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// `ops` operations committed after `retries` aborted attempts (WATCH) of the same transfer.
    Committed { ops: u64, retries: u64 },
    /// The payer's balance was too low: nothing was written.
    Declined,
    /// The server answered an error, or the connection failed.
    Error,
    /// `ops` writes refused with `-OOM` (past `limits.maxmemory_bytes`): the cluster said no, as
    /// it should; not an error.
    Refused { ops: u64 },
}

struct Second {
    latency_us: Histogram<u64>,
    committed: u64,
    aborted: u64,
    retried: u64,
    declined: u64,
    errors: u64,
    refused: u64,
}

/// Shared by a run's clients. Invariant: every recorded operation finished in `[from, from + seconds)`.
pub struct Recorder {
    /// Set once, by the run, before the clients start (the end of the warm-up).
    from: OnceLock<Instant>,
    seconds: Vec<Mutex<Second>>,
    run_latency_us: Mutex<Histogram<u64>>,
    /// Operations committed so far, warm-up included: the progress bar's rate.
    pub committed_live: AtomicU64,
    first_error: Mutex<Option<String>>,
}

fn histogram(sigfigs: u8) -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (1 ≤ low, 2 × low ≤ high, sigfigs ≤ 5).
    Histogram::new_with_bounds(1, LATENCY_US_MAX, sigfigs).expect("valid histogram bounds")
}

impl Recorder {
    pub fn new(seconds: u64) -> Recorder {
        let second = || {
            Mutex::new(Second {
                latency_us: histogram(SECOND_SIGFIGS),
                committed: 0,
                aborted: 0,
                retried: 0,
                declined: 0,
                errors: 0,
                refused: 0,
            })
        };
        Recorder {
            from: OnceLock::new(),
            seconds: (0..seconds.min(SECONDS_MAX)).map(|_| second()).collect(),
            run_latency_us: Mutex::new(histogram(RUN_SIGFIGS)),
            committed_live: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }
    }

    /// The measured window starts at `from`; only the first call counts.
    pub fn start_at(&self, from: Instant) {
        let _ = self.from.set(from);
    }

    pub fn from(&self) -> Option<Instant> {
        self.from.get().copied()
    }

    /// An operation that took `latency`, finished at `at`, and ended as `outcome`.
    pub fn record(&self, at: Instant, latency: Duration, outcome: Outcome) {
        if let Outcome::Committed { ops, .. } = outcome {
            self.committed_live.fetch_add(ops, Ordering::Relaxed);
        }
        let Some(second) = self.from().and_then(|from| at.checked_duration_since(from)) else { return };
        let Some(slot) = self.seconds.get(second.as_secs() as usize) else { return };
        let us = (latency.as_micros() as u64).clamp(1, LATENCY_US_MAX);
        let mut s = lock(slot);
        match outcome {
            Outcome::Committed { ops, retries } => {
                s.committed += ops;
                s.aborted += retries;
                s.retried += (retries > 0) as u64;
                let _ = s.latency_us.record_n(us, ops);
                drop(s);
                let _ = lock(&self.run_latency_us).record_n(us, ops);
            }
            Outcome::Declined => s.declined += 1,
            Outcome::Error => s.errors += 1,
            Outcome::Refused { ops } => s.refused += ops,
        }
    }

    /// Keeps the first error's text for the report.
    pub fn error(&self, what: String) {
        lock(&self.first_error).get_or_insert(what);
    }

    pub fn summary(&self, label: String, cut_every: Option<Duration>, cuts: Vec<Cut>) -> RunStats {
        let run = lock(&self.run_latency_us);
        let seconds: Vec<SecondStats> = self
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let s = lock(s);
                let q = |p: f64| if s.committed == 0 { 0.0 } else { ms(s.latency_us.value_at_quantile(p)) };
                SecondStats {
                    second: i as u64,
                    committed: s.committed,
                    aborted: s.aborted,
                    declined: s.declined,
                    errors: s.errors,
                    refused: s.refused,
                    p50_ms: q(0.5),
                    p99_ms: q(0.99),
                    max_ms: if s.committed == 0 { 0.0 } else { ms(s.latency_us.max()) },
                    retried: s.retried,
                }
            })
            .collect();
        let committed: u64 = seconds.iter().map(|s| s.committed).sum();
        let mut per_second: Vec<u64> = seconds.iter().map(|s| s.committed).collect();
        per_second.sort_unstable();
        let worst = per_second.first().copied().unwrap_or(0);
        let median = per_second.get(per_second.len() / 2).copied().unwrap_or(0);
        let q = |p: f64| if run.is_empty() { 0.0 } else { ms(run.value_at_quantile(p)) };
        RunStats {
            label,
            round: 1,
            cut_every_ms: cut_every.map(|d| d.as_secs_f64() * 1000.0),
            seconds_measured: seconds.len() as u64,
            committed,
            throughput_per_s: committed as f64 / seconds.len().max(1) as f64,
            latency_ms: Latency { p50: q(0.5), p99: q(0.99), p999: q(0.999), max: ms(run.max()) },
            worst_second: worst,
            median_second: median,
            worst_over_median: if median == 0 { 0.0 } else { worst as f64 / median as f64 },
            aborted: seconds.iter().map(|s| s.aborted).sum(),
            retried: seconds.iter().map(|s| s.retried).sum(),
            declined: seconds.iter().map(|s| s.declined).sum(),
            errors: seconds.iter().map(|s| s.errors).sum(),
            refused: seconds.iter().map(|s| s.refused).sum(),
            first_error: lock(&self.first_error).clone(),
            cuts: CutStats::of(cuts),
            held: None,
            per_second: seconds,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// One cut asked of the cluster (`POST /cuts`).
#[derive(Clone, Debug, Serialize)]
pub struct Cut {
    /// When it was asked, in seconds since the measured window began.
    pub at_s: f64,
    /// The round trip of the admin call, in milliseconds.
    pub latency_ms: f64,
    /// The cut's id, and whether the cluster says it succeeded.
    pub cut: Option<u64>,
    pub ok: bool,
    /// START, STARTED, FINISH, END as the manager timed them.
    pub phases_ms: Vec<f64>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CutStats {
    pub count: usize,
    pub failed: usize,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
    pub latency_ms_max: f64,
    pub list: Vec<Cut>,
}

impl CutStats {
    fn of(list: Vec<Cut>) -> CutStats {
        let mut ms: Vec<f64> = list.iter().filter(|c| c.ok).map(|c| c.latency_ms).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| if ms.is_empty() { 0.0 } else { ms[((ms.len() - 1) as f64 * q).round() as usize] };
        CutStats {
            count: list.len(),
            failed: list.iter().filter(|c| !c.ok).count(),
            latency_ms_p50: at(0.5),
            latency_ms_p99: at(0.99),
            latency_ms_max: ms.last().copied().unwrap_or(0.0),
            list,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SecondStats {
    pub second: u64,
    pub committed: u64,
    pub aborted: u64,
    pub retried: u64,
    pub declined: u64,
    pub errors: u64,
    /// Writes refused with `-OOM`.
    pub refused: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One run of a workload, summarised. Commit latency: from the first attempt of a transaction
/// (retries included) to its commit reply; for a pipelined batch, the batch's round trip.
#[derive(Clone, Debug, Serialize)]
pub struct RunStats {
    pub label: String,
    /// Which round of `--rounds` (1 without it).
    pub round: u32,
    pub cut_every_ms: Option<f64>,
    pub seconds_measured: u64,
    pub committed: u64,
    pub throughput_per_s: f64,
    pub latency_ms: Latency,
    pub worst_second: u64,
    pub median_second: u64,
    pub worst_over_median: f64,
    /// Attempts aborted by WATCH (each retried), and transfers that needed a retry.
    pub aborted: u64,
    pub retried: u64,
    pub declined: u64,
    pub errors: u64,
    /// Writes refused with `-OOM` (past `limits.maxmemory_bytes`).
    pub refused: u64,
    pub first_error: Option<String>,
    pub cuts: CutStats,
    /// Replies the cluster held for real-time safety during the run (`None`: not read, e.g.
    /// a cluster given by Redis addresses only).
    pub held: Option<super::held::HeldReplies>,
    pub per_second: Vec<SecondStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= b * 0.01
    }

    /// What issue 38 compares the cut strategies by: p99.9, the longest single commit (max), and
    /// the worst second (the fewest commits in any one-second bucket of the measured window).
    #[test]
    fn the_summary_gives_the_tail_the_longest_commit_and_the_worst_second() {
        let rec = Recorder::new(3);
        let from = Instant::now();
        rec.start_at(from);
        let ok = Outcome::Committed { ops: 1, retries: 0 };
        let at = |ms: u64| from + Duration::from_millis(ms);
        // Second 0: 600 commits; second 1 (a stall): 100; second 2: 300. Of the 1 000, 990 take
        // 1 ms, 9 take 100 ms and one 500 ms.
        for i in 0..600 {
            rec.record(at(i), Duration::from_millis(1), ok);
        }
        for i in 0..100 {
            let latency = match i {
                0 => 500,
                1..=9 => 100,
                _ => 1,
            };
            rec.record(at(1_000 + i), Duration::from_millis(latency), ok);
        }
        for i in 0..300 {
            rec.record(at(2_000 + i), Duration::from_millis(1), ok);
        }
        // Not counted: before the window, after it, and an error (no latency).
        if let Some(before) = from.checked_sub(Duration::from_millis(1)) {
            rec.record(before, Duration::from_secs(9), ok);
        }
        rec.record(at(3_000), Duration::from_secs(9), ok);
        rec.record(at(2_500), Duration::from_secs(9), Outcome::Error);

        let run = rec.summary("t".into(), Some(Duration::from_millis(100)), vec![]);
        assert_eq!(run.committed, 1_000);
        assert_eq!((run.worst_second, run.median_second), (100, 300));
        assert!(near(run.worst_over_median, 1.0 / 3.0), "{}", run.worst_over_median);
        assert!(near(run.latency_ms.p99, 1.0), "p99 {}", run.latency_ms.p99);
        assert!(near(run.latency_ms.p999, 100.0), "p99.9 {}", run.latency_ms.p999);
        assert!(near(run.latency_ms.max, 500.0), "max {}", run.latency_ms.max);
        assert_eq!(run.errors, 1);
        assert_eq!(run.per_second.iter().map(|s| s.committed).collect::<Vec<_>>(), [600, 100, 300]);
        assert!(near(run.per_second[1].max_ms, 500.0));
    }
}
