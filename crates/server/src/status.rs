//! What the admin API and tests see of a vnode — its place in the tree, its metadata version, and
//! a digest per partition replica (equal digests on a partition's replicas mean equal data) — and
//! of a cut process run from this host (`CutReport`). Plain data, low in the crate: the driver,
//! the host, the front ends and the metrics all read it.
use std::collections::BTreeMap;
use waymark_core::alter::{AlterNode, AlterSeq, ManagerVnode, Term};
use waymark_core::{PartitionId, Vnode};

/// A vnode as seen from outside, for the admin API and tests.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VnodeStatus {
    pub id: String,
    pub kind: &'static str,
    pub parent: Option<String>,
    /// The children this vnode heard from recently (configured or adopted); none at a leaf.
    pub children: Vec<String>,
    pub follows_primary_parent: bool,
    pub metadata_term: Term,
    /// The root term promised (or claimed, at a root).
    pub promised_term: Term,
    /// At a root: the term it won.
    pub leading_term: Option<Term>,
    pub metadata_seq: AlterSeq,
    pub keys: usize,
    /// What this vnode's data takes in memory: key and value bytes plus an estimate per entry
    /// (`waymark_core::tally::ENTRY_OVERHEAD_BYTES`); what `limits.maxmemory` is held to.
    pub data_bytes: u64,
    /// Keys of the partitions whose primary replica this vnode holds.
    pub primary_keys: usize,
    /// Of `primary_keys`, those of each database, 0 to 15 (`DBSIZE` after `SELECT`, `INFO
    /// keyspace`).
    pub primary_dbs: Vec<DbKeys>,
    pub prepared: usize,
    /// Replies held for real-time safety until every vnode started a cut.
    pub held_replies: usize,
    /// GETs waiting for a prepared write on their key.
    pub waiting_reads: usize,
    pub running_cut: Option<u64>,
    /// Per partition replica held here: a digest of its keys, versions and values, and the count
    /// of its entries (`Tally::digest_text`); equal on replicas that hold the same data.
    pub partitions: BTreeMap<u32, String>,
    /// Per partition replica held here: the epoch of the chain this vnode routes it by (above 0
    /// once a failover changed it).
    pub epochs: BTreeMap<u32, u64>,
    /// Per partition replica held here: the chain this vnode routes it by, primary first (its
    /// copies; learners are not copies yet).
    pub chains: BTreeMap<u32, Vec<String>>,
    /// Partitions this vnode is catching up on as a learner (issue 33): not among `partitions`
    /// until it is a copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learning: Vec<u32>,
    /// Pages of partitions this vnode sent to learners as their primary, and entries it installed
    /// from pages as a learner, since it started.
    #[serde(default)]
    pub copy_pages_served: u64,
    #[serde(default)]
    pub copied_entries: u64,
    pub checkpoints: u64,
}

/// A cut process run on the live cluster (`Request::Cut` to a manager's operator, or to the cut
/// coordinator under `versions`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CutReport {
    pub cut: u64,
    pub ok: bool,
    /// Each phase, in milliseconds: START, STARTED, FINISH, END on the tree; under `versions`
    /// the coordinator's four (snp_version, map, late transactions, skip set).
    pub phases_ms: Vec<f64>,
    /// From the request to the answer, in milliseconds, as this host measured it.
    pub took_ms: f64,
    /// The strategy that took it.
    pub strategy: waymark_core::CutStrategy,
    /// The vnode that ran it: a manager whose operator ran it, or the cut coordinator.
    pub through: String,
    /// md5 (hex) of the cluster metadata that manager held when the cut ended.
    pub metadata_md5: String,
    /// Why the cut failed, in words (absent when it succeeded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Hosts recorded dead when the cut started: it did not reach them, and covers their
    /// partitions by the live replicas (failover).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// One database's keys among those a vnode (or the cluster) leads: how many, how many with a
/// deadline, and their deadlines' mean (Unix ms; 0 with none).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DbKeys {
    pub keys: u64,
    pub expires: u64,
    pub mean_deadline_ms: f64,
}

impl DbKeys {
    /// Adds `other`, whose deadlines sum to `other_deadlines_ms` (its mean times its count when
    /// it is a summary itself).
    pub fn add(&mut self, other: &DbKeys, other_deadlines_ms: f64) {
        let sum = self.mean_deadline_ms * self.expires as f64 + other_deadlines_ms;
        self.keys += other.keys;
        self.expires += other.expires;
        self.mean_deadline_ms = if self.expires == 0 { 0.0 } else { sum / self.expires as f64 };
    }

    /// Redis's `avg_ttl`: the mean time left, in ms, at `now_ms` (0 with no deadline).
    pub fn avg_ttl_ms(&self, now_ms: u64) -> u64 {
        if self.expires == 0 {
            return 0;
        }
        (self.mean_deadline_ms - now_ms as f64).max(0.0) as u64
    }
}

/// A store vnode's status, from its kept tallies: one step per partition, no pass over its keys
/// (this runs on the vnode's own thread, between its transactions).
pub fn store(v: &Vnode) -> VnodeStatus {
    let placement = v.placement();
    let tallies = v.tallies();
    let held: Vec<u32> = placement.copies_of(v.id()).map(|p| p.0).collect();
    let led: Vec<u32> = (0..placement.partitions()).filter(|p| placement.primary(PartitionId(*p)) == v.id()).collect();
    let primary_keys = led.iter().map(|p| tallies.partition(*p).live).sum::<u64>();
    let mut by_db = vec![DbKeys::default(); waymark_core::database::DATABASES as usize];
    for p in &led {
        let t = tallies.partition(*p);
        for (db, sum) in by_db.iter_mut().enumerate() {
            let deadlines_ms = t.deadlines_ms_by_db[db] as f64;
            sum.add(
                &DbKeys { keys: t.live_by_db[db], expires: t.expiring_by_db[db], mean_deadline_ms: 0.0 },
                deadlines_ms,
            );
        }
    }
    let total = tallies.total();
    let mut s = base(v.id().to_string(), "store", v.tree());
    s.keys = total.entries as usize;
    s.primary_keys = primary_keys as usize;
    s.primary_dbs = by_db;
    s.data_bytes = total.bytes;
    s.prepared = v.prepared_count();
    s.held_replies = v.held_replies();
    s.waiting_reads = v.waiting_reads();
    s.running_cut = v.running_cut().map(|c| c.0);
    s.epochs = held.iter().map(|p| (*p, placement.epoch(PartitionId(*p)))).collect();
    let chain = |p: u32| placement.copies(PartitionId(p)).iter().map(|v| v.to_string()).collect();
    s.learning = v.learning().into_iter().map(|(p, _)| p.0).collect();
    (s.copy_pages_served, s.copied_entries) = v.copy_counts();
    s.chains = held.iter().map(|p| (*p, chain(*p))).collect();
    s.partitions = held.iter().map(|p| (*p, tallies.partition(*p).digest_text())).collect();
    s
}

pub fn manager(m: &ManagerVnode) -> VnodeStatus {
    base(m.id().to_string(), "manager", Some(m.alter()))
}

fn base(id: String, kind: &'static str, tree: Option<&AlterNode>) -> VnodeStatus {
    VnodeStatus {
        id,
        kind,
        parent: tree.and_then(|t| t.parent()).map(|p| p.to_string()),
        children: tree.map(|t| t.working_children().iter().map(|c| c.to_string()).collect()).unwrap_or_default(),
        follows_primary_parent: tree.is_none_or(|t| t.follows_primary_parent()),
        metadata_term: tree.map_or(Term::ZERO, |t| t.metadata().term()),
        promised_term: tree.map_or(Term::ZERO, |t| t.promised_term()),
        leading_term: tree.and_then(|t| t.leading_term()),
        metadata_seq: tree.map_or(AlterSeq::ZERO, |t| t.metadata().seq()),
        keys: 0,
        data_bytes: 0,
        primary_keys: 0,
        primary_dbs: vec![],
        prepared: 0,
        held_replies: 0,
        waiting_reads: 0,
        running_cut: None,
        partitions: BTreeMap::new(),
        epochs: BTreeMap::new(),
        chains: BTreeMap::new(),
        learning: vec![],
        copy_pages_served: 0,
        copied_entries: 0,
        checkpoints: 0,
    }
}
