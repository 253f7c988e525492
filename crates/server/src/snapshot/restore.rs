//! Restoring a chain (DESIGN §5): every store vnode's base plus log replayed to the target cut, in
//! parallel (one vnode's log is one sequential unit: a partition's order is its WAL order); then per
//! partition the data of its replicas, which must agree; then, for a new cluster of any shape with
//! the same partition count, a checkpoint per store vnode holding exactly its partitions' keys
//! (values and versions kept), which its first start accepts over an empty log.
//!
//! One replica of each partition is replayed whole; the others keep only their keys, versions and
//! value digests (`store::value_digest`), which is all the agreement check needs. A restore holds
//! one copy of the data, not one per replica, and writes no more memory than it restores.

use super::chain::{chain_problems, file_problem, Chain, Problem};
use super::manifest::VnodeFiles;
use super::replay::{stream_to_cut, ReplayError, Streamed};
use crate::storage::checkpoint::{self, CheckpointError, Image};
use crate::topology::Topology;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use waymark_core::cut::restore::KeepWhole;
use waymark_core::{PartitionId, Placement, ResolvedWrite, Store, TxId, VnodeImage};
use waymark_wal::segment::HEADER_BYTES;
use waymark_wal::{Options, Position, Wal, WalError};

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("the snapshot is inconsistent:\n{}", list(.0))]
    Inconsistent(Vec<Problem>),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("the snapshot has {snapshot} partitions, the new cluster {cluster}: a restore keeps the partition count")]
    Partitions { snapshot: u32, cluster: u32 },
    #[error("{dir}: already holds data: restore only into a new cluster")]
    NotEmpty { dir: PathBuf },
    #[error("{dir}: {source}")]
    Io { dir: PathBuf, source: std::io::Error },
    #[error("{dir}: creating the empty log: {source}")]
    Wal { dir: PathBuf, source: WalError },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

fn list(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
}

/// One vnode, restored to the target cut.
pub struct VnodeState {
    pub vnode: String,
    pub partitions: Vec<u32>,
    /// The partitions whose whole replica this vnode is ([`whole_replicas`]).
    pub whole: BTreeSet<u32>,
    /// The keys of those partitions, with their values.
    pub store: Store,
    /// Its other keys, with the digests of their values.
    pub digests: Store,
    pub included: BTreeSet<TxId>,
    pub log_bytes: u64,
    pub records: u64,
}

/// Reported as each vnode finishes: its name, log bytes and records replayed.
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Per partition, the replica replayed whole: of the vnodes holding it, the one with the fewest
/// partitions chosen so far (the first in the target manifest's order on a tie), so that every
/// vnode's replay keeps about as many values as another's.
pub fn whole_replicas(vnodes: &[VnodeFiles]) -> BTreeMap<u32, String> {
    let partitions: BTreeSet<u32> = vnodes.iter().flat_map(|v| v.partitions.iter().copied()).collect();
    let mut chosen = vec![0usize; vnodes.len()];
    let mut whole = BTreeMap::new();
    for p in partitions {
        let holders = (0..vnodes.len()).filter(|&i| vnodes[i].partitions.contains(&p));
        let i = holders.min_by_key(|&i| (chosen[i], i)).expect("a partition named by some vnode");
        chosen[i] += 1;
        whole.insert(p, vnodes[i].vnode.clone());
    }
    whole
}

/// Which keys `vnode`'s replay keeps whole: those of the partitions whose whole replica it is.
fn keep_whole(placement: &Arc<Placement>, mine: BTreeSet<u32>) -> KeepWhole {
    let placement = placement.clone();
    Arc::new(move |key: &[u8]| mine.contains(&placement.partition_of(key).0))
}

/// Replays every vnode of the chain, `threads` at a time (at least one), each keeping whole the
/// partitions it is the whole replica of. Results are in the target manifest's vnode order.
pub fn replay_all(
    chain: &Chain,
    placement: &Placement,
    threads: usize,
    progress: Progress,
) -> Vec<Result<VnodeState, ReplayError>> {
    let vnodes = chain.target().manifest.vnodes.clone();
    let (placement, whole) = (Arc::new(placement.clone()), whole_replicas(&chain.target().manifest.vnodes));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<VnodeState, ReplayError>>>> =
        Mutex::new(vnodes.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, vnodes.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(v) = vnodes.get(i) else { return };
                let mine = whole.iter().filter(|(_, w)| **w == v.vnode).map(|(&p, _)| p).collect();
                let result = replay_one(chain, &v.vnode, v.partitions.clone(), &placement, mine);
                if let Ok(state) = &result {
                    progress(&state.vnode, state.log_bytes, state.records);
                }
                results.lock().expect("no thread panics holding it")[i] = Some(result);
            });
        }
    });
    let results = results.into_inner().expect("no thread panics holding it");
    results.into_iter().map(|r| r.expect("every vnode was taken by a thread")).collect()
}

fn replay_one(
    chain: &Chain,
    vnode: &str,
    partitions: Vec<u32>,
    placement: &Arc<Placement>,
    whole: BTreeSet<u32>,
) -> Result<VnodeState, ReplayError> {
    let keep = keep_whole(placement, whole.clone());
    let Streamed { restored, log_bytes, records } = stream_to_cut(chain, vnode, Some(keep))?;
    Ok(VnodeState {
        vnode: vnode.into(),
        partitions,
        whole,
        store: restored.store,
        digests: restored.digests,
        included: restored.included,
        log_bytes,
        records,
    })
}

/// Per partition, the data of its whole replica, restricted to its keys; with a problem for each
/// replica whose keys, versions or value digests differ from the first replica's.
pub fn partition_data(
    chain: &Chain,
    placement: &Placement,
    states: &[VnodeState],
) -> (BTreeMap<u32, Store>, Vec<Problem>) {
    let mut data = Replicas::new(&chain.target().dir);
    for state in states {
        for &p in &state.partitions {
            let of_p = |k: &Vec<u8>| placement.partition_of(k) == PartitionId(p);
            let whole = state.whole.contains(&p);
            data.offer(&state.vnode, p, whole, state.store.filtered(of_p), state.digests.filtered(of_p));
        }
    }
    data.into_parts()
}

/// [`partition_data`] that moves the replayed stores' entries instead of copying them.
pub fn into_partition_data(
    chain: &Chain,
    placement: &Placement,
    states: Vec<VnodeState>,
) -> (BTreeMap<u32, Store>, Vec<Problem>) {
    let mut data = Replicas::new(&chain.target().dir);
    for state in states {
        let mut whole = state.store.into_partitions(|k| placement.partition_of(k).0);
        let mut digests = state.digests.into_partitions(|k| placement.partition_of(k).0);
        for &p in &state.partitions {
            let (mine, my_digests) = (whole.remove(&p).unwrap_or_default(), digests.remove(&p).unwrap_or_default());
            data.offer(&state.vnode, p, state.whole.contains(&p), mine, my_digests);
        }
    }
    data.into_parts()
}

/// Per partition the first replica offered (what the others are compared with), the data of its
/// whole replica, and the replicas that differ from the first.
struct Replicas {
    /// The target snapshot's directory, where problems point.
    dir: PathBuf,
    first: BTreeMap<u32, FirstReplica>,
    data: BTreeMap<u32, Store>,
    problems: Vec<Problem>,
}

/// A partition's first replica offered: whose it is, and its data digested.
struct FirstReplica {
    vnode: String,
    digests: Store,
}

impl Replicas {
    fn new(dir: &Path) -> Replicas {
        Replicas { dir: dir.to_owned(), first: BTreeMap::new(), data: BTreeMap::new(), problems: vec![] }
    }

    /// A replica of partition `p`: the keys `vnode` kept whole, and those it kept as digests. A
    /// replica `is_whole` (replayed whole for `p`) kept none as digests; its data is the partition's.
    fn offer(&mut self, vnode: &str, p: u32, is_whole: bool, whole: Store, digested: Store) {
        assert!(!is_whole || digested.is_empty(), "partition {p}: {vnode} was to replay it whole");
        let mut mine = whole.digested();
        mine.absorb_disjoint(digested);
        if is_whole && !self.data.contains_key(&p) {
            self.data.insert(p, whole);
        }
        match self.first.get(&p) {
            None => drop(self.first.insert(p, FirstReplica { vnode: vnode.to_owned(), digests: mine })),
            Some(FirstReplica { vnode: first, digests: theirs }) if *theirs != mine => self.problems.push(Problem::new(
                self.dir.join(vnode),
                format!(
                    "partition {p}: replica data differs from {first}'s ({} keys, digest {:08x} vs {} keys, digest {:08x})",
                    mine.len(),
                    digest(&mine),
                    theirs.len(),
                    digest(theirs)
                ),
            )),
            Some(_) => {}
        }
    }

    /// Per partition its whole replica's data. Every partition offered had a whole replica.
    fn into_parts(self) -> (BTreeMap<u32, Store>, Vec<Problem>) {
        for p in self.first.keys() {
            assert!(self.data.contains_key(p), "partition {p}: no replica of it was replayed whole");
        }
        (self.data, self.problems)
    }
}

/// A checksum of a store's entries, to show two replicas differ without printing them.
pub fn digest(store: &Store) -> u32 {
    crc32c::crc32c(&postcard::to_stdvec(store).expect("stores always serialize"))
}

/// What a restore rebuilt: per partition its data at the target cut, and replay totals.
pub struct Rebuilt {
    pub partitions: BTreeMap<u32, Store>,
    pub log_bytes: u64,
    pub records: u64,
}

/// Replays the chain and takes each partition's data, failing on any inconsistency.
///
/// Every file is checked against its manifest's size and checksum first: the log's own frame
/// checksums catch a damaged record, but not a file cut short at a record's end (it reads as a
/// shorter log), nor damage in bytes no record covers.
pub fn rebuild(chain: &Chain, threads: usize, progress: Progress) -> Result<Rebuilt, RestoreError> {
    let mut problems = chain_problems(chain);
    problems.extend(damaged_files(chain, threads));
    if !problems.is_empty() {
        return Err(RestoreError::Inconsistent(problems));
    }
    let placement = chain.placement().map_err(|p| RestoreError::Inconsistent(vec![p]))?;
    let states = replay_all(chain, &placement, threads, progress).into_iter().collect::<Result<Vec<_>, _>>()?;
    let log_bytes = states.iter().map(|s| s.log_bytes).sum();
    let records = states.iter().map(|s| s.records).sum();
    let (partitions, problems) = into_partition_data(chain, &placement, states);
    if !problems.is_empty() {
        return Err(RestoreError::Inconsistent(problems));
    }
    Ok(Rebuilt { partitions, log_bytes, records })
}

/// Every file of the chain whose size or checksum is not its manifest's, or that is missing,
/// checked on up to `threads` threads.
fn damaged_files(chain: &Chain, threads: usize) -> Vec<Problem> {
    let files: Vec<_> = chain.files().collect();
    let per_thread = files.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let checks: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().filter_map(|(m, f)| file_problem(m, f)).collect::<Vec<_>>()))
            .collect();
        checks.into_iter().flat_map(|c| c.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Where replay of a restored vnode resumes: the first record of a fresh log (segment 0).
pub const RESTORED_RESUME_AT: Position = Position::new(0, HEADER_BYTES);

/// Writes, for each store vnode `host` runs in the new cluster, a checkpoint holding the keys of
/// its partitions (under `data_dir/vnodes/<vnode>/`) and an empty log. Returns each vnode's key count.
pub fn write_host(
    partitions: &BTreeMap<u32, Store>,
    topology: &Topology,
    host: &str,
    data_dir: &Path,
) -> Result<Vec<(String, usize)>, RestoreError> {
    let snapshot = partitions.len() as u32;
    let cluster = topology.placement.partitions();
    if snapshot != cluster {
        return Err(RestoreError::Partitions { snapshot, cluster });
    }
    let mut out = vec![];
    for id in topology.stores_on(host) {
        let dir = data_dir.join("vnodes").join(id.to_string());
        if dir.exists() {
            return Err(RestoreError::NotEmpty { dir });
        }
        // A vnode of the tree starts from the genesis metadata, as `node` builds a fresh one.
        let genesis = topology.tree_config(id).map(|_| &topology.genesis);
        let mut image = VnodeImage::empty(genesis);
        for p in topology.placement.partitions_of(id) {
            if let Some(data) = partitions.get(&p.0) {
                merge(&mut image.store, data);
            }
        }
        let keys = image.store.len();
        write_vnode(&dir, image)?;
        out.push((id.to_string(), keys));
    }
    Ok(out)
}

/// Copies every entry of `from` into `into`, with its value (or deletion), version and deadline.
fn merge(into: &mut Store, from: &Store) {
    for (key, entry) in from.iter() {
        into.apply(&ResolvedWrite {
            key: key.clone(),
            value: entry.value.clone(),
            version: entry.version,
            deadline_ms: entry.deadline_ms,
        });
    }
}

/// An empty log (its first segment, so the checkpoint's resume position is its first record) and
/// the checkpoint, both durable.
fn write_vnode(dir: &Path, image: VnodeImage) -> Result<(), RestoreError> {
    let wal_dir = dir.join("wal");
    std::fs::create_dir_all(&wal_dir).map_err(|source| RestoreError::Io { dir: wal_dir.clone(), source })?;
    let (wal, _) =
        Wal::open(&wal_dir, Options::default()).map_err(|source| RestoreError::Wal { dir: wal_dir.clone(), source })?;
    debug_assert_eq!(wal.first_position(), RESTORED_RESUME_AT);
    wal.close().map_err(|source| RestoreError::Wal { dir: wal_dir, source })?;
    checkpoint::write(dir, &Image::Store(image), RESTORED_RESUME_AT)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_core::store::value_digest;

    fn store(entries: &[(&str, &str, u64)]) -> Store {
        let mut s = Store::default();
        for &(k, v, version) in entries {
            s.apply(&ResolvedWrite { key: k.into(), value: Some(v.into()), version, deadline_ms: None });
        }
        s
    }

    fn digests(entries: &[(&str, &str, u64)]) -> Store {
        let mut s = Store::default();
        for &(k, v, version) in entries {
            s.apply(&ResolvedWrite {
                key: k.into(),
                value: Some(value_digest(v.as_bytes()).to_vec()),
                version,
                deadline_ms: None,
            });
        }
        s
    }

    #[test]
    fn a_replica_kept_as_digests_agrees_with_the_whole_one_and_the_data_is_the_whole_ones() {
        let mut r = Replicas::new(Path::new("snap"));
        r.offer("store0@b", 0, false, Store::default(), digests(&[("k", "v1", 1), ("j", "w", 2)]));
        r.offer("store0@a", 0, true, store(&[("k", "v1", 1), ("j", "w", 2)]), Store::default());
        let (data, problems) = r.into_parts();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(data[&0], store(&[("k", "v1", 1), ("j", "w", 2)]));
    }

    #[test]
    fn a_replica_whose_value_differs_at_the_same_version_is_a_problem() {
        let mut r = Replicas::new(Path::new("snap"));
        r.offer("store0@a", 0, true, store(&[("k", "v1", 1)]), Store::default());
        r.offer("store0@b", 0, false, Store::default(), digests(&[("k", "v2", 1)]));
        let (_, problems) = r.into_parts();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].what.contains("partition 0: replica data differs from store0@a's"), "{problems:?}");
    }

    fn vnode(name: &str, partitions: &[u32]) -> VnodeFiles {
        let at = Position::new(0, HEADER_BYTES);
        VnodeFiles {
            vnode: name.into(),
            partitions: partitions.to_vec(),
            epochs: Default::default(),
            chains: Default::default(),
            checkpoint: None,
            from: at,
            upto: at,
            segments: vec![],
        }
    }

    #[test]
    fn whole_replicas_are_spread_evenly_over_the_vnodes_holding_each_partition() {
        // Three hosts, two replicas, six partitions: each pair of vnodes shares two partitions.
        let vnodes = [vnode("a", &[0, 1, 2, 3]), vnode("b", &[0, 1, 4, 5]), vnode("c", &[2, 3, 4, 5])];
        let whole = whole_replicas(&vnodes);
        assert_eq!(whole.len(), 6);
        for v in &vnodes {
            assert_eq!(whole.values().filter(|w| **w == v.vnode).count(), 2, "{whole:?}");
            assert!(whole.iter().filter(|(_, w)| **w == v.vnode).all(|(p, _)| v.partitions.contains(p)));
        }
    }

    #[test]
    #[should_panic(expected = "no replica of it was replayed whole")]
    fn a_partition_without_a_whole_replica_is_refused() {
        let mut r = Replicas::new(Path::new("snap"));
        r.offer("store0@b", 0, false, Store::default(), digests(&[("k", "v1", 1)]));
        r.into_parts();
    }
}
