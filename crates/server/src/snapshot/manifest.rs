//! The manifest of a snapshot (DESIGN §5): what a full snapshot or an increment holds, file by
//! file, with sizes and checksums, as JSON beside the files it names.
//!
//! Layout under a snapshot root: `<root>/<name>/manifest.json` and `<root>/<name>/<vnode>/…` for
//! the full snapshot; `<root>/<name>/inc-<K:04>/manifest.json` and `…/inc-<K:04>/<vnode>/wal/…`
//! for increment K. The manifest is written last, durably (temporary name, fsync, rename, fsync of
//! the directory): a directory without one is an incomplete snapshot, never a restorable one.

use crate::config::PARTITIONS_MAX;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use waymark_wal::Position;

/// The only format this code writes and reads.
pub const FORMAT: u32 = 1;
pub const MANIFEST_FILE: &str = "manifest.json";
/// A manifest lists a few files per vnode: anything larger is not one (checked before reading).
pub const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// One snapshot (full or increment) of cut `cut`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The chain's name: the directory under the root.
    pub name: String,
    #[serde(flatten)]
    pub kind: Kind,
    pub cut: u64,
    /// The strategy that took the cut, which decides how a restore filters the log
    /// (`consistent` in manifests written before it was recorded).
    #[serde(default)]
    pub strategy: waymark_core::CutStrategy,
    pub created_unix_ms: u64,
    pub cluster: ClusterShape,
    /// md5 (hex) of the cluster metadata at the cut; empty when unknown.
    pub metadata_md5: String,
    /// Every store vnode the cut reached that holds a partition, once.
    pub vnodes: Vec<VnodeFiles>,
    /// Hosts the metadata recorded dead at the cut: the cut did not reach their vnodes and their
    /// partitions are held by the live replicas alone (failover); empty when every host took part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts_down: Vec<String>,
}

/// A full snapshot starts a chain; increment K continues it from increment K-1 (or the full).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Kind {
    Full,
    Increment { number: u32, previous_cut: u64 },
}

impl Kind {
    /// 0 for the full snapshot, K for increment K.
    pub fn number(&self) -> u32 {
        match self {
            Kind::Full => 0,
            Kind::Increment { number, .. } => *number,
        }
    }
}

/// The shape of the cluster the snapshot was taken from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterShape {
    pub name: String,
    pub partitions: u32,
    pub replicas: usize,
    pub hosts: Vec<String>,
}

/// One store vnode's files in one snapshot.
///
/// Invariant: `segments` are contiguous, the first starts at `from` (when there is one) and the
/// last ends where `upto` starts; `upto` is a segment start (`offset == HEADER_BYTES`), and the
/// next increment's `from` for this vnode is exactly this `upto`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VnodeFiles {
    /// `kind@host`, e.g. `store0@node1`.
    pub vnode: String,
    /// The partitions whose replica this vnode holds.
    pub partitions: Vec<u32>,
    /// The epoch of each partition's chain as this vnode routed by it at the export (a failover
    /// raises it); empty in manifests written before failover.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub epochs: BTreeMap<u32, u64>,
    /// Each partition's chain at that epoch, primary first: the placement in force at the cut
    /// (issue 30); empty in manifests written before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chains: BTreeMap<u32, Vec<String>>,
    /// The base a vnode's replay starts from, when it had written one: in a full snapshot, and in
    /// the increment a vnode joins the chain at (its host was down at the one before).
    pub checkpoint: Option<FileEntry>,
    /// Where replay begins: the checkpoint's `resume_at`, or the first segment's start.
    #[serde(with = "position_json")]
    pub from: Position,
    /// The end of what was exported.
    #[serde(with = "position_json")]
    pub upto: Position,
    pub segments: Vec<FileEntry>,
}

impl VnodeFiles {
    /// Every file, checkpoint first.
    pub fn files(&self) -> impl Iterator<Item = &FileEntry> {
        self.checkpoint.iter().chain(&self.segments)
    }
}

/// The bytes of `files` together, saturating at `u64::MAX`: the sizes are read from a manifest,
/// which may hold anything.
pub fn bytes_of<'a>(files: impl IntoIterator<Item = &'a FileEntry>) -> u64 {
    files.into_iter().fold(0, |total, f| total.saturating_add(f.size))
}

/// A file of a snapshot, relative to its manifest's directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub crc32c: u32,
}

impl Manifest {
    /// Bytes of every file the manifest names.
    pub fn size_bytes(&self) -> u64 {
        bytes_of(self.vnodes.iter().flat_map(|v| v.files()))
    }

    pub fn vnode(&self, vnode: &str) -> Option<&VnodeFiles> {
        self.vnodes.iter().find(|v| v.vnode == vnode)
    }

    /// The partitions held by fewer copies than the cluster's replicas, each with its copies: a
    /// host was down at the cut (`hosts_down`), and what it held is in the live replicas alone.
    pub fn fewer_copies(&self) -> Vec<(u32, usize)> {
        let mut copies: BTreeMap<u32, usize> = (0..self.cluster.partitions).map(|p| (p, 0)).collect();
        for p in self.vnodes.iter().flat_map(|v| &v.partitions) {
            *copies.entry(*p).or_default() += 1;
        }
        copies.into_iter().filter(|(_, n)| *n < self.cluster.replicas).collect()
    }

    /// Every name a restore turns into a path stays inside the snapshot's directory: the chain's
    /// name and each vnode's are one plain path component (no `/`, no `..`), and each file's path
    /// is relative, of plain components, under its vnode's directory. A manifest is read from
    /// disk, which may hold anything.
    pub fn confined(&self) -> Result<(), Escape> {
        let not_plain = |what, name: &str| Escape::NotPlain { what, name: name.to_string() };
        if !plain_component(&self.name) {
            return Err(not_plain("the snapshot's name", &self.name));
        }
        for v in &self.vnodes {
            if !plain_component(&v.vnode) {
                return Err(not_plain("the vnode name", &v.vnode));
            }
            for f in v.files() {
                let mut parts = Path::new(&f.path).components();
                let under_vnode = parts.next() == Some(std::path::Component::Normal(v.vnode.as_ref()));
                let plain = parts.all(|c| matches!(c, std::path::Component::Normal(_)));
                if !under_vnode || !plain {
                    return Err(Escape::NotUnderVnode { path: f.path.clone(), vnode: v.vnode.clone() });
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` is one plain path component.
fn plain_component(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(one)), None) if one == name)
}

/// A name in a manifest that would lead a restore out of its snapshot's directory.
#[derive(Debug, thiserror::Error)]
pub enum Escape {
    #[error("{what} {name:?} is not a plain name (no `/`, `.` or `..`)")]
    NotPlain { what: &'static str, name: String },
    #[error("the file {path:?} is not a plain path under {vnode}/")]
    NotUnderVnode { path: String, vnode: String },
}

/// `<root>/<name>` for the full snapshot (increment 0), `<root>/<name>/inc-<K:04>` for increment K.
pub fn snapshot_dir(root: &Path, name: &str, increment: u32) -> PathBuf {
    match increment {
        0 => root.join(name),
        k => root.join(name).join(increment_dir_name(k)),
    }
}

pub fn increment_dir_name(k: u32) -> String {
    format!("inc-{k:04}")
}

/// The K of an `inc-<K:04>` directory name.
pub fn parse_increment_dir_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("inc-")?;
    (digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{file}: {action}: {source}")]
    Io { file: PathBuf, action: &'static str, source: std::io::Error },
    #[error("{file}: {size} bytes, more than any manifest ({MANIFEST_BYTES_MAX}): not a manifest")]
    TooLarge { file: PathBuf, size: u64 },
    #[error("{file}: not a manifest: {source}")]
    Json { file: PathBuf, source: serde_json::Error },
    #[error("{file}: format {found}, this build reads format {FORMAT}")]
    Format { file: PathBuf, found: u32 },
    #[error("{file}: {partitions} partitions, not in 1..={PARTITIONS_MAX}: no cluster has as many")]
    Partitions { file: PathBuf, partitions: u32 },
    #[error("{file}: {problem}: a manifest names files inside its own snapshot only")]
    Escapes {
        file: PathBuf,
        #[source]
        problem: Escape,
    },
}

fn io<'a>(file: &'a Path, action: &'static str) -> impl FnOnce(std::io::Error) -> ManifestError + 'a {
    move |source| ManifestError::Io { file: file.into(), action, source }
}

/// Writes `dir/manifest.json` durably. Call it after every file it names is in place and synced:
/// its presence is what makes the snapshot complete.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<u64, ManifestError> {
    let file = dir.join(MANIFEST_FILE);
    let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    let mut text =
        serde_json::to_vec_pretty(manifest).map_err(|source| ManifestError::Json { file: file.clone(), source })?;
    text.push(b'\n');
    let mut f = File::create(&tmp).map_err(io(&tmp, "creating"))?;
    f.write_all(&text).map_err(io(&tmp, "writing"))?;
    f.sync_all().map_err(io(&tmp, "syncing"))?;
    fs::rename(&tmp, &file).map_err(io(&file, "renaming into place"))?;
    sync_dir(dir)?;
    Ok(text.len() as u64)
}

/// Reads `dir/manifest.json`; `None` when there is none (an incomplete snapshot).
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, ManifestError> {
    let file = dir.join(MANIFEST_FILE);
    let f = match File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&file, "opening")(e)),
    };
    let size = f.metadata().map_err(io(&file, "reading metadata"))?.len();
    if size > MANIFEST_BYTES_MAX {
        return Err(ManifestError::TooLarge { file, size });
    }
    let mut text = Vec::with_capacity(size as usize);
    f.take(MANIFEST_BYTES_MAX).read_to_end(&mut text).map_err(io(&file, "reading"))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|source| ManifestError::Json { file: file.clone(), source })?;
    if manifest.format != FORMAT {
        return Err(ManifestError::Format { file, found: manifest.format });
    }
    // Checked before anything is sized by it (`fewer_copies`, a restore's placement).
    if !(1..=PARTITIONS_MAX).contains(&manifest.cluster.partitions) {
        return Err(ManifestError::Partitions { file, partitions: manifest.cluster.partitions });
    }
    if let Err(problem) = manifest.confined() {
        return Err(ManifestError::Escapes { file, problem });
    }
    Ok(Some(manifest))
}

/// How much of a file `size_and_crc` reads at a time.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Streams a file once: its length and crc32c.
pub fn size_and_crc(file: &Path) -> std::io::Result<(u64, u32)> {
    let mut f = File::open(file)?;
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((size, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        size += n as u64;
    }
}

pub fn sync_dir(dir: &Path) -> Result<(), ManifestError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir, "syncing directory"))
}

/// `Position` as `{"segment": …, "offset": …}` (the WAL crate stays free of serde).
mod position_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use waymark_wal::Position;

    #[derive(Serialize, Deserialize)]
    struct Pos {
        segment: u64,
        offset: u64,
    }

    pub fn serialize<S: Serializer>(p: &Position, s: S) -> Result<S::Ok, S::Error> {
        Pos { segment: p.segment, offset: p.offset }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Position, D::Error> {
        let p = Pos::deserialize(d)?;
        Ok(Position::new(p.segment, p.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Manifest {
        Manifest {
            format: FORMAT,
            name: "nightly".into(),
            kind: Kind::Increment { number: 2, previous_cut: 4 },
            cut: 5,
            strategy: waymark_core::CutStrategy::Versions,
            created_unix_ms: 1_700_000_000_000,
            cluster: ClusterShape { name: "local".into(), partitions: 8, replicas: 2, hosts: vec!["node1".into()] },
            metadata_md5: String::new(),
            vnodes: vec![VnodeFiles {
                vnode: "store0@node1".into(),
                partitions: vec![0, 1],
                epochs: Default::default(),
                chains: Default::default(),
                checkpoint: None,
                from: Position::new(100, 24),
                upto: Position::new(300, 24),
                segments: vec![FileEntry { path: "store0@node1/wal/x.wal".into(), size: 200, crc32c: 7 }],
            }],
            hosts_down: vec![],
        }
    }

    #[test]
    fn partitions_with_fewer_copies_than_replicas_are_named_with_their_copies() {
        let mut m = sample();
        let other =
            VnodeFiles { vnode: "store0@node2".into(), partitions: vec![1, 2, 3, 4, 5, 6, 7], ..m.vnodes[0].clone() };
        m.vnodes.push(other);
        m.hosts_down = vec!["node3".into()];
        let fewer = m.fewer_copies();
        assert_eq!(fewer, vec![(0, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1)], "partition 1 has both copies");
        let read = serde_json::to_string(&m).unwrap();
        assert!(read.contains(r#""hosts_down":["node3"]"#), "{read}");
        let before: Manifest = serde_json::from_str(&serde_json::to_string(&sample()).unwrap()).unwrap();
        assert!(before.hosts_down.is_empty(), "a manifest without the field reads as every host up");
    }

    #[test]
    fn a_manifest_reads_back_as_written_and_its_kind_is_tagged() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_manifest(dir.path()).unwrap().is_none());
        write_manifest(dir.path(), &sample()).unwrap();
        assert_eq!(read_manifest(dir.path()).unwrap().unwrap(), sample());
        let text = fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(text.contains("\"kind\": \"Increment\""), "{text}");
        assert!(text.contains("\"strategy\": \"versions\""), "{text}");
        let without = text.replace("\"strategy\": \"versions\",", "");
        fs::write(dir.path().join(MANIFEST_FILE), without).unwrap();
        let old = read_manifest(dir.path()).unwrap().unwrap();
        assert_eq!(old.strategy, waymark_core::CutStrategy::Consistent, "a manifest from before strategies");
        assert!(!dir.path().join("manifest.json.tmp").exists());
    }

    #[test]
    fn garbage_and_unknown_formats_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MANIFEST_FILE), b"{ not json").unwrap();
        let err = read_manifest(dir.path()).unwrap_err();
        assert!(err.to_string().contains("manifest.json"), "{err}");
        write_manifest(dir.path(), &Manifest { format: 9, ..sample() }).unwrap();
        assert!(matches!(read_manifest(dir.path()), Err(ManifestError::Format { found: 9, .. })));
    }

    #[test]
    fn increment_dir_names_round_trip() {
        assert_eq!(increment_dir_name(3), "inc-0003");
        assert_eq!(parse_increment_dir_name("inc-0003"), Some(3));
        assert_eq!(parse_increment_dir_name("inc-3"), None);
        assert_eq!(parse_increment_dir_name("store0@node1"), None);
    }
}
