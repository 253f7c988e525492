//! The host's metrics (issue 10, item 4), kept with the `metrics` facade and rendered in the
//! Prometheus text format by `metrics-exporter-prometheus` for `GET /metrics` (the admin API serves
//! it: the exporter runs no listener of its own).
//!
//! Each function here names what happened in the domain (`transaction_committed`, `cut_done`,
//! `wal_synced`, …); the metric names, units and labels live only in this file. Until `install`
//! runs — in unit tests, or in a program that installed another recorder — every call is a no-op.
//!
//! Counts are per process: a host's `/metrics` counts the transactions its Redis clients ran,
//! the cuts it ran, and its own vnodes' logs.

use crate::status::CutReport;
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TXN_COMMITTED: &str = "waymark_transactions_committed_total";
const TXN_ABORTED: &str = "waymark_transactions_aborted_total";
const TXN_RETRIES: &str = "waymark_transaction_retries_total";
const COMMIT_LATENCY: &str = "waymark_commit_latency_seconds";
const CUTS: &str = "waymark_cuts_total";
const CUT_PHASE: &str = "waymark_cut_phase_duration_seconds";
const LAST_CUT_OK: &str = "waymark_last_cut_success_unix_seconds";
const LAST_CUT_AGE: &str = "waymark_last_cut_age_seconds";
const WAL_FSYNC: &str = "waymark_wal_fsync_duration_seconds";
const CHECKPOINT_DURATION: &str = "waymark_checkpoint_duration_seconds";
const CHECKPOINT_BYTES: &str = "waymark_checkpoint_written_bytes_total";
const SNAPSHOTS: &str = "waymark_snapshots_created_total";
const PREPARED: &str = "waymark_vnode_prepared_transactions";
const HELD: &str = "waymark_vnode_held_replies";
const LEARNING: &str = "waymark_vnode_learning_partitions";
const COPY_PAGES: &str = "waymark_vnode_copy_pages_served";
const COPIED: &str = "waymark_vnode_copied_entries";
const ALTERATIONS: &str = "waymark_alterations_total";
const BLOCKING_STALL: &str = "waymark_blocking_stall_seconds";
const HELD_FOR: &str = "waymark_held_reply_seconds";
const MEMORY_USED: &str = "waymark_memory_used_bytes";
const MEMORY_LIMIT: &str = "waymark_memory_limit_bytes";

/// The cut operator's phases, in the order of `CutReport::phases_ms`.
pub const CUT_PHASES: [&str; 4] = ["start", "started", "finish", "end"];
/// The `versions` coordinator's phases, in the same order.
pub const VERSIONS_CUT_PHASES: [&str; 4] = ["snp_version", "map", "late", "skip"];

/// Bucket bounds of every `_seconds` histogram: from 100 µs (an fsync on a fast disk) to 30 s
/// (a cut phase waiting for its timeout).
const SECONDS_BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0];

/// How often histogram buffers are folded in, so they stay bounded between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder is global to the process: installed once, by the first host that starts (a test
/// process may start several).
static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
/// When this process last saw a cut succeed, in ms since the epoch (0: never).
static LAST_CUT_OK_UNIX_MS: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the metrics recorder cannot be installed: {0}")]
    Install(#[source] metrics_exporter_prometheus::BuildError),
}

/// Installs the process's recorder (once per process) and starts its upkeep on the current
/// runtime; later calls do nothing.
pub fn install() -> Result<(), TelemetryError> {
    let mut built = None;
    HANDLE.get_or_init(|| {
        let handle = build();
        let kept = handle.as_ref().ok().cloned();
        built = Some(handle);
        kept
    });
    let Some(handle) = built.transpose()? else {
        return Ok(());
    };
    describe();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    });
    Ok(())
}

fn build() -> Result<PrometheusHandle, TelemetryError> {
    let install = TelemetryError::Install;
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(install)?
        .install_recorder()
        .map_err(install)
}

fn describe() {
    describe_counter!(TXN_COMMITTED, "Client transactions (data commands, EXEC) that committed");
    describe_counter!(TXN_ABORTED, "Client transactions that did not commit, by reason (watch, conflict, failed)");
    describe_counter!(TXN_RETRIES, "Attempts of client transactions retried after a conflict");
    describe_histogram!(COMMIT_LATENCY, Unit::Seconds, "From a client's request to its commit reply");
    describe_counter!(CUTS, "Cut processes run through this host, by outcome");
    describe_histogram!(CUT_PHASE, Unit::Seconds, "Duration of each phase of a cut process");
    describe_histogram!(
        BLOCKING_STALL,
        Unit::Seconds,
        "How long a client transaction waited for a blocking cut's pause to end (strategy blocking)"
    );
    describe_histogram!(
        HELD_FOR,
        Unit::Seconds,
        "How long a reply was held for real-time safety, until every vnode started the cut it reveals"
    );
    describe_gauge!(LAST_CUT_OK, Unit::Seconds, "When a cut run through this host last succeeded");
    describe_gauge!(LAST_CUT_AGE, Unit::Seconds, "Seconds since a cut run through this host last succeeded");
    describe_histogram!(WAL_FSYNC, Unit::Seconds, "One group commit's fsync of a vnode's log");
    describe_histogram!(CHECKPOINT_DURATION, Unit::Seconds, "Writing one vnode checkpoint");
    describe_counter!(CHECKPOINT_BYTES, Unit::Bytes, "Bytes of checkpoint files written");
    describe_counter!(SNAPSHOTS, "Snapshots created through this host, by kind (full, increment)");
    describe_gauge!(PREPARED, "Transactions prepared at a store vnode and not yet decided");
    describe_gauge!(LEARNING, "Partitions a store vnode is catching up on as a learner (not copies yet)");
    describe_gauge!(
        COPY_PAGES,
        "Pages of partitions a store vnode sent to learners as their primary, since it started"
    );
    describe_gauge!(COPIED, "Entries a store vnode installed from pages as a learner, since it started");
    describe_gauge!(HELD, "Replies a store vnode holds until every vnode started the cut they reveal");
    describe_gauge!(MEMORY_USED, Unit::Bytes, "This host's data in memory (keys, values, an estimate per entry)");
    describe_gauge!(
        MEMORY_LIMIT,
        Unit::Bytes,
        "limits.maxmemory_bytes: past it writes that store a value are refused (0: no limit)"
    );
    describe_counter!(ALTERATIONS, "Metadata alterations this host's managers proposed, by outcome (ok, failed)");
}

/// The metrics in Prometheus text format; `None` if this process has no recorder of ours.
pub fn render() -> Option<String> {
    let handle = HANDLE.get()?.as_ref()?;
    let last_ms = LAST_CUT_OK_UNIX_MS.load(Ordering::Relaxed);
    // The age is a function of the scrape's time, so it is set at the scrape.
    if last_ms > 0 {
        let age_ms = unix_ms().saturating_sub(last_ms);
        gauge!(LAST_CUT_AGE).set(age_ms as f64 / 1000.0);
    }
    Some(handle.render())
}

/// A client's transaction committed; `started` when its request arrived.
pub fn transaction_committed(started: Instant) {
    counter!(TXN_COMMITTED).increment(1);
    histogram!(COMMIT_LATENCY).record(started.elapsed().as_secs_f64());
}

/// Why a client's transaction did not commit.
#[derive(Clone, Copy, Debug)]
pub enum Abort {
    /// A `WATCH`ed key changed: `EXEC` answered nil.
    Watch,
    /// Conflicting transactions were in the way every time it was tried.
    Conflict,
    /// Any other error the client heard (a timeout, an unavailable replica, a bad value).
    Failed,
}

pub fn transaction_aborted(why: Abort) {
    let reason = match why {
        Abort::Watch => "watch",
        Abort::Conflict => "conflict",
        Abort::Failed => "failed",
    };
    counter!(TXN_ABORTED, "reason" => reason).increment(1);
}

pub fn transaction_retried() {
    counter!(TXN_RETRIES).increment(1);
}

/// A cut process ended (successfully or not) with these phase durations.
pub fn cut_done(report: &CutReport) {
    let outcome = if report.ok { "ok" } else { "failed" };
    counter!(CUTS, "outcome" => outcome).increment(1);
    if !report.ok {
        let why = report.why.as_deref().unwrap_or("no reason given");
        tracing::warn!(cut = report.cut, through = %report.through, phases_ms = ?report.phases_ms, "cut failed: {why}");
        return; // a failed cut's phases stop short: they would skew the phase histograms
    }
    let names = match report.strategy {
        waymark_core::CutStrategy::Versions => VERSIONS_CUT_PHASES,
        _ => CUT_PHASES,
    };
    for (phase, ms) in names.iter().zip(&report.phases_ms) {
        histogram!(CUT_PHASE, "phase" => *phase).record(ms / 1000.0);
    }
    let now_ms = unix_ms();
    LAST_CUT_OK_UNIX_MS.store(now_ms, Ordering::Relaxed);
    gauge!(LAST_CUT_OK).set(now_ms as f64 / 1000.0);
}

/// A client transaction held back by a blocking cut's pause was let through after `stall_us`.
pub fn blocking_stall(stall_us: u64) {
    histogram!(BLOCKING_STALL).record(stall_us as f64 / 1_000_000.0);
}

/// A reply held for real-time safety was released after `held_us`.
pub fn reply_held(held_us: u64) {
    histogram!(HELD_FOR).record(held_us as f64 / 1_000_000.0);
}

/// One group commit's sync of a vnode's log took `took`.
pub fn wal_synced(took: Duration) {
    histogram!(WAL_FSYNC).record(took.as_secs_f64());
}

pub fn checkpointed(bytes: u64, took_ms: u64) {
    histogram!(CHECKPOINT_DURATION).record(took_ms as f64 / 1000.0);
    counter!(CHECKPOINT_BYTES).increment(bytes);
}

/// A snapshot was created: a full one (`increment == 0`) or increment K of a chain.
pub fn snapshot_created(increment: u32) {
    let kind = if increment == 0 { "full" } else { "increment" };
    counter!(SNAPSHOTS, "kind" => kind).increment(1);
}

/// Replies held for real-time safety at `vnode`, as its status reported at the scrape.
pub fn held_replies(vnode: &str, count: usize) {
    gauge!(HELD, "vnode" => vnode.to_string()).set(count as f64);
}

/// Transactions prepared and not decided at `vnode`, as its status reported at the scrape.
pub fn prepared(vnode: &str, count: usize) {
    gauge!(PREPARED, "vnode" => vnode.to_string()).set(count as f64);
}

/// A store vnode's catch-up, as its status reported at the scrape: partitions it is learning,
/// pages it served, entries it installed.
pub fn catch_up(vnode: &str, learning: usize, pages_served: u64, entries_installed: u64) {
    gauge!(LEARNING, "vnode" => vnode.to_string()).set(learning as f64);
    gauge!(COPY_PAGES, "vnode" => vnode.to_string()).set(pages_served as f64);
    gauge!(COPIED, "vnode" => vnode.to_string()).set(entries_installed as f64);
}

/// This host's data and its limit, read at the scrape.
pub fn memory(used_bytes: u64, limit_bytes: u64) {
    gauge!(MEMORY_USED).set(used_bytes as f64);
    gauge!(MEMORY_LIMIT).set(limit_bytes as f64);
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One of this host's managers was told how an alteration it proposed ended (a cut phase, a
/// child's or a host's state), after `attempts` tries.
pub fn alteration_answered(ok: bool, attempts: u32) {
    let outcome = if ok { "ok" } else { "failed" };
    counter!(ALTERATIONS, "outcome" => outcome).increment(1);
    counter!(ALTERATIONS, "outcome" => "retried").increment(u64::from(attempts.saturating_sub(1)));
}
