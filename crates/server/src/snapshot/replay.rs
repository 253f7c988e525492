//! Reading one store vnode's part of a chain back: its base checkpoint and every record of its
//! segments (full snapshot, then increments in order), decoded; then replaying them through the
//! restore filter (DESIGN §4) to the chain's target cut. Shared by `check` and `restore`.

use super::chain::Chain;
use super::manifest::VnodeFiles;
use crate::storage::checkpoint::{self, CheckpointError, Image};
use std::path::{Path, PathBuf};
use waymark_core::cut::restore::{self, find_finish, restore_to_cut, RestoreError, Restored};
use waymark_core::{CutId, Record};
use waymark_wal::{Position, Reader, WalError};

/// A reader never allocates more than the frame's length field allows, and checks it against the
/// bytes left in the file first; the server's own limit is not known offline.
const RECORD_BYTES_MAX: u64 = u32::MAX as u64;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{file}: holds a manager's image, not a store vnode's")]
    NotStore { file: PathBuf },
    #[error("{file}: resumes at {resume_at}, but the manifest says replay starts at {from}")]
    ResumeMismatch { file: PathBuf, resume_at: Position, from: Position },
    #[error("{manifest}: vnode {vnode} is missing")]
    MissingVnode { manifest: PathBuf, vnode: String },
    #[error("log of {vnode} in {dir}: {source}")]
    Wal { vnode: String, dir: PathBuf, source: WalError },
    #[error("{file}: record at offset {offset} does not decode: {message}")]
    Record { file: PathBuf, offset: u64, message: String },
    #[error("{dir}: no CutFinish of cut {cut} in the log of {vnode}: its local cut did not finish there")]
    NoFinish { dir: PathBuf, vnode: String, cut: u64 },
    #[error("{dir}: replaying {vnode} to cut {cut}: {source}")]
    Restore { dir: PathBuf, vnode: String, cut: u64, source: RestoreError },
}

/// A vnode's base and log, as read from the chain.
pub struct VnodeLog {
    pub base: restore::Checkpoint,
    pub records: Vec<Record>,
    /// Bytes of segment files read.
    pub log_bytes: u64,
}

/// Reads `vnode`'s checkpoint (if the full snapshot has one) and every record of its segments.
pub fn read_vnode_log(chain: &Chain, vnode: &str) -> Result<VnodeLog, ReplayError> {
    let mut log = VnodeLog { base: restore::Checkpoint::default(), records: vec![], log_bytes: 0 };
    for (k, member) in chain.members.iter().enumerate() {
        let files = member.manifest.vnode(vnode).ok_or_else(|| ReplayError::MissingVnode {
            manifest: member.dir.join(super::manifest::MANIFEST_FILE),
            vnode: vnode.into(),
        })?;
        let vnode_dir = member.dir.join(vnode);
        if k == 0 && files.checkpoint.is_some() {
            log.base = read_base(&vnode_dir, files.from)?;
        }
        read_segments(&vnode_dir, vnode, files, &mut log)?;
    }
    Ok(log)
}

/// The checkpoint in `vnode_dir`, as the restore filter's base: data plus prepared write sets.
fn read_base(vnode_dir: &Path, from: Position) -> Result<restore::Checkpoint, ReplayError> {
    let file = vnode_dir.join(checkpoint::FILE_NAME);
    let Some(c) = checkpoint::read(vnode_dir)? else {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "the manifest names it");
        return Err(CheckpointError::Io { file, action: "opening", source }.into());
    };
    if c.resume_at != from {
        return Err(ReplayError::ResumeMismatch { file, resume_at: c.resume_at, from });
    }
    match c.image {
        Image::Store(image) => Ok(restore::Checkpoint {
            store: image.store,
            prepared: image.prepared.into_iter().map(|(branch, p)| (branch, p.writes)).collect(),
        }),
        Image::Manager(_) => Err(ReplayError::NotStore { file }),
    }
}

fn read_segments(vnode_dir: &Path, vnode: &str, files: &VnodeFiles, log: &mut VnodeLog) -> Result<(), ReplayError> {
    if files.segments.is_empty() {
        return Ok(());
    }
    let wal_dir = vnode_dir.join("wal");
    let wal_err = |source| ReplayError::Wal { vnode: vnode.into(), dir: wal_dir.clone(), source };
    for read in Reader::open(&wal_dir, files.from, RECORD_BYTES_MAX).map_err(wal_err)? {
        let read = read.map_err(wal_err)?;
        let record = Record::decode(read.kind, &read.payload).map_err(|e| ReplayError::Record {
            file: wal_dir.join(waymark_wal::segment::segment_file_name(read.position.segment)),
            offset: read.position.offset,
            message: e.to_string(),
        })?;
        log.records.push(record);
    }
    log.log_bytes += files.segments.iter().map(|s| s.size).sum::<u64>();
    Ok(())
}

/// Replays a vnode's log to `cut` with the filter of DESIGN §4, up to its `CutFinish{cut}`.
pub fn replay_to_cut(chain: &Chain, vnode: &str, log: VnodeLog) -> Result<Restored, ReplayError> {
    let cut = chain.target().manifest.cut;
    let dir = chain.target().dir.join(vnode);
    let Some(finish) = find_finish(&log.records, CutId(cut)).cloned() else {
        return Err(ReplayError::NoFinish { dir, vnode: vnode.into(), cut });
    };
    restore_to_cut(log.base, &log.records, &finish).map_err(|source| ReplayError::Restore {
        dir,
        vnode: vnode.into(),
        cut,
        source,
    })
}
