//! What a vnode is told when it is created: who it is, where data lives, its limits.

use crate::breaks::Breaks;
use crate::ids::VnodeId;
use crate::placement::Placement;
use std::sync::Arc;

/// How the cut process snapshots the cluster (DESIGN §4, comparison strategies). Serialized by
/// its name (a snapshot's manifest records it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CutStrategy {
    /// Seed 000: non-blocking, coloured messages, `tx_cut` stamps.
    #[default]
    Consistent,
    /// Stop starting transactions everywhere, drain, write the marker, resume.
    Blocking,
    /// Seed 002: three phases around each near's snapshot version (`cut::versions`).
    Versions,
}

impl CutStrategy {
    /// Every strategy under the name a setting or a flag gives it: one line a variant.
    const NAMES: &'static [(&'static str, CutStrategy)] = &[
        ("consistent", CutStrategy::Consistent),
        ("blocking", CutStrategy::Blocking),
        ("versions", CutStrategy::Versions),
    ];

    /// The name `FromStr` reads and `Display` writes.
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, s)| *s == self).map(|(n, _)| *n).expect("every variant is in NAMES")
    }

    /// The valid names, in order, for messages and help.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::NAMES.iter().map(|(n, _)| *n)
    }
}

/// A name that is not a [`CutStrategy`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cut strategy `{found}`: expected one of {}", CutStrategy::names().collect::<Vec<_>>().join(", "))]
pub struct UnknownStrategy {
    pub found: String,
}

impl std::str::FromStr for CutStrategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, v)| *v).ok_or_else(|| UnknownStrategy { found: s.into() })
    }
}

impl std::fmt::Display for CutStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Timeouts, in microseconds of the driver's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// The near aborts a 2PC transaction (or reports a 1PC one as unknown) after this long.
    pub prepare_timeout_us: u64,
    /// A participant first asks the first committer about a prepared transaction after this long.
    pub in_doubt_timeout_us: u64,
    /// Cap of the doubling back-off between two such questions.
    pub in_doubt_backoff_max_us: u64,
    pub read_timeout_us: u64,
    /// The coordinator fails a cut whose phase is not confirmed by every vnode in this time.
    pub cut_phase_timeout_us: u64,
    /// A reply held for real-time safety is released after this long (its cut then fails here).
    pub held_reply_timeout_us: u64,
    /// A blocking cut of the tree (`cut::blocking`) lifts its pause after this long even without
    /// its END — the cut then fails here: a pause never outlives a cut given up or orphaned.
    pub pause_max_us: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            prepare_timeout_us: 200_000,
            in_doubt_timeout_us: 400_000,
            in_doubt_backoff_max_us: 3_200_000,
            read_timeout_us: 200_000,
            cut_phase_timeout_us: 1_000_000,
            held_reply_timeout_us: 2_000_000,
            pause_max_us: 2_000_000,
        }
    }
}

/// Limits that protect a vnode from unbounded work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Transactions this vnode coordinates at once; more are refused.
    pub near_txs_max: usize,
    /// Keys (reads + writes) in one transaction.
    pub txn_keys_max: usize,
    /// Client transactions queued while a blocking cut pauses this vnode.
    pub paused_queue_max: usize,
    /// The largest value a write a primary evaluates (`INCRBY`, `APPEND`) may leave: past it the
    /// transaction aborts (`AbortReason::ValueTooLarge`) instead of storing it.
    pub value_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { near_txs_max: 10_000, txn_keys_max: 65_536, paused_queue_max: 10_000, value_max_bytes: 4 << 20 }
    }
}

#[derive(Clone, Debug)]
pub struct VnodeConfig {
    pub id: VnodeId,
    pub placement: Arc<Placement>,
    /// The vnode that runs the cut process (until the tree issue moves it onto alterations).
    pub cut_coordinator: VnodeId,
    pub strategy: CutStrategy,
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub breaks: Breaks,
    /// Hold client replies that reveal an *after* transaction until STARTED (cluster setting).
    pub real_time_safety: bool,
    /// This vnode's place in the cluster tree: when set, the cut process runs on alterations
    /// (DESIGN §6) instead of the coordinator.
    pub tree: Option<crate::alter::AlterConfig>,
    /// The metadata the cluster was created with (the tree role starts from it).
    pub genesis: crate::alter::Metadata,
    /// `versions` strategy, the model of seed 002's problem 1: how many versions are held by
    /// transactions "that took a version but are not registered yet" when a near fixes its
    /// `snp_version`. A vnode assigns and registers in one step, so a real cluster has 0; the
    /// simulator sets more to reproduce Ignite's race.
    pub versions_unregistered: u32,
}

impl VnodeConfig {
    pub fn new(id: VnodeId, placement: Arc<Placement>, cut_coordinator: VnodeId) -> Self {
        VnodeConfig {
            id,
            placement,
            cut_coordinator,
            strategy: CutStrategy::default(),
            timeouts: Timeouts::default(),
            limits: Limits::default(),
            breaks: Breaks::default(),
            real_time_safety: true,
            tree: None,
            genesis: Default::default(),
            versions_unregistered: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_round_trips_through_its_name() {
        for name in CutStrategy::names() {
            let strategy: CutStrategy = name.parse().unwrap();
            assert_eq!(strategy.to_string(), name);
        }
        assert_eq!("consistent".parse(), Ok(CutStrategy::Consistent));
        assert_eq!("blocking".parse(), Ok(CutStrategy::Blocking));
        assert_eq!("versions".parse(), Ok(CutStrategy::Versions));
    }

    #[test]
    fn an_unknown_name_lists_the_valid_ones() {
        let err = "Blocking".parse::<CutStrategy>().unwrap_err();
        assert_eq!(err, UnknownStrategy { found: "Blocking".into() });
        assert_eq!(err.to_string(), "unknown cut strategy `Blocking`: expected one of consistent, blocking, versions");
    }
}
