//! The tree's counters, kept alike by both drivers of the tree (`--tree` and `--tree-only`) and
//! summed over seeds for the summaries.

/// The cut operator's alterations, by how they were answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperatorAlterations {
    pub answered_ok: u64,
    pub answered_failed: u64,
}

#[derive(Clone, Debug, Default)]
pub struct TreeStats {
    pub failovers: u64,
    pub switch_backs: u64,
    pub retried: u64,
    pub alterations_ok: u64,
    pub alterations_failed: u64,
    /// Of those, the cut operator's (the liveness floor's).
    pub operator_alterations: OperatorAlterations,
    pub manager_crashes: u64,
    pub md5_corruptions: u64,
    pub secondaries_started: u64,
    pub secondaries_stopped: u64,
    /// Vnodes restarted because their parent said so (boot loading by parent).
    pub boots_by_parent: u64,
    /// Root terms won (each new root orders `root` = its name and term first).
    pub root_terms: u64,
    /// Of those, won by a secondary root standing in for a dead primary.
    pub secondary_root_terms: u64,
    /// Messages sent around a dead link through the reachability graph.
    pub relayed: u64,
    /// `--failover`: partitions whose chain the root changed, summed over seeds.
    pub promoted_partitions: u64,
    /// `--catch-up`: partitions a store vnode joined anew as a learner (`PartitionReset`s), those
    /// it holds as a copy at the end, and learners still catching up at the end.
    pub rejoined: u64,
    pub rejoined_copies: u64,
    pub learners_at_end: u64,
    /// `--failover`: for each host crash and each partition it held, how long until a store vnode
    /// first routed by a chain without it (the failover window), in µs.
    pub failover_windows_us: Vec<u64>,
    /// `--failover`: partition-microseconds of the workload, and of those, the ones in which some
    /// running store vnode served the partition as its primary (`Vnode::serves_primary_of`).
    pub availability: Availability,
}

/// The share of time partitions had a primary that served, counted between events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Availability {
    pub partition_us: u64,
    pub served_us: u64,
}

impl Availability {
    /// `served` of `partitions` partitions had a serving primary for the last `us`.
    pub fn add(&mut self, us: u64, served: u64, partitions: u64) {
        assert!(served <= partitions);
        self.partition_us += us * partitions;
        self.served_us += us * served;
    }

    /// The share served, 1.0 when nothing was counted.
    pub fn share(&self) -> f64 {
        if self.partition_us == 0 {
            return 1.0;
        }
        self.served_us as f64 / self.partition_us as f64
    }
}

impl TreeStats {
    pub fn add(&mut self, o: &TreeStats) {
        self.failovers += o.failovers;
        self.switch_backs += o.switch_backs;
        self.retried += o.retried;
        self.alterations_ok += o.alterations_ok;
        self.alterations_failed += o.alterations_failed;
        self.operator_alterations.answered_ok += o.operator_alterations.answered_ok;
        self.operator_alterations.answered_failed += o.operator_alterations.answered_failed;
        self.manager_crashes += o.manager_crashes;
        self.md5_corruptions += o.md5_corruptions;
        self.secondaries_started += o.secondaries_started;
        self.secondaries_stopped += o.secondaries_stopped;
        self.boots_by_parent += o.boots_by_parent;
        self.root_terms += o.root_terms;
        self.secondary_root_terms += o.secondary_root_terms;
        self.relayed += o.relayed;
        self.promoted_partitions += o.promoted_partitions;
        self.rejoined += o.rejoined;
        self.rejoined_copies += o.rejoined_copies;
        self.learners_at_end += o.learners_at_end;
        self.failover_windows_us.extend(&o.failover_windows_us);
        self.availability.partition_us += o.availability.partition_us;
        self.availability.served_us += o.availability.served_us;
    }
}
