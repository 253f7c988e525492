//! The nemesis's faults: a schedule drawn from the seed (printed, so a run can be replayed), one
//! fault at a time, each healed before the next; and the windows they actually held, for the report.

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt;
use std::str::FromStr;

/// What the nemesis can do to a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGKILL, then a restart when the window ends.
    Kill,
    /// SIGSTOP, then SIGCONT.
    Pause,
    /// The host's link to the bridge down (cut off from every host and client), then up.
    Isolate,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Isolate => "isolate",
        }
    }
}

impl FromStr for FaultKind {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<FaultKind> {
        match s {
            "kill" => Ok(FaultKind::Kill),
            "pause" => Ok(FaultKind::Pause),
            "isolate" => Ok(FaultKind::Isolate),
            "partition" | "loss" | "disk" => bail!(
                "fault `{s}` is not built yet (partitions other than a host cut off, packet loss and a full \
                 disk need nftables rules and a tmpfs: issue 31); choose among kill, pause, isolate"
            ),
            _ => bail!("unknown fault `{s}`: choose among kill, pause, isolate"),
        }
    }
}

/// One fault: `kind` on host `host` from `start_ms` to `end_ms` after the workload began.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: FaultKind,
    pub host: usize,
    pub start_ms: u64,
    pub end_ms: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, e) = (self.start_ms as f64 / 1e3, self.end_ms as f64 / 1e3);
        write!(f, "{:>6.1}–{:<6.1} s  {:<8} node{}", s, e, self.kind.name(), self.host + 1)
    }
}

/// Faults begin this long after the workload (the cluster settles, the bank is opened)...
const QUIET_START_MS: u64 = 2_000;
/// ...and end this long before it stops, so that the run's end shows the cluster healed.
const QUIET_END_MS: u64 = 3_000;
/// A fault lasts between these (a kill's window is the time the host stays down).
const FAULT_MS: std::ops::Range<u64> = 1_000..4_000;
/// Between two faults.
const GAP_MS: std::ops::Range<u64> = 1_000..3_000;

/// The schedule of `seed` over `seconds` of workload on `hosts` hosts, with `kinds` among the
/// faults. The first kill, if kills are asked for, is of node1: the host of the tree's root.
pub fn schedule(seed: u64, seconds: u64, hosts: usize, kinds: &[FaultKind]) -> Vec<Fault> {
    assert!(!kinds.is_empty() && hosts > 0, "faults to draw from");
    let mut rng = StdRng::seed_from_u64(seed);
    let end_ms = (seconds * 1_000).saturating_sub(QUIET_END_MS);
    let mut at_ms = QUIET_START_MS;
    let mut faults: Vec<Fault> = vec![];
    loop {
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let first_kill = kind == FaultKind::Kill && !faults.iter().any(|f| f.kind == FaultKind::Kill);
        let host = if first_kill { 0 } else { rng.gen_range(0..hosts) };
        let length_ms = rng.gen_range(FAULT_MS);
        if at_ms + length_ms > end_ms {
            return faults;
        }
        faults.push(Fault { kind, host, start_ms: at_ms, end_ms: at_ms + length_ms });
        at_ms += length_ms + rng.gen_range(GAP_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_the_same_for_the_same_seed_and_ends_before_the_quiet_end() {
        let kinds = [FaultKind::Kill, FaultKind::Pause, FaultKind::Isolate];
        let a = schedule(7, 30, 3, &kinds);
        let b = schedule(7, 30, 3, &kinds);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(!a.is_empty());
        assert!(a.iter().all(|f| f.start_ms >= QUIET_START_MS && f.end_ms <= 27_000 && f.host < 3));
        assert!(a.windows(2).all(|w| w[0].end_ms < w[1].start_ms), "one fault at a time");
    }

    #[test]
    fn the_first_kill_is_of_the_roots_host() {
        let s = schedule(3, 60, 3, &[FaultKind::Kill]);
        assert_eq!(s[0].host, 0);
    }

    #[test]
    fn faults_not_built_are_refused_by_name() {
        let e = "disk".parse::<FaultKind>().unwrap_err().to_string();
        assert!(e.contains("not built yet"), "{e}");
        assert!("bogus".parse::<FaultKind>().is_err());
    }
}
