//! A snapshot chain as restore and check see it: the full snapshot and its increments 1..=K, read
//! from their manifests, and the consistency of those manifests with one another.

use super::manifest::{
    read_manifest, size_and_crc, snapshot_dir, FileEntry, Kind, Manifest, ManifestError, MANIFEST_FILE,
};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use waymark_core::{Placement, VnodeId};
use waymark_wal::{segment::HEADER_BYTES, Position};

/// One thing wrong with a snapshot, and the file (or directory) where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub what: String,
}

impl Problem {
    pub fn new(file: impl Into<PathBuf>, what: impl Into<String>) -> Problem {
        Problem { file: file.into(), what: what.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.what)
    }
}

/// A member of a chain: where it lies and what its manifest says.
#[derive(Clone, Debug)]
pub struct Member {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// The full snapshot then increments 1..=K, in order.
///
/// Invariant: `members` is non-empty and `members[i]` is increment `i` (0 = the full snapshot).
#[derive(Clone, Debug)]
pub struct Chain {
    pub name: String,
    pub members: Vec<Member>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("{dir}: no such snapshot")]
    Missing { dir: PathBuf },
    #[error("{dir}: incomplete snapshot (no {MANIFEST_FILE}): it was never finished")]
    Incomplete { dir: PathBuf },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl Chain {
    /// The snapshot restored to: the last member.
    pub fn target(&self) -> &Member {
        self.members.last().expect("a chain has its full snapshot")
    }

    /// The store vnodes of the target snapshot, by name.
    pub fn vnodes(&self) -> Vec<String> {
        self.target().manifest.vnodes.iter().map(|v| v.vnode.clone()).collect()
    }

    /// The member where `vnode`'s replay begins: the first of the members, up to the target, that
    /// hold it without a break — the full snapshot, or the increment it joined the chain at from
    /// its cut's base (its host was down at the one before). `None`: the target does not hold it.
    pub fn start_of(&self, vnode: &str) -> Option<usize> {
        let holds = |k: &usize| self.members[*k].manifest.vnode(vnode).is_some();
        let last = self.members.len() - 1;
        if !holds(&last) {
            return None;
        }
        Some((0..last).rev().find(|k| !holds(k)).map_or(0, |gap| gap + 1))
    }

    /// Every file of every member, with the member it belongs to.
    pub fn files(&self) -> impl Iterator<Item = (&Member, &FileEntry)> {
        self.members.iter().flat_map(|m| m.manifest.vnodes.iter().flat_map(move |v| v.files().map(move |f| (m, f))))
    }

    /// The placement the target's manifests describe: partition → the vnodes holding a replica.
    pub fn placement(&self) -> Result<Placement, Problem> {
        let target = self.target();
        let file = target.dir.join(MANIFEST_FILE);
        let partitions = target.manifest.cluster.partitions;
        let mut chains: BTreeMap<u32, Vec<VnodeId>> = (0..partitions).map(|p| (p, vec![])).collect();
        let mut members = vec![];
        for v in &target.manifest.vnodes {
            let id =
                VnodeId::parse(&v.vnode).ok_or_else(|| Problem::new(&file, format!("bad vnode name {:?}", v.vnode)))?;
            for p in &v.partitions {
                let chain = chains
                    .get_mut(p)
                    .ok_or_else(|| Problem::new(&file, format!("{id} holds partition {p} of only {partitions}")))?;
                chain.push(id.clone());
            }
            members.push(id);
        }
        if let Some((p, _)) = chains.iter().find(|(_, c)| c.is_empty()) {
            return Err(Problem::new(&file, format!("partition {p} has no replica in the snapshot")));
        }
        let chains = chains
            .into_values()
            .map(|chain| waymark_core::placement::ChainRecord { epoch: 0, chain, learners: vec![] })
            .collect();
        Placement::from_chains(chains, members).ok_or_else(|| Problem::new(&file, "a partition names a vnode twice"))
    }
}

/// Reads the chain `name` up to increment `increment` (default: the newest complete one).
pub fn load_chain(root: &Path, name: &str, increment: Option<u32>) -> Result<Chain, ChainError> {
    let dir = snapshot_dir(root, name, 0);
    if !dir.is_dir() {
        return Err(ChainError::Missing { dir });
    }
    let mut members = vec![];
    let mut k = 0;
    loop {
        let dir = snapshot_dir(root, name, k);
        let wanted = increment.is_some_and(|last| k <= last);
        let manifest = match read_manifest(&dir)? {
            Some(m) => m,
            None if k == 0 || (wanted && dir.is_dir()) => return Err(ChainError::Incomplete { dir }),
            None if wanted => return Err(ChainError::Missing { dir }),
            None => break,
        };
        members.push(Member { dir, manifest });
        if increment == Some(k) {
            break;
        }
        k += 1;
    }
    Ok(Chain { name: name.into(), members })
}

/// What is inconsistent between the chain's manifests: names, numbering, cuts, the cluster, and
/// for every vnode that each member starts exactly where the previous one ended.
pub fn chain_problems(chain: &Chain) -> Vec<Problem> {
    let mut out = vec![];
    let full = &chain.members[0].manifest;
    for (k, member) in chain.members.iter().enumerate() {
        let m = &member.manifest;
        let file = member.dir.join(MANIFEST_FILE);
        let mut say = |what: String| out.push(Problem::new(&file, what));
        if m.name != chain.name {
            say(format!("names the snapshot {:?}, but it lies in {:?}", m.name, chain.name));
        }
        match (k, m.kind) {
            (0, Kind::Full) => {}
            // Member 0 is the full snapshot: an increment there (numbered 0 or not) has no
            // previous member, and is the wrong kind below.
            (1.., Kind::Increment { number, previous_cut }) if number as usize == k => {
                let prev = chain.members[k - 1].manifest.cut;
                if previous_cut != prev {
                    say(format!("follows cut {previous_cut}, but the previous snapshot is of cut {prev}"));
                }
            }
            (_, kind) => say(format!("is {kind:?}, expected member {k} of the chain")),
        }
        if m.cluster.partitions != full.cluster.partitions {
            say(format!("has {} partitions, the full snapshot {}", m.cluster.partitions, full.cluster.partitions));
        }
        if k > 0 {
            out.extend(continuity(&chain.members[k - 1], member));
        }
    }
    out
}

/// Every vnode of `next` continues from exactly where it ended in `prev`. A vnode of `prev` may
/// be absent from `next` only when `next` names its host down (failover: its partitions are in
/// the live replicas); that every partition still has a copy is `Chain::placement`'s part.
fn continuity(prev: &Member, next: &Member) -> Vec<Problem> {
    let file = next.dir.join(MANIFEST_FILE);
    let mut out = vec![];
    let down = |vnode: &str| next.manifest.hosts_down.iter().any(|h| vnode.ends_with(&format!("@{h}")));
    for p in &prev.manifest.vnodes {
        match next.manifest.vnode(&p.vnode) {
            None if down(&p.vnode) => {}
            None => {
                out.push(Problem::new(&file, format!("vnode {} is missing (it is in {})", p.vnode, prev.dir.display())))
            }
            Some(n) if n.from != p.upto => out.push(Problem::new(
                &file,
                format!(
                    "gap in the log of {}: this starts at {}, the previous snapshot ended at {}",
                    p.vnode, n.from, p.upto
                ),
            )),
            Some(_) => {}
        }
    }
    for n in next.manifest.vnodes.iter().filter(|n| prev.manifest.vnode(&n.vnode).is_none()) {
        // Joining the chain here, it starts from its cut's base: its checkpoint, or (none
        // written yet) the very start of its log.
        if n.checkpoint.is_none() && n.from != Position::new(0, HEADER_BYTES) {
            let what = format!(
                "vnode {} joins the chain here without a base: no checkpoint, and its log starts at {}",
                n.vnode, n.from
            );
            out.push(Problem::new(&file, what));
        }
    }
    out
}

/// The file exists with the manifest's size and checksum.
pub fn file_problem(member: &Member, entry: &FileEntry) -> Option<Problem> {
    let file = member.dir.join(&entry.path);
    match size_and_crc(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Problem::new(file, "missing")),
        Err(e) => Some(Problem::new(file, format!("cannot be read: {e}"))),
        Ok((size, _)) if size != entry.size => {
            Some(Problem::new(file, format!("size {size} bytes, the manifest says {}", entry.size)))
        }
        Ok((_, crc)) if crc != entry.crc32c => Some(Problem::new(
            file,
            format!("crc32c {crc:08x}, the manifest says {:08x}: the file is damaged", entry.crc32c),
        )),
        Ok(_) => None,
    }
}
