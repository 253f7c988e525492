//! What the cluster metadata holds, as typed views over its records (DESIGN §6):
//!
//! | key | value |
//! | --- | --- |
//! | `config/<name>` | a setting, e.g. `config/real_time_safety` = `on` |
//! | `host/<host>` | `alive` or `dead` — the host list, kept apart from the vnode list |
//! | `vnode/<kind>@<host>` | its parent queue in priority order, `primary,secondary,…` (empty for the root) |
//! | `state/<kind>@<host>` | `working` or `down`, as its parent last saw it |
//! | `placement/<partition>` | the replica chain, `primary,backup,…`, after its first change `<epoch>;primary,…` (`ChainRecord`) |
//! | `placement/members` | every store vnode, `a,b,…` (those holding no partition too) |
//! | `cut/<id>` | the cut process: `START` … `END:ok` (the snapshot catalog) or `END:failed` |

use super::metadata::{AlterRecord, Metadata};
use crate::cut::operator::CutScope;
use crate::ids::PartitionId;
use crate::ids::VnodeId;
use crate::placement::{ChainRecord, Placement};

pub const ALIVE: &[u8] = b"alive";
pub const DEAD: &[u8] = b"dead";
pub const WORKING: &[u8] = b"working";
pub const DOWN: &[u8] = b"down";

/// A vnode of the tree with its parent queue: the primary parent, then the secondary parents its
/// siblings' hosts would start, in election order (empty for the root).
pub struct VnodeEntry<'a> {
    pub id: &'a VnodeId,
    pub parents: Vec<VnodeId>,
}

impl<'a> VnodeEntry<'a> {
    pub fn of(cfg: &'a super::AlterConfig) -> Self {
        VnodeEntry { id: &cfg.id, parents: cfg.parent_queue() }
    }
}

/// A setting the cluster is created with: `config/<name>` = `value`, e.g. `real_time_safety` = `on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

impl<'a> Setting<'a> {
    pub fn new(name: &'a str, value: &'a str) -> Self {
        Setting { name, value }
    }
}

/// The parent queue the metadata records for `vnode`.
pub fn parent_queue(m: &Metadata, vnode: &VnodeId) -> Vec<VnodeId> {
    let value = m.get(&format!("vnode/{vnode}")).unwrap_or_default();
    std::str::from_utf8(value).unwrap_or_default().split(',').filter_map(VnodeId::parse).collect()
}

/// The metadata a cluster is created with.
pub fn genesis<'a>(
    config: &[Setting<'_>],
    vnodes: impl IntoIterator<Item = VnodeEntry<'a>>,
    placement: Option<&Placement>,
) -> Metadata {
    let mut records: Vec<(String, Vec<u8>)> =
        config.iter().map(|s| (format!("config/{}", s.name), s.value.as_bytes().to_vec())).collect();
    for v in vnodes {
        let queue: Vec<String> = v.parents.iter().map(|p| p.to_string()).collect();
        records.push((format!("vnode/{}", v.id), queue.join(",").into_bytes()));
        records.push((format!("state/{}", v.id), WORKING.to_vec()));
        records.push((format!("host/{}", v.id.host), ALIVE.to_vec()));
    }
    for p in placement.into_iter().flat_map(|p| (0..p.partitions()).map(move |i| (i, p.record(PartitionId(i))))) {
        records.push((format!("placement/{}", p.0), p.1.encode()));
    }
    if let Some(p) = placement {
        let members: Vec<String> = p.vnodes().iter().map(|v| v.to_string()).collect();
        records.push(("placement/members".to_string(), members.join(",").into_bytes()));
    }
    Metadata::genesis(records)
}

/// The replica chains the metadata records with their epochs, partition by partition.
pub fn placement_chains(m: &Metadata) -> Vec<ChainRecord> {
    let mut out: Vec<(u32, ChainRecord)> =
        m.records().filter_map(|(k, v)| Some((partition_key(k)?, ChainRecord::parse(v)?))).collect();
    out.sort_by_key(|(p, _)| *p);
    out.into_iter().map(|(_, c)| c).collect()
}

/// The partition a metadata key names, if it is `placement/<partition>`.
pub fn partition_key(key: &str) -> Option<u32> {
    key.strip_prefix("placement/")?.parse().ok()
}

/// The record that sets partition `p`'s chain.
pub fn chain_record(p: PartitionId, chain: &ChainRecord) -> AlterRecord {
    AlterRecord::set(format!("placement/{}", p.0), chain.encode())
}

/// The key of an alteration that sets several partitions' chains at once (`alter::promote`);
/// each copy of the metadata applies it as the `placement/<p>` records it carries, all or none
/// (`Metadata::apply`), and keeps no record under this key.
pub const CHAINS_KEY: &str = "placement/chains";

/// One alteration setting every chain of `chains`: lines `<partition>=<chain record>`.
pub fn chains_record(chains: &[(PartitionId, ChainRecord)]) -> AlterRecord {
    let lines: Vec<String> =
        chains.iter().map(|(p, c)| format!("{}={}", p.0, String::from_utf8_lossy(&c.encode()))).collect();
    AlterRecord::set(CHAINS_KEY, lines.join("\n"))
}

/// The `placement/<p>` records a `chains_record` value carries; `None` if it is malformed.
pub fn chains_of(value: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let text = std::str::from_utf8(value).ok()?;
    let line = |l: &str| {
        let (p, chain) = l.split_once('=')?;
        let p: u32 = p.parse().ok()?;
        ChainRecord::parse(chain.as_bytes())?;
        Some((format!("placement/{p}"), chain.as_bytes().to_vec()))
    };
    text.split('\n').map(line).collect()
}

/// The cluster setting `failover`: whether the root promotes replicas (`alter::promote`) and store
/// vnodes follow placement changes (`txn::promotion`).
pub fn failover_on(m: &Metadata) -> bool {
    m.get("config/failover") == Some(b"on".as_slice())
}

/// The cluster setting `catch_up` (with `failover`): whether the root names learners for
/// partitions with fewer members than `replicas` and store vnodes copy them (`crate::catch_up`).
pub fn catch_up_on(m: &Metadata) -> bool {
    failover_on(m) && m.get("config/catch_up") == Some(b"on".as_slice())
}

/// The cluster setting `replicas`: how many members the root keeps in every partition's chain
/// when catch-up is on (`None` when unset or unreadable: nothing is added).
pub fn replicas(m: &Metadata) -> Option<usize> {
    m.get("config/replicas").and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

/// The cluster setting `replace_after_ms`: how long a partition stays with fewer than `replicas`
/// members before the root gives it a learner on a host that holds other partitions (a vnode
/// that holds none — its host came back, or is new — is named at once). 60 s when unset.
pub fn replace_after_us(m: &Metadata) -> u64 {
    let ms: Option<u64> = m.get("config/replace_after_ms").and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
    ms.unwrap_or(60_000).saturating_mul(1000)
}

/// The cluster setting `copy_bytes_per_s`: how fast a learner copies a partition (keys and
/// values), `None` when unset (as fast as pages come).
pub fn copy_bytes_per_s(m: &Metadata) -> Option<u64> {
    m.get("config/copy_bytes_per_s").and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()).filter(|r| *r > 0)
}

/// Whether the metadata records `vnode` down (`state/<vnode>` = `down`).
pub fn vnode_down(m: &Metadata, vnode: &VnodeId) -> bool {
    m.get(&format!("state/{vnode}")) == Some(DOWN)
}

/// The cluster setting `min_copies`: a write to a partition with fewer replicas in its chain is
/// refused (issue 30, item 6); 1 (every write taken while a copy lives) when unset or unreadable.
pub fn min_copies(m: &Metadata) -> usize {
    let value = m.get("config/min_copies").and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
    value.unwrap_or(1).max(1)
}

/// Whether the metadata records `host` dead.
pub fn host_dead(m: &Metadata, host: &str) -> bool {
    m.get(&format!("host/{host}")) == Some(DEAD)
}

/// The placement the metadata records, if it records a valid one.
pub fn placement(m: &Metadata) -> Option<Placement> {
    let members = std::str::from_utf8(m.get("placement/members")?).ok()?;
    let members = members.split(',').map(VnodeId::parse).collect::<Option<Vec<_>>>()?;
    Placement::from_chains(placement_chains(m), members)
}

/// Why no cut can start now (issue 30, item 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutRefused {
    /// A chain still holds a replica of a host recorded dead: that partition has no copy known
    /// whole and reachable until the root's promotion drops it (`alter::promote`).
    PartitionsMoving,
}

impl CutRefused {
    /// The refusal as a client's error.
    pub fn why(self) -> &'static str {
        match self {
            CutRefused::PartitionsMoving => "TRYAGAIN a dead host's partitions are still moving to their replicas",
        }
    }
}

/// The store vnodes a cut started now must reach, with failover on (issue 30, item 7): every
/// member of the placement whose host the metadata does not record dead, and the view they were
/// chosen from (`cut_view`). A cut covers the replicas of the placement in force: a dead host's
/// partitions are covered by their live replicas once a promotion dropped it from their chains,
/// and until then by nothing. `Ok(None)`: failover is off or no placement is recorded — a cut
/// reaches every store vnode.
pub fn cut_members(m: &Metadata) -> Result<Option<CutScope>, CutRefused> {
    let Some(p) = placement(m).filter(|_| failover_on(m)) else { return Ok(None) };
    let dead = |v: &VnodeId| host_dead(m, &v.host);
    if (0..p.partitions()).any(|i| p.copies(PartitionId(i)).iter().any(dead)) {
        return Err(CutRefused::PartitionsMoving);
    }
    let leaves = p.vnodes().iter().filter(|v| !dead(v)).count() as u64;
    Ok(Some(CutScope { leaves, view: Some(cut_view(m)), left_out: dead_hosts(m) }))
}

/// The cluster a cut is started over, as every copy of the metadata at one version tells it alike:
/// the hosts recorded dead and the sum of the partitions' epochs (equal sums of two copies mean
/// equal epochs: `Placement::epoch_sum`). A store vnode applying a phase compares it with the view
/// the phase names (`cut::operator::CutScope`).
pub fn cut_view(m: &Metadata) -> String {
    let dead = dead_hosts(m);
    let epochs: u64 = placement_chains(m).iter().map(|c| c.epoch).sum();
    format!("{:08x}.{epochs}", crc32c::crc32c(dead.join(",").as_bytes()))
}

/// A host as the metadata records it (`host/<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedHost {
    pub host: String,
    pub alive: bool,
}

/// A vnode's state as the metadata records it (`state/<id>`: `WORKING` or `DOWN`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedState {
    pub vnode: VnodeId,
    pub state: Vec<u8>,
}

/// Hosts the metadata lists, and whether each is alive.
pub fn hosts(m: &Metadata) -> Vec<RecordedHost> {
    let host = |(k, v): (&String, &Vec<u8>)| {
        Some(RecordedHost { host: k.strip_prefix("host/")?.to_string(), alive: v.as_slice() == ALIVE })
    };
    m.records().filter_map(host).collect()
}

/// The hosts the metadata records dead, in key order.
pub fn dead_hosts(m: &Metadata) -> Vec<String> {
    hosts(m).into_iter().filter(|h| !h.alive).map(|h| h.host).collect()
}

/// Vnodes the metadata lists with their recorded state (a key that names no vnode is skipped).
pub fn states(m: &Metadata) -> Vec<RecordedState> {
    let state = |(k, v): (&String, &Vec<u8>)| {
        Some(RecordedState { vnode: VnodeId::parse(k.strip_prefix("state/")?)?, state: v.clone() })
    };
    m.records().filter_map(state).collect()
}

pub fn host_state(host: &str, alive: bool) -> AlterRecord {
    AlterRecord::set(format!("host/{host}"), if alive { ALIVE } else { DEAD })
}

/// Whether the metadata records a vnode on `host` that is not down (a host with no vnode listed
/// counts as alive: nothing says otherwise).
pub fn host_has_working_vnode(m: &Metadata, host: &str) -> bool {
    let suffix = format!("@{host}");
    let mut on_host = m.records().filter(|(k, _)| k.starts_with("state/") && k.ends_with(&suffix)).peekable();
    on_host.peek().is_none() || on_host.any(|(_, v)| v.as_slice() != DOWN)
}

/// Whether `key` records an observation (a vnode's state, a host's liveness): only the latest
/// observation of a key matters, so an older one not yet ordered can be dropped for it.
pub fn is_observation(key: &str) -> bool {
    key.starts_with("state/") || key.starts_with("host/")
}

pub fn vnode_state(v: &VnodeId, state: &[u8]) -> AlterRecord {
    AlterRecord::set(format!("state/{v}"), state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(h1: &str, chain0: &str) -> Metadata {
        Metadata::genesis([
            ("config/failover".to_string(), b"on".to_vec()),
            ("host/h1".to_string(), h1.as_bytes().to_vec()),
            ("host/h2".to_string(), b"alive".to_vec()),
            ("host/h3".to_string(), b"alive".to_vec()),
            ("placement/0".to_string(), chain0.as_bytes().to_vec()),
            ("placement/1".to_string(), b"store0@h2,store0@h3".to_vec()),
            ("placement/members".to_string(), b"store0@h1,store0@h2,store0@h3".to_vec()),
        ])
    }

    #[test]
    fn a_cut_reaches_the_live_hosts_once_a_dead_hosts_partitions_moved() {
        let all = cut_members(&cluster("alive", "store0@h1,store0@h2")).unwrap().unwrap();
        assert_eq!(all.leaves, 3);
        let moving = cluster("dead", "store0@h1,store0@h2");
        assert_eq!(cut_members(&moving), Err(CutRefused::PartitionsMoving), "h1 still holds partition 0");
        let moved = cut_members(&cluster("dead", "1;store0@h2")).unwrap().unwrap();
        assert_eq!(moved.leaves, 2, "store0@h1 is left out");
        assert_ne!(moved.view, all.view, "another host is dead and another epoch in force");
    }

    #[test]
    fn min_copies_is_one_unless_the_metadata_sets_more() {
        let m = cluster("alive", "store0@h1,store0@h2");
        assert_eq!(min_copies(&m), 1);
        let mut records: Vec<(String, Vec<u8>)> = m.records().map(|(k, v)| (k.clone(), v.clone())).collect();
        records.push(("config/min_copies".to_string(), b"2".to_vec()));
        assert_eq!(min_copies(&Metadata::genesis(records.clone())), 2);
        records.last_mut().expect("pushed").1 = b"two".to_vec();
        assert_eq!(min_copies(&Metadata::genesis(records)), 1, "an unreadable value asks nothing");
    }

    #[test]
    fn without_failover_a_cut_reaches_every_store_vnode() {
        let m = cluster("dead", "store0@h1,store0@h2");
        let off: Vec<(String, Vec<u8>)> =
            m.records().filter(|(k, _)| *k != "config/failover").map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(cut_members(&Metadata::genesis(off)), Ok(None));
    }
}
