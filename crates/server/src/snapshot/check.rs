//! `waymark snapshot check` (DESIGN §5): every problem of a chain, each naming its file — missing
//! files, sizes, checksums, gaps in a vnode's log across the chain, records that do not decode, a
//! vnode without the target cut's `CutFinish`, a transaction on different sides of the cut on the
//! replicas of a partition, and replicas whose data at the cut differ.

use super::chain::{chain_problems, file_problem, load_chain, Chain, Member, Problem};
use super::manifest::VnodeFiles;
use super::replay::{read_vnode_log, replay_to_cut};
use super::restore::{partition_data, VnodeState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use waymark_core::{Branch, Placement, Record, ResolvedWrite, TxId};

/// What a check found.
pub struct Report {
    pub problems: Vec<Problem>,
    /// The member checked up to (0 = the full snapshot) and its cut, once the chain was read.
    pub target: Option<(u32, u64)>,
    pub files: usize,
    pub bytes: u64,
    pub vnodes: usize,
    /// The target's partitions held by fewer copies than the cluster's replicas, with their
    /// copies: accepted (a host was down at the cut, `hosts_down`), and said.
    pub fewer_copies: Vec<(u32, usize)>,
    pub replicas: usize,
    pub hosts_down: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the chain `name` up to `increment` (default: its newest complete increment).
pub fn check(root: &Path, name: &str, increment: Option<u32>) -> Report {
    let mut report = Report {
        problems: vec![],
        target: None,
        files: 0,
        bytes: 0,
        vnodes: 0,
        fewer_copies: vec![],
        replicas: 0,
        hosts_down: vec![],
    };
    let chain = match load_chain(root, name, increment) {
        Ok(chain) => chain,
        Err(e) => {
            report.problems.push(Problem::new(root.join(name), e.to_string()));
            return report;
        }
    };
    let target = &chain.target().manifest;
    report.target = Some((target.kind.number(), target.cut));
    report.vnodes = target.vnodes.len();
    report.fewer_copies = target.fewer_copies();
    report.replicas = target.cluster.replicas;
    report.hosts_down = target.hosts_down.clone();
    report.problems.extend(chain_problems(&chain));
    for (member, file) in chain.files() {
        report.files += 1;
        report.bytes = report.bytes.saturating_add(file.size);
        report.problems.extend(file_problem(member, file));
    }
    for vnode in chain.vnodes() {
        report.problems.extend(log_gaps(&chain, &vnode));
    }
    report.problems.extend(check_replay(&chain));
    report
}

/// The segment files present on disk cover the vnode's log without a hole: each member from its
/// `from` to its `upto` (the members' `from`/`upto` agreement is `chain_problems`' part).
fn log_gaps(chain: &Chain, vnode: &str) -> Vec<Problem> {
    let mut out = vec![];
    for member in &chain.members {
        let Some(files) = member.manifest.vnode(vnode) else { continue };
        out.extend(member_gaps(member, vnode, files));
    }
    out
}

fn member_gaps(member: &Member, vnode: &str, files: &VnodeFiles) -> Vec<Problem> {
    let mut out = vec![];
    let mut expected = files.from.segment;
    let mut missing = vec![];
    for entry in &files.segments {
        let file = member.dir.join(&entry.path);
        let Ok(meta) = std::fs::metadata(&file) else {
            missing.push(entry.path.clone());
            continue;
        };
        let base = segment_base(&file);
        if base != Some(expected) {
            let what = format!(
                "gap in the log of {vnode}: nothing covers global offsets {expected}..{} (missing: {})",
                base.map_or("?".into(), |b| b.to_string()),
                if missing.is_empty() { "no file listed".into() } else { missing.join(", ") }
            );
            out.push(Problem::new(&file, what));
        }
        missing.clear();
        expected = base.unwrap_or(expected) + meta.len();
    }
    let end = files.upto.segment;
    if expected != end || !missing.is_empty() {
        let what = format!(
            "gap in the log of {vnode}: it ends at global offset {expected}, the manifest says {end} (missing: {})",
            if missing.is_empty() { "no file listed".into() } else { missing.join(", ") }
        );
        out.push(Problem::new(member.dir.join(vnode).join("wal"), what));
    }
    out
}

/// The base a segment file's name gives.
fn segment_base(file: &Path) -> Option<u64> {
    let name = file.file_name()?.to_str()?;
    let parsed = waymark_wal::segment::parse_segment_file_name(name)?;
    parsed.ok()
}

/// Replays every vnode to the target cut, then checks closure and replica data.
fn check_replay(chain: &Chain) -> Vec<Problem> {
    let mut problems = vec![];
    let placement = match chain.placement() {
        Ok(p) => p,
        Err(p) => return vec![p],
    };
    let mut states = vec![];
    let mut sides = BTreeMap::new();
    for v in &chain.target().manifest.vnodes {
        let log = match read_vnode_log(chain, &v.vnode) {
            Ok(log) => log,
            Err(e) => {
                problems.push(Problem::new(chain.target().dir.join(&v.vnode), e.to_string()));
                continue;
            }
        };
        let seen = touched(&log.base.prepared, &log.records, &placement);
        let (log_bytes, records) = (log.log_bytes, log.records.len() as u64);
        match replay_to_cut(chain, &v.vnode, log) {
            Ok(r) => {
                sides.insert(v.vnode.clone(), (seen, r.included.clone()));
                let partitions = v.partitions.clone();
                states.push(VnodeState {
                    vnode: v.vnode.clone(),
                    partitions,
                    whole: v.partitions.iter().copied().collect(),
                    store: r.store,
                    digests: r.digests,
                    included: r.included,
                    log_bytes,
                    records,
                });
            }
            Err(e) => problems.push(Problem::new(chain.target().dir.join(&v.vnode), e.to_string())),
        }
    }
    problems.extend(closure(chain, &placement, &sides));
    problems.extend(partition_data(chain, &placement, &states).1);
    problems
}

/// Per transaction in a vnode's log (prepared or committed there), the partitions it wrote there
/// and still holds written at the log's end: a `PartitionReset` of `p` (a learner joining `p`
/// anew, `catch_up`) drops every write to `p` recorded before it — the store's and the prepared
/// branches' — so a transaction whose writes to `p` came before the reset no longer wrote `p`
/// here. (A returning host may have committed, on its near's logged decision, a branch the live
/// replicas rolled back while it was away: its reset drops it; nemesis seed 20, 2026-12-07.)
type Touched = BTreeMap<TxId, BTreeSet<u32>>;

fn touched(base_prepared: &BTreeMap<Branch, Vec<ResolvedWrite>>, records: &[Record], placement: &Placement) -> Touched {
    let mut out = Touched::new();
    let add = |out: &mut Touched, tx: &TxId, writes: &[ResolvedWrite]| {
        let parts = out.entry(tx.clone()).or_default();
        parts.extend(writes.iter().map(|w| placement.partition_of(&w.key).0));
    };
    // A branch prepared before the base checkpoint may commit in the log, by its id alone.
    for (branch, writes) in base_prepared {
        add(&mut out, &branch.tx, writes);
    }
    for r in records {
        match r {
            Record::TxPrepared(p) => add(&mut out, &p.tx, &p.writes),
            Record::TxCommitted { branch, writes, .. } => add(&mut out, &branch.tx, writes),
            Record::PartitionReset { partition, .. } => {
                for parts in out.values_mut() {
                    parts.remove(&partition.0);
                }
            }
            _ => {}
        }
    }
    out
}

/// Cut closure (DESIGN §4): a transaction included on one replica of a partition it wrote is
/// included on every replica of that partition whose log shows it writing that partition (one
/// whose log does not had it before its base checkpoint, which the cut includes, or dropped it
/// at a reset, `touched`).
///
/// Only the snapshot's replicas of the partition are compared: a vnode whose copy the manifest
/// leaves out (a host back after a failover, its copy stale) may have committed on its own
/// near's logged decision a transaction the live replicas rolled back while that near was down
/// (`txn::orphan`, the near's take-back) — nothing restores that copy (CI, the versions demo:
/// the root's host killed right after its near decided).
fn closure(chain: &Chain, placement: &Placement, sides: &BTreeMap<String, (Touched, BTreeSet<TxId>)>) -> Vec<Problem> {
    let mut out = vec![];
    for (vnode, (touched, included)) in sides {
        for tx in included {
            for &p in touched.get(tx).into_iter().flatten() {
                let replicas = placement.chain(waymark_core::PartitionId(p));
                if !replicas.iter().any(|r| r.to_string() == *vnode) {
                    continue;
                }
                for other in replicas {
                    let other = other.to_string();
                    let Some((their_touched, their_included)) = sides.get(&other) else { continue };
                    let wrote_p_there = their_touched.get(tx).is_some_and(|parts| parts.contains(&p));
                    if wrote_p_there && !their_included.contains(tx) {
                        out.push(Problem::new(
                            chain.target().dir.join(&other),
                            format!("{tx} wrote partition {p}: the cut includes it on {vnode} but not on {other}"),
                        ));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_core::{PartitionId, Role, VnodeId};

    fn tx(seq: u32) -> TxId {
        TxId { near: VnodeId::new("store0", "node2"), incarnation: 0, seq }
    }

    fn committed(seq: u32, key: &[u8]) -> Record {
        let branch = Branch { tx: tx(seq), upstream: VnodeId::new("store0", "node2"), role: Role::Primary };
        let writes =
            vec![ResolvedWrite { key: key.to_vec(), value: Some(b"v".to_vec()), version: 1, deadline_ms: None }];
        Record::TxCommitted { branch, tx_cut: None, writes }
    }

    #[test]
    fn a_partition_reset_drops_the_writes_recorded_before_it_and_keeps_those_after() {
        let placement = Placement::round_robin(&[VnodeId::new("store0", "node2")], 4, 1);
        let (key, p) = (b"k".to_vec(), placement.partition_of(b"k"));
        let reset = Record::PartitionReset { partition: p, partitions: 4, since: 1 };
        let records = vec![committed(1, &key), reset, committed(2, &key)];
        let touched = touched(&BTreeMap::new(), &records, &placement);
        assert_eq!(touched.get(&tx(1)), Some(&BTreeSet::new()), "written before the reset");
        assert_eq!(touched.get(&tx(2)), Some(&BTreeSet::from([p.0])), "written after it");
        let other = PartitionId((p.0 + 1) % 4);
        assert!(!touched[&tx(2)].contains(&other.0));
    }
}
