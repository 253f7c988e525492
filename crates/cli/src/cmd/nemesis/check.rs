//! The nemesis's verdicts over a recorded history: the bank's total in every audit and in the
//! final state read through every host; after healing, the replicas of every partition agree;
//! the newest snapshot taken during the run checks and restores; and what the clients saw per
//! fault kind and per second.

use super::faults::Fault;
use super::hosts::Hosts;
use super::lists::{self, Verdict};
use super::snapshots::{Attempt, Restored, Verified};
use super::workload::{list_keys, Op, OpKind, Outcome, Workload};
use anyhow::Result;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// How long the final read through a host may be refused (`TRYAGAIN` while it catches up).
const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Availability is counted in slices of this length: a slice is up when an operation completed
/// ok in it.
const UP_SLICE_MS: u64 = 250;
/// How long the replicas may take to agree after healing (in-doubt branches resolving).
const AGREE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Report {
    /// Hosts whose node stopped by itself (name, exit status, why).
    stopped: Vec<(String, String, String)>,
    /// The bank's checks (audits, final balances) run with the bank workload only.
    bank: bool,
    /// The append workload's checks (`lists.rs`).
    verdicts: Vec<Verdict>,
    total: i64,
    audits_ok: usize,
    /// Audits whose balances did not sum to the total: (invoke ms, sum).
    bad_audits: Vec<(u64, i64)>,
    /// Per host, the balances read at the end (or why none could be).
    finals: Vec<(String, Result<Vec<i64>, String>)>,
    /// Transfers by the fault in force when each was invoked ("none" outside every window):
    /// ok, aborted, refused, unknown.
    by_fault: BTreeMap<&'static str, [usize; 4]>,
    /// Per fault kind ("none" outside every window): slices of `UP_SLICE_MS` in its windows, and
    /// how many of them saw an operation answered ok.
    up_by_fault: BTreeMap<&'static str, (usize, usize)>,
    /// Operations answered ok, per second of the run.
    pub ok_per_second: Vec<usize>,
    /// Operations refused or whose outcome is unknown, per second of the run.
    pub not_ok_per_second: Vec<usize>,
    windows: Vec<Fault>,
    /// After healing: the partitions whose current replicas differ (or why none could be read).
    replicas: Result<Vec<String>, String>,
    /// Snapshots taken during the run, ok and failed.
    snapshots: (usize, usize),
    /// The first snapshots that failed: when (ms) and why.
    snapshot_failures: Vec<(u64, String)>,
    /// The newest snapshot, checked and restored (none if none was taken).
    restored: Option<Result<Verified, String>>,
}

/// What the run left to check besides its history.
pub struct Run<'a> {
    /// Hosts whose node stopped by itself during the run: name, exit status, its log's last line.
    pub stopped: Vec<(String, String, String)>,
    pub workload: Workload,
    pub windows: &'a [Fault],
    pub total: i64,
    pub hosts: &'a Hosts,
    pub accounts: &'a [String],
    pub seconds: u64,
    pub snapshots: &'a [Attempt],
    /// The newest snapshot checked and restored, if one was taken.
    pub restored: Option<Result<Verified, String>>,
}

pub fn check(history: &[Op], run: Run) -> Result<Report> {
    let Run { stopped, workload, windows, total, hosts, accounts, seconds, snapshots, restored } = run;
    let audits: Vec<&Op> = history.iter().filter(|o| o.kind == OpKind::Audit && o.outcome == Outcome::Ok).collect();
    let bad_audits =
        audits.iter().filter(|o| o.sum != Some(total)).map(|o| (o.invoke_ms, o.sum.unwrap_or(0))).collect();
    let mut by_fault: BTreeMap<&'static str, [usize; 4]> = BTreeMap::new();
    let mut ok_per_second = vec![0; seconds as usize + 1];
    let mut not_ok_per_second = vec![0; seconds as usize + 1];
    for op in history {
        let during = windows.iter().find(|w| (w.start_ms..w.end_ms).contains(&op.invoke_ms));
        let slot = match op.outcome {
            Outcome::Ok => 0,
            Outcome::Aborted => 1,
            Outcome::Refused => 2,
            Outcome::Unknown => 3,
        };
        if matches!(op.kind, OpKind::Transfer | OpKind::Append) {
            by_fault.entry(during.map_or("none", |w| w.kind.name())).or_default()[slot] += 1;
        }
        let per_second = match op.outcome {
            Outcome::Ok => &mut ok_per_second,
            Outcome::Refused | Outcome::Unknown => &mut not_ok_per_second,
            Outcome::Aborted => continue,
        };
        if let Some(n) = per_second.get_mut((op.complete_ms / 1000) as usize) {
            *n += 1;
        }
    }
    let up_by_fault = up_by_fault(history, windows, seconds);
    let bank = workload == Workload::Bank;
    let (finals, verdicts) = match workload {
        Workload::Bank => {
            (hosts.hosts.iter().map(|h| (h.name.clone(), final_balances(h.redis, accounts))).collect(), vec![])
        }
        Workload::Append => {
            let lists: Vec<_> =
                hosts.hosts.iter().map(|h| (h.name.clone(), lists::read_lists(h.redis, list_keys(seconds)))).collect();
            let restored_lists = match &restored {
                Some(Ok(Verified { holds: Restored::Lists(l), .. })) => Some(l),
                _ => None,
            };
            (vec![], lists::check(history, &lists, restored_lists))
        }
    };
    let admins: Vec<String> = hosts.hosts.iter().map(|h| h.admin.to_string()).collect();
    let ok_snapshots = snapshots.iter().filter(|a| a.result.is_ok()).count();
    Ok(Report {
        stopped,
        bank,
        verdicts,
        replicas: replicas_once_agreed(&admins),
        snapshots: (ok_snapshots, snapshots.len() - ok_snapshots),
        snapshot_failures: snapshots
            .iter()
            .filter_map(|a| {
                a.result.as_ref().err().map(|e| (a.at_ms, e.lines().next().unwrap_or_default().to_string()))
            })
            .collect(),
        restored,
        total,
        audits_ok: audits.len(),
        bad_audits,
        finals,
        by_fault,
        up_by_fault,
        ok_per_second,
        not_ok_per_second,
        windows: windows.to_vec(),
    })
}

/// The balances read through one host once it answers, retried while it refuses.
fn final_balances(addr: std::net::SocketAddr, accounts: &[String]) -> Result<Vec<i64>, String> {
    let values = mget_once_answered::<Option<i64>>(addr, accounts)?;
    Ok(values.into_iter().map(|v| v.unwrap_or(0)).collect())
}

/// An MGET of `keys` through `addr`, asked again while the host refuses (`TRYAGAIN` while it
/// catches up), for `FINAL_READ_TIMEOUT` at most.
pub fn mget_once_answered<T: redis::FromRedisValue>(
    addr: std::net::SocketAddr,
    keys: &[String],
) -> Result<Vec<T>, String> {
    let deadline = Instant::now() + FINAL_READ_TIMEOUT;
    let mut last = String::new();
    while Instant::now() < deadline {
        match crate::cmd::bank::connect(addr).and_then(|mut con| redis::cmd("MGET").arg(keys).query::<Vec<T>>(&mut con))
        {
            Ok(values) => return Ok(values),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("no answer within {FINAL_READ_TIMEOUT:?}: {last}"))
}

/// Per fault kind, its slices and those in which an operation completed ok (a slice belongs to
/// the fault whose window holds its start).
fn up_by_fault(history: &[Op], windows: &[Fault], seconds: u64) -> BTreeMap<&'static str, (usize, usize)> {
    let slices = (seconds * 1000).div_ceil(UP_SLICE_MS) as usize;
    let mut up = vec![false; slices];
    for op in history.iter().filter(|o| o.outcome == Outcome::Ok) {
        if let Some(u) = up.get_mut((op.complete_ms / UP_SLICE_MS) as usize) {
            *u = true;
        }
    }
    let mut out: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    for (i, is_up) in up.into_iter().enumerate() {
        let at_ms = i as u64 * UP_SLICE_MS;
        let during = windows.iter().find(|w| (w.start_ms..w.end_ms).contains(&at_ms));
        let e = out.entry(during.map_or("none", |w| w.kind.name())).or_default();
        e.0 += 1;
        e.1 += is_up as usize;
    }
    out
}

/// The partitions whose replicas differ, asked again until none does or `AGREE_TIMEOUT` passes.
fn replicas_once_agreed(admins: &[String]) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + AGREE_TIMEOUT;
    loop {
        let found = crate::cmd::replicas::disagreements(admins).map_err(|e| format!("{e:#}"));
        match found {
            Ok(d) if d.is_empty() => return Ok(d),
            found if Instant::now() > deadline => return found,
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

impl Report {
    fn replicas_agree(&self) -> bool {
        matches!(&self.replicas, Ok(d) if d.is_empty())
    }

    fn restore_ok(&self) -> bool {
        !matches!(self.restored, Some(Err(_)))
    }

    fn finals_agree(&self) -> bool {
        let mut read = self.finals.iter().map(|(_, r)| r.as_ref().ok());
        let Some(Some(first)) = read.next() else { return false };
        read.all(|r| r == Some(first)) && first.iter().sum::<i64>() == self.total
    }

    /// A node may stop by itself only on a full disk (it stops rather than lie).
    fn stops_explained(&self) -> bool {
        self.stopped.iter().all(|(_, _, why)| why.contains("No space left on device"))
    }

    pub fn passed(&self) -> bool {
        let bank = !self.bank || (self.bad_audits.is_empty() && self.finals_agree());
        bank && self.verdicts.iter().all(|v| v.ok)
            && self.replicas_agree()
            && self.restore_ok()
            && self.stops_explained()
    }
}

impl Report {
    fn fmt_bank(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = |ok: bool| if ok { "ok" } else { "VIOLATED" };
        writeln!(
            f,
            "  bank audits     {:<9} {} audits read every account; {} did not sum to {}",
            verdict(self.bad_audits.is_empty()),
            self.audits_ok,
            self.bad_audits.len(),
            self.total
        )?;
        for (at_ms, sum) in self.bad_audits.iter().take(5) {
            writeln!(f, "    audit invoked at {:.3} s summed to {sum}", *at_ms as f64 / 1e3)?;
        }
        writeln!(
            f,
            "  final state     {:<9} every host, after healing, serves the same balances summing to {}",
            verdict(self.finals_agree()),
            self.total
        )?;
        for (host, read) in &self.finals {
            match read {
                Ok(b) => writeln!(f, "    {host:<8} sum {}", b.iter().sum::<i64>())?,
                Err(e) => writeln!(f, "    {host:<8} {e}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = |ok: bool| if ok { "ok" } else { "VIOLATED" };
        writeln!(f, "checks:")?;
        writeln!(
            f,
            "  nodes           {:<9} {} stopped by themselves (only a full disk may stop one)",
            verdict(self.stops_explained()),
            self.stopped.len()
        )?;
        for (host, status, why) in &self.stopped {
            writeln!(f, "    {host} ({status}): {}", why.chars().take(200).collect::<String>())?;
        }
        if self.bank {
            self.fmt_bank(f)?;
        }
        for v in &self.verdicts {
            let mut said = v.said.iter();
            writeln!(f, "  {:<15} {:<9} {}", v.name, verdict(v.ok), said.next().map_or("", |s| s.as_str()))?;
            for line in said {
                writeln!(f, "    {line}")?;
            }
        }
        writeln!(
            f,
            "  replicas        {:<9} after healing, the current replicas of every partition hold the same data",
            verdict(self.replicas_agree())
        )?;
        match &self.replicas {
            Ok(differ) => differ.iter().take(5).try_for_each(|d| writeln!(f, "    {d}"))?,
            Err(e) => writeln!(f, "    {e}")?,
        }
        let (ok, failed) = self.snapshots;
        match &self.restored {
            Some(Ok(v)) => writeln!(
                f,
                "  snapshot        {:<9} #{} (cut {}) of {ok} taken during the run ({failed} failed cleanly) checks, \
                 restores, holds {} and its replicas agree",
                verdict(true),
                v.increment,
                v.cut,
                match &v.holds {
                    Restored::Bank { total } => total.to_string(),
                    Restored::Lists(l) => format!(
                        "{} list elements (in the serializability check)",
                        l.values().map(Vec::len).sum::<usize>()
                    ),
                }
            )?,
            Some(Err(e)) => writeln!(f, "  snapshot        {:<9} {e}", verdict(false))?,
            None => writeln!(f, "  snapshot        none      none of {failed} taken during the run succeeded")?,
        }
        // The first and the last failures: how the faults began to stop cuts, and whether
        // anything stopped them for good.
        let n = self.snapshot_failures.len();
        for (i, (at_ms, why)) in self.snapshot_failures.iter().enumerate() {
            if i == 3 && n > 6 {
                writeln!(f, "    … {} more …", n - 6)?;
            }
            if i < 3 || i + 3 >= n {
                writeln!(f, "    the snapshot asked at {:.1} s failed: {why}", *at_ms as f64 / 1e3)?;
            }
        }
        writeln!(
            f,
            "transactions by the fault in force when invoked: ok / aborted / refused / unknown, and \
             answered (ok or aborted)"
        )?;
        for (fault, [ok, aborted, refused, unknown]) in &self.by_fault {
            let all = (ok + aborted + refused + unknown).max(1);
            let (slices, up) = self.up_by_fault.get(fault).copied().unwrap_or_default();
            writeln!(
                f,
                "  {fault:<9} {ok:>6} / {aborted:>6} / {refused:>6} / {unknown:>4}   answered {:>5.1}%   up {:>5.1}% of {:.1} s",
                100.0 * (ok + aborted) as f64 / all as f64,
                100.0 * up as f64 / slices.max(1) as f64,
                (slices as u64 * UP_SLICE_MS) as f64 / 1e3
            )?;
        }
        writeln!(f, "  (up: the share of {UP_SLICE_MS} ms slices in which an operation completed ok)")?;
        writeln!(f, "faults held: {}", self.windows.len())?;
        let dark = self.ok_per_second.iter().filter(|n| **n == 0).count();
        writeln!(f, "seconds with no operation answered ok: {dark} of {}", self.ok_per_second.len())?;
        let per_second: Vec<String> = self.ok_per_second.iter().map(|n| n.to_string()).collect();
        write!(f, "operations ok per second: {}", per_second.join(" "))
    }
}
