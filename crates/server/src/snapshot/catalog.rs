//! The snapshots under a root (`waymark snapshot list`): each chain with its members, complete
//! (a manifest) or not. Only directories that look like a snapshot count — a stray directory, or a
//! cluster directory given by mistake, is listed as ignored and never taken for an incomplete one.

use super::manifest::{parse_increment_dir_name, read_manifest, Manifest, ManifestError, MANIFEST_FILE};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// A member of a chain as found on disk.
#[derive(Clone, Debug)]
pub struct Listed {
    /// 0 = the full snapshot.
    pub increment: u32,
    pub dir: PathBuf,
    pub state: State,
    /// The directory's modification time (for incomplete members, which have no manifest time).
    pub modified_unix_ms: u64,
}

#[derive(Clone, Debug)]
pub enum State {
    Complete(Box<Manifest>),
    /// No manifest: being written, or abandoned.
    Incomplete,
    /// A manifest that cannot be read; the error names the file (shared: a listing is cloned).
    Unreadable(Arc<ManifestError>),
}

/// A full snapshot and its increments, in increment order.
#[derive(Clone, Debug)]
pub struct ChainListing {
    pub name: String,
    pub dir: PathBuf,
    /// Invariant: sorted by `increment`; `members[0].increment == 0`.
    pub members: Vec<Listed>,
}

impl ChainListing {
    pub fn manifest(&self, increment: u32) -> Option<&Manifest> {
        self.members.iter().find(|m| m.increment == increment).and_then(|m| match &m.state {
            State::Complete(m) => Some(&**m),
            _ => None,
        })
    }

    /// The full snapshot is complete: the chain restores to something.
    pub fn is_complete(&self) -> bool {
        self.manifest(0).is_some()
    }

    /// When the newest member was made: manifest times of complete members, else the directory's.
    pub fn newest_unix_ms(&self) -> u64 {
        let times = self.members.iter().map(|m| match &m.state {
            State::Complete(manifest) => manifest.created_unix_ms,
            _ => m.modified_unix_ms,
        });
        times.max().unwrap_or(0)
    }

    /// Members after `increment` (they need it to restore).
    pub fn dependents(&self, increment: u32) -> Vec<&Listed> {
        self.members.iter().filter(|m| m.increment > increment).collect()
    }
}

pub struct Catalog {
    pub root: PathBuf,
    /// Sorted by name.
    pub chains: Vec<ChainListing>,
    /// Entries of the root that are not snapshots.
    pub ignored: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{dir}: {source}")]
    Io { dir: PathBuf, source: std::io::Error },
}

/// Lists the snapshot chains under `root` (none if `root` does not exist yet).
pub fn list(root: &Path) -> Result<Catalog, CatalogError> {
    let mut catalog = Catalog { root: root.into(), chains: vec![], ignored: vec![] };
    if !root.exists() {
        return Ok(catalog);
    }
    for entry in read_dir(root)? {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if dir.is_dir() && looks_like_snapshot(&dir)? {
            let members = members(&dir)?;
            catalog.chains.push(ChainListing { name, dir, members });
        } else {
            catalog.ignored.push(dir);
        }
    }
    catalog.chains.sort_by(|a, b| a.name.cmp(&b.name));
    catalog.ignored.sort();
    Ok(catalog)
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, CatalogError> {
    let err = |source| CatalogError::Io { dir: dir.into(), source };
    std::fs::read_dir(dir).map_err(err)?.collect::<Result<Vec<_>, _>>().map_err(err)
}

/// Only a manifest, increments and vnode directories (`kind@host`) are in a snapshot directory.
fn looks_like_snapshot(dir: &Path) -> Result<bool, CatalogError> {
    let snapshot_entry = |name: &str| {
        name == MANIFEST_FILE
            || name == format!("{MANIFEST_FILE}.tmp")
            || parse_increment_dir_name(name).is_some()
            || waymark_core::VnodeId::parse(name).is_some()
    };
    Ok(read_dir(dir)?.iter().all(|e| snapshot_entry(&e.file_name().to_string_lossy())))
}

fn members(chain_dir: &Path) -> Result<Vec<Listed>, CatalogError> {
    let mut out = vec![listed(chain_dir, 0)?];
    for entry in read_dir(chain_dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(k) = parse_increment_dir_name(&name).filter(|k| *k > 0) {
            out.push(listed(&entry.path(), k)?);
        }
    }
    out.sort_by_key(|m| m.increment);
    Ok(out)
}

fn listed(dir: &Path, increment: u32) -> Result<Listed, CatalogError> {
    let state = match read_manifest(dir) {
        Ok(Some(m)) => State::Complete(Box::new(m)),
        Ok(None) => State::Incomplete,
        Err(e) => State::Unreadable(Arc::new(e)),
    };
    let meta = std::fs::metadata(dir).map_err(|source| CatalogError::Io { dir: dir.into(), source })?;
    let modified = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
    let modified_unix_ms = modified.map_or(0, |d| d.as_millis() as u64);
    Ok(Listed { increment, dir: dir.into(), state, modified_unix_ms })
}

/// A time in UTC, to the second: `2024-05-01T12:00:00Z`.
pub fn format_unix_ms(ms: u64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}
