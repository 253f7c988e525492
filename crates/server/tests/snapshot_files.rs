//! Snapshot files end to end, on real files: three store vnodes write real WAL segments and
//! checkpoints; a full snapshot of cut 1 and an increment of cut 2 are exported; then list, check
//! (clean, a flipped bit, a deleted segment), restore onto clusters of other shapes (the restored
//! vnodes open as a node opens them) and expiry.
//!
//! The story, per partition replica (placement: 3 vnodes, 3 partitions, 2 replicas):
//! - T1 commits (1PC), T2 prepares — then the checkpoint (a and b; c has none);
//! - T2 commits (its writes come from the checkpoint's prepared set), `CutStart{1}`, T3 prepares,
//!   T4 commits after the cut (`tx_cut = 1`), T3 commits before it, `CutFinish{1, before: T3}`;
//!   roll: the full snapshot ends here;
//! - T5 commits (deletes a key), `CutStart{2}`, T6 commits after it, `CutFinish{2}`; roll: the
//!   increment ends here; T7 commits (never exported).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use waymark_core::{
    Branch, CutFinish, CutId, PartitionId, Placement, Record, ResolvedWrite, Role, Store, TxId, VnodeId, VnodeImage,
};
use waymark_server::config::{ClusterConfig, HostConfig};
use waymark_server::snapshot::catalog::{self, State};
use waymark_server::snapshot::chain::load_chain;
use waymark_server::snapshot::check::check;
use waymark_server::snapshot::expire::{self, Rule};
use waymark_server::snapshot::manifest::{
    snapshot_dir, write_manifest, ClusterShape, Kind, Manifest, VnodeFiles, FORMAT,
};
use waymark_server::snapshot::restore::{rebuild, write_host};
use waymark_server::storage::checkpoint::{self, Image};
use waymark_server::storage::export::export_vnode;
use waymark_server::storage::recover;
use waymark_server::topology::Topology;
use waymark_wal::{Options, Position, Wal};

const PARTITIONS: u32 = 3;
const NAME: &str = "nightly";

fn vnodes() -> Vec<VnodeId> {
    ["node1", "node2", "node3"].iter().map(|h| VnodeId::new("store0", *h)).collect()
}

fn placement() -> Placement {
    Placement::round_robin(&vnodes(), PARTITIONS, 2)
}

/// The first key `k<i>` of partition `p`.
fn key_of(p: u32) -> Vec<u8> {
    (0..).map(|i| format!("k{i}").into_bytes()).find(|k| placement().partition_of(k) == PartitionId(p)).unwrap()
}

fn tx(seq: u32) -> TxId {
    TxId { near: vnodes()[0].clone(), incarnation: 1, seq }
}

fn w(p: u32, value: Option<&str>, version: u64) -> ResolvedWrite {
    ResolvedWrite { key: key_of(p), value: value.map(|v| v.as_bytes().to_vec()), version, deadline_ms: None }
}

/// One vnode's live files while the fixture writes them.
struct Live {
    id: VnodeId,
    dir: PathBuf,
    wal: Wal,
    log: Vec<Record>,
}

impl Live {
    fn append(&mut self, r: Record) {
        self.wal.append(r.kind(), &r.encode()).unwrap();
        self.log.push(r);
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    live: Vec<Live>,
}

/// Per vnode, the writes of `writes` to partitions it holds.
fn mine(live: &Live, writes: &[ResolvedWrite]) -> Vec<ResolvedWrite> {
    let p = placement();
    writes.iter().filter(|w| p.chain(p.partition_of(&w.key)).contains(&live.id)).cloned().collect()
}

fn branch(live: &Live, t: &TxId) -> Branch {
    Branch {
        tx: t.clone(),
        upstream: vnodes()[0].clone(),
        role: if live.id == vnodes()[0] { Role::Primary } else { Role::Backup },
    }
}

impl Fixture {
    /// A 1PC commit on every replica its writes touch.
    fn commit(&mut self, t: &TxId, tx_cut: Option<u64>, writes: &[ResolvedWrite]) {
        for l in &mut self.live {
            let writes = mine(l, writes);
            if !writes.is_empty() {
                let branch = branch(l, t);
                l.append(Record::TxCommitted { branch, tx_cut: tx_cut.map(CutId), writes });
            }
        }
    }

    fn prepare(&mut self, t: &TxId, writes: &[ResolvedWrite]) {
        for l in &mut self.live {
            let writes = mine(l, writes);
            if !writes.is_empty() {
                let b = branch(l, t);
                l.append(Record::TxPrepared(waymark_core::record::Prepared {
                    tx: t.clone(),
                    writes,
                    first_committer: vnodes()[0].clone(),
                    upstream: b.upstream,
                    downstream: vec![],
                    one_phase: false,
                    role: b.role,
                    after: vec![],
                    read_locks: vec![],
                }));
            }
        }
    }

    /// The commit of a prepared branch (2PC): no writes in the record.
    fn commit_prepared(&mut self, t: &TxId, writes: &[ResolvedWrite]) {
        for l in &mut self.live {
            if !mine(l, writes).is_empty() {
                let branch = branch(l, t);
                l.append(Record::TxCommitted { branch, tx_cut: None, writes: vec![] });
            }
        }
    }

    fn all(&mut self, r: Record) {
        for l in &mut self.live {
            l.append(r.clone());
        }
    }

    fn roll(&mut self) -> Vec<Position> {
        self.live.iter_mut().map(|l| l.wal.roll_segment().unwrap()).collect()
    }

    fn export(&mut self, k: u32, cut: u64, bases: &[Option<PathBuf>], from: &[Position], upto: &[Position]) {
        self.export_of(k, cut, bases, from, upto, &[]);
    }

    /// `export`, without the vnodes numbered in `down` (their hosts were down at the cut).
    fn export_of(
        &mut self,
        k: u32,
        cut: u64,
        bases: &[Option<PathBuf>],
        from: &[Position],
        upto: &[Position],
        down: &[usize],
    ) {
        let dir = snapshot_dir(&self.root, NAME, k);
        let mut files: Vec<VnodeFiles> = vec![];
        for (i, l) in self.live.iter_mut().enumerate().filter(|(i, _)| !down.contains(i)) {
            let dest = dir.join(l.id.to_string());
            let mut f = export_vnode(&mut l.wal, &l.dir, bases[i].as_deref(), from[i], upto[i], &dest).unwrap();
            f.partitions = placement().partitions_of(&l.id).map(|p| p.0).collect();
            files.push(f);
        }
        let kind = if k == 0 { Kind::Full } else { Kind::Increment { number: k, previous_cut: cut - 1 } };
        let cluster = ClusterShape {
            name: "local".into(),
            partitions: PARTITIONS,
            replicas: 2,
            hosts: vec!["node1".into(), "node2".into(), "node3".into()],
        };
        let created_unix_ms = 1_700_000_000_000 + k as u64 * 60_000;
        let m = Manifest {
            format: FORMAT,
            name: NAME.into(),
            kind,
            cut,
            strategy: Default::default(),
            created_unix_ms,
            cluster,
            metadata_md5: String::new(),
            vnodes: files,
            hosts_down: down.iter().map(|i| vnodes()[*i].host.clone()).collect(),
        };
        write_manifest(&dir, &m).unwrap();
    }
}

fn fixture() -> Fixture {
    fixture_with(false, Joins::FromTheStart)
}

/// How store0@node3 (which wrote no checkpoint) enters the chain.
#[derive(Clone, Copy, PartialEq)]
enum Joins {
    /// It is in the full snapshot.
    FromTheStart,
    /// Its host was down at cut 1: it joins at increment 1 from its cut's base (its log's start).
    AtTheIncrement,
    /// As `AtTheIncrement`, but its files there start where cut 1 ended: it has no base.
    WithoutABase,
}

/// `split_cut`: T8 commits inside cut 2's window on both replicas of partition 0, but only
/// store0@node1's `CutFinish{2}` puts it before the cut — the inconsistency check must catch.
fn fixture_with(split_cut: bool, joins: Joins) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("snapshots");
    let live = vnodes()
        .into_iter()
        .map(|id| {
            let dir = tmp.path().join("data/vnodes").join(id.to_string());
            let wal = Wal::open(dir.join("wal"), Options::default()).unwrap().0;
            Live { id, dir, wal, log: vec![] }
        })
        .collect();
    let mut f = Fixture { _tmp: tmp, root, live };
    let t1 = [w(0, Some("a1"), 1), w(1, Some("b1"), 1), w(2, Some("c1"), 1)];
    f.commit(&tx(1), None, &t1);
    let t2 = [w(1, Some("b2"), 2)];
    f.prepare(&tx(2), &t2);
    // The checkpoint of a and b; c never wrote one (its snapshot replays its log from the start).
    let resume = f.roll();
    let mut bases = vec![];
    let mut from = vec![];
    for (i, l) in f.live.iter().enumerate() {
        if i < 2 {
            let image = Image::Store(VnodeImage::replay(None, &l.log));
            checkpoint::write(&l.dir, &image, resume[i]).unwrap();
            bases.push(Some(l.dir.join(checkpoint::FILE_NAME)));
            from.push(resume[i]);
        } else {
            bases.push(None);
            from.push(l.wal.first_position());
        }
    }
    f.commit_prepared(&tx(2), &t2);
    f.all(Record::CutStart { cut: CutId(1) });
    let t3 = [w(2, Some("c3"), 2)];
    f.prepare(&tx(3), &t3);
    f.commit(&tx(4), Some(1), &[w(0, Some("a4"), 2)]);
    f.commit_prepared(&tx(3), &t3);
    let before = [tx(3)].into_iter().collect();
    f.all(Record::CutFinish(CutFinish { cut: CutId(1), before, after: Default::default() }));
    let upto1 = f.roll();
    let down = if joins == Joins::FromTheStart { vec![] } else { vec![2] };
    f.export_of(0, 1, &bases, &from, &upto1, &down);
    f.commit(&tx(5), None, &[w(1, None, 3)]);
    f.all(Record::CutStart { cut: CutId(2) });
    f.commit(&tx(6), Some(2), &[w(0, Some("a6"), 3)]);
    if split_cut {
        f.commit(&tx(8), None, &[w(0, Some("a8"), 4)]);
    }
    for l in &mut f.live {
        let before = if split_cut && l.id == vnodes()[0] { [tx(8)].into_iter().collect() } else { Default::default() };
        l.append(Record::CutFinish(CutFinish { cut: CutId(2), before, after: Default::default() }));
    }
    let upto2 = f.roll();
    let mut from2 = upto1.clone();
    if joins == Joins::AtTheIncrement {
        from2[2] = from[2];
    }
    f.export(1, 2, &[None, None, None], &from2, &upto2);
    f.commit(&tx(7), None, &[w(2, Some("c7"), 3)]);
    f
}

/// key → (value, version) at cut 2: T1..T5, not T6 or T7.
fn expected_at_cut_2() -> BTreeMap<Vec<u8>, (Option<Vec<u8>>, u64)> {
    [(key_of(0), Some("a4"), 2), (key_of(1), None, 3), (key_of(2), Some("c3"), 2)]
        .into_iter()
        .map(|(k, v, ver)| (k, (v.map(|v| v.as_bytes().to_vec()), ver)))
        .collect()
}

fn entries(store: &Store) -> BTreeMap<Vec<u8>, (Option<Vec<u8>>, u64)> {
    store.iter().map(|(k, e)| (k.clone(), (e.value.clone(), e.version))).collect()
}

fn cluster_config(hosts: usize) -> ClusterConfig {
    let addr = |port: u16| format!("127.0.0.1:{port}").parse().unwrap();
    let hosts = (0..hosts)
        .map(|i| HostConfig {
            name: format!("node{}", i + 1),
            peer: addr(10_000 + i as u16),
            redis: addr(11_000 + i as u16),
            admin: addr(12_000 + i as u16),
            stores: 1,
        })
        .collect::<Vec<_>>();
    let replicas = 2.min(hosts.len());
    ClusterConfig {
        name: "restored".into(),
        partitions: PARTITIONS,
        replicas,
        fanout: 16,
        real_time_safety: true,
        failover: true,
        min_copies: 1,
        catch_up: false,
        replace_after: Duration::from_secs(60),
        copy_bytes_per_s: 64 << 20,
        strategy: Default::default(),
        hop: Duration::from_millis(5),
        hosts,
    }
}

/// Restores the chain onto `hosts` hosts under `dir`; opens every vnode as a node does; returns
/// all keys the new cluster holds, checking that each replica of a partition holds its keys.
fn restore_onto(chain_root: &Path, hosts: usize, dir: &Path) -> BTreeMap<Vec<u8>, (Option<Vec<u8>>, u64)> {
    let chain = load_chain(chain_root, NAME, None).unwrap();
    let rebuilt = rebuild(&chain, 2, &|_, _, _| {}).unwrap();
    let cfg = cluster_config(hosts);
    let topology = Topology::new(&cfg).unwrap();
    let mut all = BTreeMap::new();
    for h in &cfg.hosts {
        let data_dir = dir.join(&h.name).join("data");
        write_host(&rebuilt.partitions, &topology, &h.name, &data_dir).unwrap();
        for id in topology.stores_on(&h.name) {
            let opened = recover::open(&data_dir.join("vnodes").join(id.to_string()), Options::default()).unwrap();
            assert!(opened.records.is_empty());
            let Some(Image::Store(image)) = opened.image else { panic!("{id}: no store image") };
            assert!(image.summary.tree.is_some(), "a store vnode of the tree starts from the genesis metadata");
            for (k, e) in image.store.iter() {
                let p = topology.placement.partition_of(k);
                assert!(topology.placement.chain(p).contains(id), "{id} holds a key of partition {p:?}");
                all.insert(k.clone(), (e.value.clone(), e.version));
            }
        }
    }
    all
}

#[test]
fn list_shows_the_full_snapshot_and_its_increment() {
    let f = fixture();
    let catalog = catalog::list(&f.root).unwrap();
    assert_eq!(catalog.chains.len(), 1);
    let chain = &catalog.chains[0];
    assert_eq!(chain.members.iter().map(|m| m.increment).collect::<Vec<_>>(), vec![0, 1]);
    assert!(chain.members.iter().all(|m| matches!(m.state, State::Complete(_))));
    assert_eq!(chain.manifest(1).unwrap().cut, 2);
}

#[test]
fn a_sound_chain_checks_clean_and_restores_to_the_expected_keys_on_any_shape() {
    let f = fixture();
    for increment in [Some(0), Some(1), None] {
        let report = check(&f.root, NAME, increment);
        assert!(report.ok(), "{increment:?}: {:#?}", report.problems);
    }
    let tmp = tempfile::tempdir().unwrap();
    let one = restore_onto(&f.root, 1, &tmp.path().join("one"));
    let two = restore_onto(&f.root, 2, &tmp.path().join("two"));
    assert_eq!(one, expected_at_cut_2());
    assert_eq!(two, expected_at_cut_2());
}

/// A vnode whose host was down at the full snapshot joins the chain at the increment from its
/// cut's base: the chain checks, and restores with its partitions whole (it was once left out of
/// increments, bugs/2026-12-07-nemesis-g2-snapshot-again).
#[test]
fn a_vnode_joining_at_an_increment_from_its_base_checks_and_restores() {
    let f = fixture_with(false, Joins::AtTheIncrement);
    let chain = load_chain(&f.root, NAME, None).unwrap();
    assert_eq!(chain.start_of("store0@node3"), Some(1));
    assert_eq!(chain.start_of("store0@node1"), Some(0));
    for increment in [Some(0), Some(1)] {
        let report = check(&f.root, NAME, increment);
        assert!(report.ok(), "{increment:?}: {:#?}", report.problems);
    }
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(restore_onto(&f.root, 2, tmp.path()), expected_at_cut_2());
}

#[test]
fn a_vnode_joining_at_an_increment_without_a_base_is_a_problem() {
    let f = fixture_with(false, Joins::WithoutABase);
    let report = check(&f.root, NAME, None);
    let said: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert!(said.iter().any(|p| p.contains("store0@node3 joins the chain here without a base")), "{said:#?}");
}

#[test]
fn restore_to_the_full_snapshot_stops_at_cut_1() {
    let f = fixture();
    let chain = load_chain(&f.root, NAME, Some(0)).unwrap();
    let rebuilt = rebuild(&chain, 1, &|_, _, _| {}).unwrap();
    let all: BTreeMap<_, _> = rebuilt.partitions.values().flat_map(entries).collect();
    let want = [(key_of(0), "a1", 1), (key_of(1), "b2", 2), (key_of(2), "c3", 2)]
        .into_iter()
        .map(|(k, v, ver)| (k, (Some(v.as_bytes().to_vec()), ver)))
        .collect::<BTreeMap<_, _>>();
    assert_eq!(all, want);
}

/// The first segment of `vnode` in increment 1.
fn increment_segment(f: &Fixture, vnode: &str) -> PathBuf {
    let dir = snapshot_dir(&f.root, NAME, 1).join(vnode).join("wal");
    let mut files: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.remove(0)
}

#[test]
fn a_flipped_bit_is_reported_naming_the_file() {
    let f = fixture();
    let file = increment_segment(&f, "store0@node2");
    // A hard link shares the live segment: write a copy, as damage on the snapshot's disk would.
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x04;
    fs::remove_file(&file).unwrap();
    fs::write(&file, bytes).unwrap();
    let report = check(&f.root, NAME, None);
    assert!(!report.ok());
    let name = file.display().to_string();
    assert!(report.problems.iter().any(|p| p.file == file && p.what.contains("crc32c")), "{:#?}", report.problems);
    let unreadable =
        |p: &&waymark_server::snapshot::chain::Problem| p.to_string().contains(&format!("corrupt record in {name}"));
    assert!(report.problems.iter().any(|p| unreadable(&p)), "{:#?}", report.problems);
    for p in &report.problems {
        eprintln!("{p}");
    }
    assert!(rebuild(&load_chain(&f.root, NAME, None).unwrap(), 1, &|_, _, _| {}).is_err());
}

/// Replaces `file` (a hard link to the live log) by a copy that `damage` changed, as damage on
/// the snapshot's disk would be.
fn damage_copy(file: &Path, damage: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = fs::read(file).unwrap();
    damage(&mut bytes);
    fs::remove_file(file).unwrap();
    fs::write(file, bytes).unwrap();
}

/// What `rebuild` says of the chain, which must be refused.
fn restore_refusal(f: &Fixture) -> String {
    match rebuild(&load_chain(&f.root, NAME, None).unwrap(), 2, &|_, _, _| {}) {
        Ok(_) => panic!("a damaged snapshot was restored"),
        Err(e) => e.to_string(),
    }
}

/// A segment cut short at a record's end reads as a shorter log, which replay alone cannot tell
/// from a whole one: restore checks the manifest's sizes first and names the file.
#[test]
fn restore_refuses_a_truncated_file_naming_it() {
    let f = fixture();
    let file = increment_segment(&f, "store0@node1");
    damage_copy(&file, |bytes| bytes.truncate(bytes.len() / 2));
    let why = restore_refusal(&f);
    assert!(why.contains(&file.display().to_string()) && why.contains("the manifest says"), "{why}");
}

/// One byte changed, the manifest's checksum left as it was: refused by restore against the
/// manifest before any replay (not only by the record's own checksum once replay reaches it, or
/// not at all where no record covers the byte), naming the file.
#[test]
fn restore_refuses_a_file_whose_checksum_is_not_the_manifests_naming_it() {
    let f = fixture();
    let file = increment_segment(&f, "store0@node3");
    damage_copy(&file, |bytes| {
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
    });
    let why = restore_refusal(&f);
    assert!(why.contains(&file.display().to_string()) && why.contains("the manifest says"), "{why}");
}

/// A manifest is read from disk: one whose file paths leave the snapshot's directory (`..`, an
/// absolute path, another vnode's directory) or whose vnode name holds a `/` is refused on reading.
#[test]
fn a_manifest_naming_files_outside_its_snapshot_is_refused() {
    for (vnode, path) in [
        ("store0@node1", "../../etc/passwd"),
        ("store0@node1", "/etc/passwd"),
        ("store0@node1", "store0@node2/wal/x.wal"),
        ("store0@node1", "store0@node1/../../x"),
        ("../store0@node1", "../store0@node1/wal/x.wal"),
        ("store0@node1/..", "store0@node1/wal/x.wal"),
    ] {
        let f = fixture();
        let dir = snapshot_dir(&f.root, NAME, 0);
        let text = fs::read_to_string(dir.join("manifest.json")).unwrap();
        let mut manifest: Manifest = serde_json::from_str(&text).unwrap();
        manifest.vnodes[0].vnode = vnode.into();
        manifest.vnodes[0].segments[0].path = path.into();
        write_manifest(&dir, &manifest).unwrap();
        let err = load_chain(&f.root, NAME, None).err().unwrap_or_else(|| panic!("{vnode} {path}: loaded"));
        assert!(err.to_string().contains("inside its own snapshot"), "{vnode} {path}: {err}");
    }
}

#[test]
fn a_deleted_segment_is_reported_as_a_gap_naming_the_vnode_and_file() {
    let f = fixture();
    let dir = snapshot_dir(&f.root, NAME, 0).join("store0@node3").join("wal");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 2, "c has no checkpoint: its full snapshot holds two segments");
    fs::remove_file(&files[0]).unwrap();
    let report = check(&f.root, NAME, None);
    let gone = files[0].file_name().unwrap().to_string_lossy().into_owned();
    for p in &report.problems {
        eprintln!("{p}");
    }
    let gap =
        report.problems.iter().find(|p| p.what.contains("gap") && p.what.contains("store0@node3")).expect("a gap");
    assert!(gap.what.contains(&gone), "{gap}");
    assert!(report.problems.iter().any(|p| p.file == files[0] && p.what == "missing"), "{:#?}", report.problems);
}

#[test]
fn an_increment_that_does_not_start_where_the_previous_ended_is_a_gap() {
    let f = fixture();
    let dir = snapshot_dir(&f.root, NAME, 1);
    let mut m = waymark_server::snapshot::manifest::read_manifest(&dir).unwrap().unwrap();
    m.vnodes[0].from.segment += 1;
    write_manifest(&dir, &m).unwrap();
    let report = check(&f.root, NAME, None);
    assert!(
        report.problems.iter().any(|p| p.what.contains("gap in the log of store0@node1")),
        "{:#?}",
        report.problems
    );
}

#[test]
fn a_vnode_without_the_cut_finish_is_reported() {
    let f = fixture();
    // Checked as of cut 3, which no vnode finished: claim it in the increment's manifest.
    let dir = snapshot_dir(&f.root, NAME, 1);
    let mut m = waymark_server::snapshot::manifest::read_manifest(&dir).unwrap().unwrap();
    m.cut = 3;
    m.kind = Kind::Increment { number: 1, previous_cut: 1 };
    write_manifest(&dir, &m).unwrap();
    let report = check(&f.root, NAME, None);
    let missing = report.problems.iter().filter(|p| p.what.contains("no CutFinish of cut 3")).count();
    assert_eq!(missing, 3, "{:#?}", report.problems);
}

#[test]
fn expiry_removes_whole_chains_and_refuses_to_orphan_an_increment() {
    let f = fixture();
    let catalog = catalog::list(&f.root).unwrap();
    let err = expire::plan_one(&catalog, NAME, Some(0)).unwrap_err();
    assert!(err.to_string().contains("inc-0001"), "{err}");
    let keep = expire::plan(&catalog, Rule::KeepLast(1));
    assert!(keep.iter().all(|d| !d.remove), "{keep:?}");
    let last = expire::plan_one(&catalog, NAME, Some(1)).unwrap();
    assert!(last.remove);
    let gone = expire::plan(&catalog, Rule::KeepLast(0));
    assert_eq!(gone.len(), 1);
    assert!(gone[0].remove && gone[0].increment.is_none());
    expire::remove(&catalog, &gone[0]).unwrap();
    assert!(catalog::list(&f.root).unwrap().chains.is_empty());
    // The live logs the snapshot linked are untouched.
    for l in &f.live {
        let opened = recover::open(&l.dir, Options::default());
        assert!(opened.is_ok(), "{}", l.dir.display());
    }
}

#[test]
fn a_cluster_directory_under_the_root_is_never_taken_for_a_snapshot() {
    let f = fixture();
    let stray = f.root.join("node1");
    fs::create_dir_all(stray.join("data")).unwrap();
    fs::write(stray.join("waymark.toml"), "").unwrap();
    let catalog = catalog::list(&f.root).unwrap();
    assert_eq!(catalog.ignored, vec![stray.clone()]);
    let plan = expire::plan(&catalog, Rule::OlderThan { cutoff_unix_ms: u64::MAX });
    assert!(plan.iter().all(|d| d.name != "node1"));
}

#[test]
fn a_transaction_on_both_sides_of_the_cut_is_reported_and_refused_by_restore() {
    let f = fixture_with(true, Joins::FromTheStart);
    let report = check(&f.root, NAME, None);
    let t8 = tx(8).to_string();
    let closure = report.problems.iter().find(|p| p.what.contains(&t8)).expect("a closure problem");
    assert!(closure.what.contains("includes it on store0@node1 but not on store0@node2"), "{closure}");
    assert!(
        report.problems.iter().any(|p| p.what.contains("partition 0: replica data differs")),
        "{:#?}",
        report.problems
    );
    let err = rebuild(&load_chain(&f.root, NAME, None).unwrap(), 2, &|_, _, _| {}).err().expect("refused");
    assert!(err.to_string().contains("partition 0"), "{err}");
}

/// The streaming replay `restore` runs against reading every record then filtering (what `check`
/// runs, and what `restore` ran before): per vnode the same store, the same included transactions,
/// the same counts, or the same error.
fn assert_streaming_replays_as_reading_all(root: &Path, increment: Option<u32>) {
    use waymark_server::snapshot::replay::{read_vnode_log, replay_to_cut, stream_to_cut};
    let chain = load_chain(root, NAME, increment).unwrap();
    for vnode in chain.vnodes() {
        let old = read_vnode_log(&chain, &vnode).and_then(|log| {
            let counts = (log.log_bytes, log.records.len() as u64);
            replay_to_cut(&chain, &vnode, log).map(|r| (r, counts))
        });
        let new = stream_to_cut(&chain, &vnode, None).map(|s| (s.restored, (s.log_bytes, s.records)));
        match (old, new) {
            (Ok(old), Ok(new)) => assert_eq!(old, new, "{vnode}"),
            (Err(old), Err(new)) => assert_eq!(old.to_string(), new.to_string(), "{vnode}"),
            (old, new) => panic!("{vnode}: reading all gave {:?}, streaming {:?}", old.map(|_| ()), new.map(|_| ())),
        }
    }
}

#[test]
fn the_streaming_replay_restores_what_reading_every_record_restores() {
    let f = fixture();
    assert_streaming_replays_as_reading_all(&f.root, None);
    assert_streaming_replays_as_reading_all(&f.root, Some(0));
    let split = fixture_with(true, Joins::FromTheStart);
    assert_streaming_replays_as_reading_all(&split.root, None);
}

#[test]
fn the_streaming_replay_reports_damage_and_a_missing_finish_as_reading_every_record_does() {
    let f = fixture();
    let file = increment_segment(&f, "store0@node2");
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x04;
    fs::remove_file(&file).unwrap();
    fs::write(&file, bytes).unwrap();
    assert_streaming_replays_as_reading_all(&f.root, None);

    let f = fixture();
    let dir = snapshot_dir(&f.root, NAME, 1);
    let mut m = waymark_server::snapshot::manifest::read_manifest(&dir).unwrap().unwrap();
    m.cut = 3;
    write_manifest(&dir, &m).unwrap();
    assert_streaming_replays_as_reading_all(&f.root, None);
}

/// A host back after a failover may hold a stale copy that committed, on its near's logged
/// decision, a transaction the live replicas rolled back: the manifest leaves that copy out, and
/// the check compares only the copies it restores (CI, the versions demo, where it was reported).
#[test]
fn a_copy_the_manifest_leaves_out_is_not_compared_with_the_replicas() {
    let f = fixture_with(true, Joins::FromTheStart);
    let dir = snapshot_dir(&f.root, NAME, 1);
    let mut m = waymark_server::snapshot::manifest::read_manifest(&dir).unwrap().unwrap();
    let stale = m.vnodes.iter_mut().find(|v| v.vnode == vnodes()[0].to_string()).expect("store0@node1");
    stale.partitions.retain(|&p| p != 0);
    write_manifest(&dir, &m).unwrap();
    let report = check(&f.root, NAME, None);
    assert!(report.ok(), "{:#?}", report.problems);
    assert_eq!(report.fewer_copies, vec![(0, 1)]);
}
