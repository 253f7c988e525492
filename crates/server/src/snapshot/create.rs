//! Creating a snapshot of the live cluster (`POST /snapshots`, `waymark snapshot create`): one cut
//! process over the tree (nothing is paused), then every host exports its store vnodes' files for
//! that cut (`POST /export` on the others, in parallel), then the manifest is written — last, so a
//! snapshot without a manifest is one that did not complete.
//!
//! With failover, a cut taken while a host is recorded dead does not reach that host (its
//! partitions are covered by their live replicas): its export is not asked for, and the manifest
//! names it (`hosts_down`). A store vnode that holds no partition — one of a host back after its
//! partitions moved — exports nothing (no restore reads it) unless an increment continues its log.
//!
//! A full snapshot starts a chain; increment K exports, per vnode, the log from where increment
//! K-1 (or the full snapshot) ended to the new cut's end. Hosts write into their own
//! `node.snapshot_dir`: the hosts of one machine share it (as `cluster init` sets up); hosts on
//! several machines need it on a shared file system.

use super::catalog::{self, CatalogError, State};
use super::manifest::{self, ClusterShape, Kind, Manifest, ManifestError, VnodeFiles};
use crate::host::{RunCutError, Shared};
use crate::status::CutReport;
use crate::storage::log_writer::CutExportError;
use crate::vnode::VnodeCmd;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use waymark_core::cut::holdings::CutHoldings;
use waymark_core::{CutId, VnodeId};
use waymark_wal::Position;

/// How long the cut process may take before the creation gives up.
const CUT_WAIT: Duration = Duration::from_secs(60);
/// How long one host may take to export its files.
const EXPORT_WAIT: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateRequest {
    pub name: String,
    #[serde(default)]
    pub incremental: bool,
}

/// What a creation reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Created {
    pub name: String,
    /// 0 for a full snapshot, K for increment K.
    pub increment: u32,
    pub cut: u64,
    /// Each phase of the cut, in milliseconds (the four of the tree, or the coordinator's).
    pub phases_ms: Vec<f64>,
    /// The cut process from request to answer, in milliseconds.
    #[serde(default)]
    pub cut_ms: f64,
    #[serde(default)]
    pub strategy: waymark_core::CutStrategy,
    pub export_ms: f64,
    pub bytes: u64,
    pub files: usize,
}

/// A host's part: export these vnodes' files of `cut` (from these positions, for an increment).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExportRequest {
    pub name: String,
    pub increment: u32,
    pub cut: u64,
    /// Per vnode (`kind@host`), where its increment starts: the previous snapshot's `upto`;
    /// empty for a full snapshot. A vnode an increment's `from` does not name is exported from
    /// its cut's base, as a full snapshot exports it: it joins the chain there.
    #[serde(default, with = "positions_as_pairs")]
    pub from: BTreeMap<String, Position>,
}

/// `from` on the wire: each position as the `[segment, offset]` pair it was sent as before it was
/// a `Position` here, so hosts of both versions read each other's requests.
mod positions_as_pairs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;
    use waymark_wal::Position;

    pub fn serialize<S: Serializer>(from: &BTreeMap<String, Position>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(from.iter().map(|(vnode, p)| (vnode, (p.segment, p.offset))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Position>, D::Error> {
        let pairs = BTreeMap::<String, (u64, u64)>::deserialize(d)?;
        Ok(pairs.into_iter().map(|(vnode, (segment, offset))| (vnode, Position::new(segment, offset))).collect())
    }
}

/// Why a snapshot was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Name(#[from] NameError),
    /// The cut process could not be run from this host (`NotHere`: another host can).
    #[error(transparent)]
    Cut(#[from] RunCutError),
    #[error("snapshot {name} exists already in {root}")]
    Exists { name: String, root: PathBuf },
    #[error("{dir} exists already")]
    DirExists { dir: PathBuf },
    #[error(
        "snapshot {name} was taken with `{taken}` cuts and this cluster runs `{runs}`: an increment \
         continues its chain with the same strategy; take a full snapshot under another name"
    )]
    Strategy { name: String, taken: waymark_core::CutStrategy, runs: waymark_core::CutStrategy },
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Clear(#[from] ClearError),
    #[error("cut {cut} failed: {why} (is every host up? `waymark cluster status` shows them)")]
    CutFailed { cut: u64, why: String },
    #[error(transparent)]
    Export(#[from] ExportEverywhereError),
    #[error(
        "partition {partition} has no copy among the hosts the cut reached (down: {}): the snapshot would lose it",
        down(left_out)
    )]
    PartitionLost { partition: u32, left_out: Vec<String> },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl CreateError {
    /// This host cannot start the cut process; another can (a client asks the next host).
    pub fn not_here(&self) -> bool {
        matches!(self, CreateError::Cut(RunCutError::NotHere(_)))
    }

    /// An increment of this chain cannot be made any more, only a full snapshot: the chain was
    /// taken with another strategy, or a vnode's log from the chain's end was removed. Another
    /// host's refusal arrives as the text of its admin API, which says so in these words.
    pub fn wants_full_snapshot(&self) -> bool {
        match self {
            CreateError::Strategy { .. } => true,
            CreateError::Export(ExportEverywhereError::Here { source, .. }) => {
                matches!(source, HostExportError::Vnode(CutExportError::Removed { .. }))
            }
            CreateError::Export(ExportEverywhereError::Refused { body, .. }) => body.contains(TAKE_A_FULL_SNAPSHOT),
            _ => false,
        }
    }
}

/// The words of a refusal that only a full snapshot can answer (`CutExportError::Removed`,
/// `CreateError::Strategy`), as another host's admin API sends them.
const TAKE_A_FULL_SNAPSHOT: &str = "take a full snapshot";

fn down(left_out: &[String]) -> String {
    if left_out.is_empty() {
        "none".to_string()
    } else {
        left_out.join(", ")
    }
}

/// Names become directory names: keep them plain.
#[derive(Debug, thiserror::Error)]
#[error("snapshot name `{name}`: use 1-64 letters, digits, '-', '_' or '.'")]
pub struct NameError {
    name: String,
}

/// Why the chain an increment continues could not be found.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("no snapshot {name} in {root}: create a full one first (without --incremental)")]
    NoSuchChain { name: String, root: PathBuf },
    #[error("snapshot {name} is empty")]
    Empty { name: String },
    #[error("{dir} has no manifest (an interrupted creation): expire it")]
    Incomplete { dir: PathBuf },
    #[error(transparent)]
    Unreadable(Arc<ManifestError>),
}

/// A directory an interrupted creation left could not be removed.
#[derive(Debug, thiserror::Error)]
#[error("removing {dir} (an interrupted creation's): {source}")]
pub struct ClearError {
    dir: PathBuf,
    source: std::io::Error,
}

/// Why a host's part of a snapshot was not exported.
#[derive(Debug, thiserror::Error)]
pub enum HostExportError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("{vnode} stopped")]
    Stopped { vnode: VnodeId },
    #[error(transparent)]
    Clear(#[from] ClearError),
    #[error("{vnode}: export timed out")]
    TimedOut { vnode: VnodeId },
    #[error(transparent)]
    Vnode(#[from] CutExportError),
}

/// Why the exports of the hosts the cut reached did not all come back.
#[derive(Debug, thiserror::Error)]
pub enum ExportEverywhereError {
    #[error("{host}: {source}")]
    Here { host: String, source: HostExportError },
    #[error("export task: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{host}: unreadable export answer: {source}")]
    Unreadable { host: String, source: std::io::Error },
    /// The other host's refusal, as its admin API worded it.
    #[error("{host}: export refused ({code}): {body}")]
    Refused { host: String, code: u16, body: String },
    #[error("{host} ({url}): {source} (is the host up?)")]
    Unreachable { host: String, url: String, source: Box<ureq::Error> },
}

/// Creates snapshot `req.name` (or its next increment) of the running cluster.
pub async fn create(shared: &Shared, req: CreateRequest) -> Result<Created, CreateError> {
    check_name(&req.name)?;
    let root = &shared.cfg.snapshot_dir;
    let previous = if req.incremental { Some(last_of_chain(root, &req.name)?) } else { None };
    if previous.is_none() && root.join(&req.name).exists() {
        return Err(CreateError::Exists { name: req.name.clone(), root: root.clone() });
    }
    let increment = previous.as_ref().map_or(0, |m| m.kind.number() + 1);
    let strategy = shared.cfg.cluster.strategy;
    if let Some(p) = previous.as_ref().filter(|p| p.strategy != strategy) {
        return Err(CreateError::Strategy { name: req.name.clone(), taken: p.strategy, runs: strategy });
    }
    let dir = manifest::snapshot_dir(root, &req.name, increment);
    if dir.exists() {
        // Left by a creation that failed before it could remove it (a host stopped meanwhile).
        if dir.join(manifest::MANIFEST_FILE).exists() {
            return Err(CreateError::DirExists { dir });
        }
        std::fs::remove_dir_all(&dir).map_err(|source| ClearError { dir: dir.clone(), source })?;
    }
    let created = create_in(shared, &req, previous, increment).await;
    if created.is_err() {
        // What this creation exported here is read by nothing without a manifest: removed, so
        // that the next attempt starts clean (it had stopped every later increment of the chain).
        let _ = std::fs::remove_dir_all(&dir);
    }
    created
}

/// `create` once its snapshot's directory is known to be free: the cut, the exports, the manifest.
async fn create_in(
    shared: &Shared,
    req: &CreateRequest,
    previous: Option<Manifest>,
    increment: u32,
) -> Result<Created, CreateError> {
    let root = &shared.cfg.snapshot_dir;
    let strategy = shared.cfg.cluster.strategy;
    let cut: CutReport = shared.run_cut(CUT_WAIT).await?;
    if !cut.ok {
        let why = cut.why.unwrap_or_else(|| "a store vnode did not take part".to_string());
        return Err(CreateError::CutFailed { cut: cut.cut, why });
    }
    let begun = Instant::now();
    let from = previous.as_ref().map(starts_after).unwrap_or_default();
    let export = ExportRequest { name: req.name.clone(), increment, cut: cut.cut, from };
    let mut vnodes = export_everywhere(shared, &export, &cut.left_out).await?;
    set_partitions(&mut vnodes);
    // One that holds nothing is kept only to continue its log from the previous snapshot.
    vnodes.retain(|v| !v.partitions.is_empty() || export.from.contains_key(&v.vnode));
    every_partition_held(shared.cfg.cluster.partitions, &vnodes, &cut.left_out)?;
    let kind = match &previous {
        None => Kind::Full,
        Some(p) => Kind::Increment { number: increment, previous_cut: p.cut },
    };
    let manifest = Manifest {
        format: manifest::FORMAT,
        name: req.name.clone(),
        kind,
        cut: cut.cut,
        strategy,
        created_unix_ms: crate::clock::now_ms(),
        cluster: shape(shared),
        metadata_md5: cut.metadata_md5.clone(),
        vnodes,
        hosts_down: cut.left_out.clone(),
    };
    let dir = manifest::snapshot_dir(root, &req.name, increment);
    manifest::write_manifest(&dir, &manifest)?;
    let files = manifest.vnodes.iter().map(|v| v.files().count()).sum();
    let export_ms = begun.elapsed().as_secs_f64() * 1000.0;
    Ok(Created {
        name: req.name.clone(),
        increment,
        cut: cut.cut,
        phases_ms: cut.phases_ms,
        cut_ms: cut.took_ms,
        strategy,
        export_ms,
        bytes: manifest.size_bytes(),
        files,
    })
}

/// Names become directory names: keep them plain.
fn check_name(name: &str) -> Result<(), NameError> {
    let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if (1..=64).contains(&name.len()) && plain && !name.starts_with('.') {
        Ok(())
    } else {
        Err(NameError { name: name.to_string() })
    }
}

/// The newest member of chain `name`, which the next increment continues.
fn last_of_chain(root: &std::path::Path, name: &str) -> Result<Manifest, ChainError> {
    let catalog = catalog::list(root)?;
    let chain = catalog
        .chains
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| ChainError::NoSuchChain { name: name.to_string(), root: root.into() })?;
    let last = chain.members.last().ok_or_else(|| ChainError::Empty { name: name.to_string() })?;
    match &last.state {
        State::Complete(m) => Ok((**m).clone()),
        State::Incomplete => Err(ChainError::Incomplete { dir: last.dir.clone() }),
        State::Unreadable(e) => Err(ChainError::Unreadable(e.clone())),
    }
}

fn starts_after(previous: &Manifest) -> BTreeMap<String, Position> {
    previous.vnodes.iter().map(|v| (v.vnode.clone(), v.upto)).collect()
}

/// The export of every host the cut reached (all but `left_out`), this one's locally and the
/// others' through their admin API, in parallel.
async fn export_everywhere(
    shared: &Shared,
    req: &ExportRequest,
    left_out: &[String],
) -> Result<Vec<VnodeFiles>, ExportEverywhereError> {
    let mut remote = vec![];
    let reached = |h: &&crate::config::HostConfig| h.name != shared.cfg.host && !left_out.contains(&h.name);
    let http = shared.admin_http(EXPORT_WAIT);
    for host in shared.cfg.cluster.hosts.iter().filter(reached) {
        let (url, body) = (http.url(host.admin, "/export"), req.clone());
        let token = shared.cfg.admin_token.clone().unwrap_or_default();
        let (name, agent) = (host.name.clone(), http.agent.clone());
        remote.push(tokio::task::spawn_blocking(move || post_export(&agent, &name, &url, &token, &body)));
    }
    let here = |source| ExportEverywhereError::Here { host: shared.cfg.host.clone(), source };
    let mut all = export_local(shared, req).await.map_err(here)?;
    for task in remote {
        all.extend(task.await??);
    }
    Ok(all)
}

fn post_export(
    agent: &ureq::Agent,
    host: &str,
    url: &str,
    token: &[u8],
    body: &ExportRequest,
) -> Result<Vec<VnodeFiles>, ExportEverywhereError> {
    let auth = format!("Bearer {}", String::from_utf8_lossy(token));
    let host = host.to_string();
    match agent.post(url).set("Authorization", &auth).send_json(body) {
        Ok(resp) => resp.into_json().map_err(|source| ExportEverywhereError::Unreadable { host, source }),
        Err(ureq::Error::Status(code, resp)) => {
            let body = resp.into_string().unwrap_or_default().trim().to_string();
            Err(ExportEverywhereError::Refused { host, code, body })
        }
        Err(e) => Err(ExportEverywhereError::Unreachable { host, url: url.to_string(), source: Box::new(e) }),
    }
}

/// This host's part: each local store vnode's writer exports its files.
pub async fn export_local(shared: &Shared, req: &ExportRequest) -> Result<Vec<VnodeFiles>, HostExportError> {
    check_name(&req.name)?;
    let dir = manifest::snapshot_dir(&shared.cfg.snapshot_dir, &req.name, req.increment);
    let mut out = vec![];
    for (id, tx) in &shared.stores {
        let stopped = || HostExportError::Stopped { vnode: id.clone() };
        // What it held when its part of the cut was whole — not now: a learner switched in since
        // holds, up to the cut, only the pages copied by then (bugs/2026-12-07-nemesis-g2).
        let holdings = holdings_at(tx, CutId(req.cut)).await.ok_or_else(stopped)?;
        let held = holdings.as_ref().is_some_and(|h| !h.epochs.is_empty());
        if !held && !req.from.contains_key(&id.to_string()) {
            continue; // it held no partition at the cut (or had no part in it): nothing to restore
        }
        let from = match req.from.get(&id.to_string()) {
            Some(from) => Some(*from),
            // A full snapshot, or a vnode the previous snapshot does not hold (its host was down,
            // or it held nothing then) holding partitions now: it joins the chain here from its
            // cut's base, as a full snapshot takes it. It was once left out of the increment, the partitions covered by the
            // copies that were there — and after a failover it may be the only copy: a host back
            // from the dead, naming the chains of before it, was read for them instead and a
            // restore lost 608 acknowledged appends (bugs/2026-12-07-nemesis-g2-snapshot-again).
            None => {
                if !req.from.is_empty() {
                    tracing::info!(vnode = %id, "joins the snapshot chain at this increment from its cut's base");
                }
                None
            }
        };
        let dest = dir.join(id.to_string());
        clear_interrupted(&dir, &dest)?;
        let (reply, rx) = oneshot::channel();
        let cmd = VnodeCmd::Export { cut: CutId(req.cut), from, dest, reply };
        tx.send(cmd).await.map_err(|_| stopped())?;
        let files =
            tokio::time::timeout(EXPORT_WAIT, rx).await.map_err(|_| HostExportError::TimedOut { vnode: id.clone() })?;
        let mut files = files.map_err(|_| stopped())??;
        if let Some(h) = holdings {
            files.epochs = h.epochs;
            files.chains = h.chains.into_iter().map(|(p, c)| (p, c.iter().map(|v| v.to_string()).collect())).collect();
        }
        out.push(files);
    }
    Ok(out)
}

/// A vnode's files left in a snapshot directory without a manifest — by a creation that failed
/// after this host exported (another host's export failed, a disk filled up) — are removed before
/// the next attempt exports again: nothing reads a directory without a manifest.
fn clear_interrupted(dir: &std::path::Path, dest: &std::path::Path) -> Result<(), ClearError> {
    if dest.exists() && !dir.join(manifest::MANIFEST_FILE).exists() {
        std::fs::remove_dir_all(dest).map_err(|source| ClearError { dir: dest.into(), source })?;
    }
    Ok(())
}

/// What a store vnode held as a copy at `cut` (`None` inside: it did not finish that cut since it
/// started); `None`: the vnode stopped.
async fn holdings_at(tx: &tokio::sync::mpsc::Sender<VnodeCmd>, cut: CutId) -> Option<Option<CutHoldings>> {
    let (reply, rx) = oneshot::channel();
    tx.send(VnodeCmd::HoldingsAt { cut, reply }).await.ok()?;
    rx.await.ok()
}

/// Which vnode holds which partition in the snapshot (`waymark_core::cut::holdings::newest_holders`:
/// by the newest chain any of them held it by at the cut). A vnode that names no partition — it
/// held none at the cut, or restarted since and cannot say — holds none in the snapshot: its log
/// is exported only to continue its chain. It was once given its partitions of the configured
/// placement instead, and a host back from the dead, holding nothing at the cut, was read for
/// partitions only another host's vnode (then left out of the increment) held — 2.8 s of acknowledged
/// appends lost from a restore (bugs/2026-12-07-nemesis-g2-snapshot-again). Now such a partition
/// has no holder and `create` refuses the increment (`PartitionLost`).
fn set_partitions(vnodes: &mut [VnodeFiles]) {
    let kept = waymark_core::cut::holdings::newest_holders(&vnodes.iter().map(|v| &v.epochs).collect::<Vec<_>>());
    for (v, epochs) in vnodes.iter_mut().zip(kept) {
        v.epochs = epochs;
        let held = &v.epochs;
        v.chains.retain(|p, _| held.contains_key(p));
        v.partitions = v.epochs.keys().copied().collect();
    }
}

/// Every partition has a copy among the exports: a snapshot without one would restore nothing of
/// it. (A partition whose every replica was on hosts down at once waits for one to come back.)
fn every_partition_held(partitions: u32, vnodes: &[VnodeFiles], left_out: &[String]) -> Result<(), CreateError> {
    let held: std::collections::BTreeSet<u32> = vnodes.iter().flat_map(|v| v.partitions.iter().copied()).collect();
    match (0..partitions).find(|p| !held.contains(p)) {
        None => Ok(()),
        Some(partition) => Err(CreateError::PartitionLost { partition, left_out: left_out.to_vec() }),
    }
}

fn shape(shared: &Shared) -> ClusterShape {
    let c = &shared.cfg.cluster;
    ClusterShape {
        name: c.name.clone(),
        partitions: c.partitions,
        replicas: c.replicas,
        hosts: c.hosts.iter().map(|h| h.name.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule starts a new chain on exactly these refusals, local or from another host.
    #[test]
    fn only_a_removed_log_or_another_strategy_wants_a_full_snapshot() {
        let (dir, p) = (PathBuf::from("vnodes/store0@node1"), Position::new(0, 24));
        let removed = CutExportError::Removed { dir, from: p, first: Position::new(4096, 24) };
        let refused_with = |e: &dyn std::fmt::Display| ExportEverywhereError::Refused {
            host: "node2".into(),
            code: 409,
            body: e.to_string(),
        };
        let remote = CreateError::Export(refused_with(&removed));
        let here = CreateError::Export(ExportEverywhereError::Here {
            host: "node1".into(),
            source: HostExportError::Vnode(removed),
        });
        let (consistent, versions) = (waymark_core::CutStrategy::Consistent, waymark_core::CutStrategy::Versions);
        let strategy = CreateError::Strategy { name: "nightly".into(), taken: consistent, runs: versions };
        assert!(here.wants_full_snapshot() && remote.wants_full_snapshot() && strategy.wants_full_snapshot());
        let vnode = VnodeId::parse("store0@node2").unwrap();
        let stopped = HostExportError::Stopped { vnode: vnode.clone() };
        let timed_out = CreateError::Export(ExportEverywhereError::Here {
            host: "node1".into(),
            source: HostExportError::TimedOut { vnode },
        });
        let cut_failed = CreateError::CutFailed { cut: 7, why: "a store vnode did not take part".into() };
        for e in [CreateError::Export(refused_with(&stopped)), timed_out, cut_failed] {
            assert!(!e.wants_full_snapshot(), "{e}");
        }
    }

    /// The request reads and writes as it did when positions were `(segment, offset)` pairs: a
    /// host sends it to the others, which may run the version before.
    #[test]
    fn an_export_request_keeps_its_json_with_positions_as_pairs() {
        let before =
            r#"{"name":"nightly","increment":2,"cut":9,"from":{"store0@node1":[100,24],"store1@node2":[0,24]}}"#;
        let req: ExportRequest = serde_json::from_str(before).unwrap();
        assert_eq!(req.from["store0@node1"], Position::new(100, 24));
        assert_eq!(req.from["store1@node2"], Position::new(0, 24));
        assert_eq!(serde_json::to_string(&req).unwrap(), before);
        let full: ExportRequest = serde_json::from_str(r#"{"name":"nightly","increment":0,"cut":9}"#).unwrap();
        assert!(full.from.is_empty(), "a full snapshot's request has no `from`");
    }

    #[test]
    fn a_vnodes_files_left_without_a_manifest_are_removed_before_exporting_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, dest) = (tmp.path().join("inc-0008"), tmp.path().join("inc-0008/store0@node2"));
        std::fs::create_dir_all(dest.join("wal")).unwrap();
        std::fs::write(dest.join("wal/00000000000000000000.wal"), b"half").unwrap();
        clear_interrupted(&dir, &dest).unwrap();
        assert!(!dest.exists() && dir.exists());
    }

    #[test]
    fn a_vnodes_files_under_a_manifest_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, dest) = (tmp.path().join("inc-0003"), tmp.path().join("inc-0003/store0@node2"));
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dir.join(manifest::MANIFEST_FILE), b"{}").unwrap();
        clear_interrupted(&dir, &dest).unwrap();
        assert!(dest.exists());
    }
}
