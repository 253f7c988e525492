//! What one simulated run is made of. Every field is either given on the command line or drawn
//! from the seed, so a seed and a config name one run exactly.

use waymark_core::{Breaks, CutStrategy};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    Bank,
    Append,
    /// A cache: values set with and without deadlines, read, given deadlines and persisted
    /// (`workloads::expiry`, checker `expiry`).
    Expiry,
    /// Hashes: fields added to and deleted, hashes read whole, deleted, replaced, renamed and
    /// expired (`workloads::hash`, checker `collections`).
    Hash,
    /// Sets: members added, removed, moved, popped, sets read whole, stored as unions and
    /// intersections, deleted and expired (`workloads::sets`, checker `collections`).
    Sets,
    /// Lists: elements pushed, popped, moved, blocked on, trimmed, removed and inserted, lists
    /// read, deleted and expired (`workloads::lists`, checker `collections`).
    Lists,
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub workload: WorkloadKind,
    pub vnodes: usize,
    pub replicas: usize,
    pub partitions: u32,
    pub clients: usize,
    /// Clients issue new transactions for this long; then the world heals and settles.
    pub duration_us: u64,
    /// After healing, the run goes on until nothing is pending, but no longer than this.
    pub settle_max_us: u64,
    pub faults: bool,
    /// With `faults`: duplicated deliveries and long delays (`net::Mishap`), drawn from a stream
    /// of their own. Off in the regression seeds kept before they existed, so they keep their
    /// scenario.
    pub net_faults: bool,
    /// With `failover`: a host cut off while it runs and a host killed right after a commit
    /// decision (`faults::plan_failover`). Off in the failover regression seeds kept before they
    /// existed (2026-12-06), so they keep their scenario.
    pub aimed_faults: bool,
    pub cuts: bool,
    pub strategy: CutStrategy,
    pub breaks: Breaks,
    /// The cluster setting: hold replies that reveal an after-transaction until STARTED.
    pub real_time_safety: bool,
    /// The cluster setting `failover`: the root promotes replicas of hosts recorded dead
    /// (`alter::promote`, `--failover`).
    pub failover: bool,
    /// The cluster setting `catch_up` (with `failover`): the root names learners for partitions
    /// left with fewer than `replicas` members, which copy them and become copies again
    /// (`waymark_core::catch_up`, `--catch-up`; off by default, so the pinned hashes stay).
    pub catch_up: bool,
    /// Clients also scan the whole keyspace now and then (`SCAN`, `txn::scan`), checked by
    /// `checkers::scans` (`--scans`; off by default, so the pinned trace hashes stay).
    pub scans: bool,
    /// A cut's `Start` reaches each vnode up to this much later than a transaction message would
    /// (the cut process travels a tree of hops); widens the windows in which a vnode learns of a
    /// cut from a coloured message first.
    pub cut_start_spread_us: u64,
    /// Run the cut process on the cluster tree (alterations over manager vnodes).
    pub tree: bool,
    pub fanout: usize,
    pub trace: bool,
    /// `versions` strategy: versions a near leaves below its `snp_version` for transactions "that
    /// took a version but are not registered yet" — the model of seed 002's problem 1
    /// (`VnodeConfig::versions_unregistered`).
    pub versions_unregistered: u32,
}

impl SimConfig {
    pub fn new(seed: u64, workload: WorkloadKind) -> Self {
        SimConfig {
            seed,
            workload,
            vnodes: 3,
            replicas: 2,
            partitions: 8,
            clients: 6,
            duration_us: 1_000_000,
            settle_max_us: 60_000_000,
            faults: true,
            net_faults: true,
            aimed_faults: true,
            cuts: false,
            strategy: CutStrategy::Consistent,
            breaks: Breaks::default(),
            real_time_safety: true,
            failover: false,
            catch_up: false,
            scans: false,
            cut_start_spread_us: 20_000,
            tree: false,
            fanout: 2,
            trace: false,
            versions_unregistered: 2,
        }
    }
}
