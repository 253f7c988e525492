//! The nemesis's faults: a schedule drawn from the seed (printed, so a run can be replayed), one
//! fault at a time, each healed before the next; and the windows they actually held, for the report.

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
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
    /// Hosts cut apart by nftables rules inside their namespaces (a `Partition`); clients still
    /// reach every host.
    Partition,
    /// A host drops a share of the packets it sends and receives (an nftables rule).
    Loss,
    /// A host's data directory, a size-limited tmpfs, filled up; freed when the window ends (and
    /// the node restarted if it stopped meanwhile).
    Disk,
}

/// Every fault the nemesis can inject, by name.
pub const ALL: [FaultKind; 6] =
    [FaultKind::Kill, FaultKind::Pause, FaultKind::Isolate, FaultKind::Partition, FaultKind::Loss, FaultKind::Disk];

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Isolate => "isolate",
            FaultKind::Partition => "partition",
            FaultKind::Loss => "loss",
            FaultKind::Disk => "disk",
        }
    }

    /// Whether it needs nftables inside the namespaces.
    pub fn needs_nftables(self) -> bool {
        matches!(self, FaultKind::Partition | FaultKind::Loss)
    }
}

impl FromStr for FaultKind {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<FaultKind> {
        match ALL.iter().find(|k| k.name() == s) {
            Some(k) => Ok(*k),
            None => {
                let names: Vec<&str> = ALL.iter().map(|k| k.name()).collect();
                bail!("unknown fault `{s}`: choose among {}", names.join(", "))
            }
        }
    }
}

/// How a partition cuts the hosts apart (host indices). Clients, outside every namespace, still
/// reach every host: a host that answers them may have lost its peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Partition {
    /// The hosts of `minority` reach none of the others, and none of the others reach them (one
    /// host: that host isolated from its peers).
    Split { minority: Vec<usize> },
    /// `bridge` reaches every host; the others, in two sides around it, reach only their side.
    Bridge { bridge: usize, left: Vec<usize>, right: Vec<usize> },
    /// Packets from `from` to `to` are dropped; `to` still reaches `from`.
    OneWay { from: usize, to: usize },
}

impl Partition {
    /// Every (receiver, sender) pair whose packets are dropped at the receiver.
    pub fn drops(&self, hosts: usize) -> Vec<(usize, usize)> {
        let apart = |a: &[usize], b: &[usize]| -> Vec<(usize, usize)> {
            a.iter().flat_map(|&x| b.iter().flat_map(move |&y| [(x, y), (y, x)])).collect()
        };
        match self {
            Partition::Split { minority } => {
                let majority: Vec<usize> = (0..hosts).filter(|h| !minority.contains(h)).collect();
                apart(minority, &majority)
            }
            Partition::Bridge { left, right, .. } => apart(left, right),
            Partition::OneWay { from, to } => vec![(*to, *from)],
        }
    }

    /// One of the shapes, drawn: a minority of at most half the hosts, a bridge (3 hosts or
    /// more), or one way.
    fn draw(rng: &mut StdRng, hosts: usize) -> Partition {
        assert!(hosts >= 2, "a partition needs two hosts");
        let mut order: Vec<usize> = (0..hosts).collect();
        order.shuffle(rng);
        // 0: a split, 1: a bridge (which needs a host between two others), 2: one way.
        let shape = if hosts >= 3 { rng.gen_range(0..3) } else { 2 * rng.gen_range(0..2) };
        match shape {
            0 => Partition::Split { minority: sorted(&order[..rng.gen_range(1..=hosts / 2)]) },
            1 => {
                let (bridge, rest) = order.split_first().expect("hosts >= 3");
                let half = rest.len() / 2;
                Partition::Bridge { bridge: *bridge, left: sorted(&rest[..half]), right: sorted(&rest[half..]) }
            }
            _ => Partition::OneWay { from: order[0], to: order[1] },
        }
    }
}

fn sorted(hosts: &[usize]) -> Vec<usize> {
    let mut v = hosts.to_vec();
    v.sort_unstable();
    v
}

fn names(hosts: &[usize]) -> String {
    hosts.iter().map(|h| format!("node{}", h + 1)).collect::<Vec<_>>().join(",")
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Partition::Split { minority } if minority.len() == 1 => {
                write!(f, "{} apart from its peers", names(minority))
            }
            Partition::Split { minority } => write!(f, "minority {} apart", names(minority)),
            Partition::Bridge { bridge, left, right } => {
                write!(f, "{} | {} | {} (node{} bridges)", names(left), names(&[*bridge]), names(right), bridge + 1)
            }
            Partition::OneWay { from, to } => write!(f, "node{} → node{} dropped (one way)", from + 1, to + 1),
        }
    }
}

/// What a fault needs besides its kind and host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    None,
    Partition(Partition),
    /// The share of packets dropped, in percent.
    Loss {
        percent: u8,
    },
}

/// One fault: `kind` on host `host` (a partition: as `detail` says) from `start_ms` to `end_ms`
/// after the workload began.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: FaultKind,
    pub host: usize,
    pub detail: Detail,
    pub start_ms: u64,
    pub end_ms: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, e) = (self.start_ms as f64 / 1e3, self.end_ms as f64 / 1e3);
        write!(f, "{:>6.1}–{:<6.1} s  {:<9} ", s, e, self.kind.name())?;
        match &self.detail {
            Detail::None => write!(f, "node{}", self.host + 1),
            Detail::Partition(p) => write!(f, "{p}"),
            Detail::Loss { percent } => write!(f, "node{} loses {percent}%", self.host + 1),
        }
    }
}

/// Faults begin this long after the workload (the cluster settles, the bank is opened)...
const QUIET_START_MS: u64 = 2_000;
/// ...and end this long before it stops, so that the run's end shows the cluster healed.
const QUIET_END_MS: u64 = 3_000;
/// A fault lasts between these (a kill's window is the time the host stays down).
const FAULT_MS: std::ops::Range<u64> = 1_000..4_000;
/// The share of packets a lossy host drops, in percent.
const LOSS_PERCENT: std::ops::RangeInclusive<u8> = 10..=40;
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
        let detail = match kind {
            FaultKind::Partition => Detail::Partition(Partition::draw(&mut rng, hosts)),
            FaultKind::Loss => Detail::Loss { percent: rng.gen_range(LOSS_PERCENT) },
            _ => Detail::None,
        };
        let length_ms = rng.gen_range(FAULT_MS);
        if at_ms + length_ms > end_ms {
            return faults;
        }
        faults.push(Fault { kind, host, detail, start_ms: at_ms, end_ms: at_ms + length_ms });
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
    fn an_unknown_fault_is_refused_with_the_names_there_are() {
        let e = "bogus".parse::<FaultKind>().unwrap_err().to_string();
        assert!(e.contains("kill, pause, isolate, partition, loss, disk"), "{e}");
        assert!(ALL.iter().all(|k| k.name().parse::<FaultKind>().ok() == Some(*k)));
    }

    #[test]
    fn a_split_cuts_the_minority_from_the_majority_both_ways() {
        let drops = Partition::Split { minority: vec![2] }.drops(3);
        assert_eq!(drops.len(), 4);
        for other in [0, 1] {
            assert!(drops.contains(&(2, other)) && drops.contains(&(other, 2)));
        }
    }

    #[test]
    fn a_bridge_reaches_both_sides_and_a_one_way_partition_drops_one_direction() {
        let bridge = Partition::Bridge { bridge: 1, left: vec![0], right: vec![2] }.drops(3);
        assert_eq!(bridge, vec![(0, 2), (2, 0)]);
        assert_eq!(Partition::OneWay { from: 0, to: 2 }.drops(3), vec![(2, 0)]);
    }

    #[test]
    fn drawn_partitions_name_every_shape_and_only_hosts_there_are() {
        let mut rng = StdRng::seed_from_u64(5);
        let drawn: Vec<Partition> = (0..200).map(|_| Partition::draw(&mut rng, 5)).collect();
        assert!(drawn.iter().any(|p| matches!(p, Partition::Split { .. })));
        assert!(drawn.iter().any(|p| matches!(p, Partition::Bridge { .. })));
        assert!(drawn.iter().any(|p| matches!(p, Partition::OneWay { .. })));
        for p in &drawn {
            assert!(!p.drops(5).is_empty() && p.drops(5).iter().all(|&(a, b)| a < 5 && b < 5 && a != b), "{p:?}");
        }
        let two: Vec<Partition> = (0..50).map(|_| Partition::draw(&mut rng, 2)).collect();
        assert!(two.iter().all(|p| !matches!(p, Partition::Bridge { .. })));
    }
}
