//! Reading one store vnode's part of a chain back: its base checkpoint and every record of its
//! segments (full snapshot, then increments in order), replayed through the restore filter
//! (DESIGN §4) to the chain's target cut.
//!
//! `restore` streams ([`stream_to_cut`]): frames are checked and decoded from large reads into one
//! buffer and fed to the filter as they come, so memory holds the restored state and that buffer,
//! not the log. `check` reads every record first ([`read_vnode_log`]), because it also looks at
//! the transactions the filter leaves out (closure across replicas).

use super::chain::Chain;
use super::manifest::{bytes_of, VnodeFiles};
use crate::storage::checkpoint::{self, CheckpointError, Image};
use std::path::{Path, PathBuf};
use waymark_core::cut::restore::{
    self, find_finish, restore_to_cut, CutReplay, KeepWhole, Replayed, RestoreError, Restored,
};
use waymark_core::cut::versions_restore::{find_versions_records, restore_to_versions_cut};
use waymark_core::{CutId, CutStrategy, Record, RecordView};
use waymark_wal::{FrameScanner, Position, Reader, WalError};

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
    #[error("{file}: record at offset {offset} does not decode: {source}")]
    Record { file: PathBuf, offset: u64, source: waymark_core::record::RecordError },
    #[error("{dir}: no CutFinish of cut {cut} in the log of {vnode}: its local cut did not finish there")]
    NoFinish { dir: PathBuf, vnode: String, cut: u64 },
    #[error("{dir}: no VersionsMap and VersionsSkip of cut {cut} in the log of {vnode}: its phases 2 and 3 did not end there")]
    NoVersionsRecords { dir: PathBuf, vnode: String, cut: u64 },
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

/// Reads `vnode`'s checkpoint (if the member its replay starts at has one) and every record of
/// its segments from there.
pub fn read_vnode_log(chain: &Chain, vnode: &str) -> Result<VnodeLog, ReplayError> {
    let mut log = VnodeLog { base: restore::Checkpoint::default(), records: vec![], log_bytes: 0 };
    let start = chain.start_of(vnode).ok_or_else(|| missing(chain, chain.members.len() - 1, vnode))?;
    for (k, member) in chain.members.iter().enumerate().skip(start) {
        let files = member_files(chain, k, vnode)?;
        let vnode_dir = member.dir.join(vnode);
        if k == start && files.checkpoint.is_some() {
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
            source: e,
        })?;
        log.records.push(record);
    }
    log.log_bytes = log.log_bytes.saturating_add(bytes_of(&files.segments));
    Ok(())
}

/// Replays a vnode's log to the chain's target cut with the filter of the strategy that took it:
/// DESIGN §4's up to its `CutFinish{cut}`, or `versions`' (seed 002) up to its `VersionsMap{cut}`.
pub fn replay_to_cut(chain: &Chain, vnode: &str, log: VnodeLog) -> Result<Restored, ReplayError> {
    let cut = chain.target().manifest.cut;
    let dir = chain.target().dir.join(vnode);
    if chain.target().manifest.strategy == CutStrategy::Versions {
        let Some(target) = find_versions_records(&log.records, CutId(cut)) else {
            return Err(ReplayError::NoVersionsRecords { dir, vnode: vnode.into(), cut });
        };
        return restore_to_versions_cut(log.base, &log.records, &target).map_err(|source| ReplayError::Restore {
            dir,
            vnode: vnode.into(),
            cut,
            source,
        });
    }
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

/// A vnode replayed by [`stream_to_cut`], with what it read.
pub struct Streamed {
    pub restored: Restored,
    /// Bytes of segment files read.
    pub log_bytes: u64,
    /// Records in them (all of them, those after the cut's finish too).
    pub records: u64,
}

/// Replays `vnode`'s base and log to the chain's target cut without holding the log: the result,
/// and the errors with their precedence, are those of [`read_vnode_log`] then [`replay_to_cut`]
/// (every frame is checked and decoded, to the end of the log, before the filter's verdict).
///
/// With `whole`, only the keys it accepts keep their values; the others keep digests
/// ([`CutReplay::keeping_whole`]). A cut of the `versions` strategy is replayed from the log held
/// whole, every key whole: its filter is not built to stream (the comparison strategy is not where
/// restore speed is measured).
pub fn stream_to_cut(chain: &Chain, vnode: &str, whole: Option<KeepWhole>) -> Result<Streamed, ReplayError> {
    if chain.target().manifest.strategy == CutStrategy::Versions {
        let log = read_vnode_log(chain, vnode)?;
        let (log_bytes, records) = (log.log_bytes, log.records.len() as u64);
        let restored = replay_to_cut(chain, vnode, log)?;
        return Ok(Streamed { restored, log_bytes, records });
    }
    let cut = CutId(chain.target().manifest.cut);
    let keeping = |replay: CutReplay| match &whole {
        Some(whole) => replay.keeping_whole(whole.clone()),
        None => replay,
    };
    let first = stream_once(chain, vnode, |base| keeping(CutReplay::seeking(base, cut)))?;
    let (outcome, log_bytes, records) = first;
    let restored = match outcome {
        Replayed::Restored(restored) => restored,
        // The finish excludes a commit the first pass applied: a second pass knows the finish.
        Replayed::Again(finish) => {
            match stream_once(chain, vnode, |base| keeping(CutReplay::toward(base, finish, Default::default())))?.0 {
                Replayed::Restored(restored) => restored,
                Replayed::Again(_) => unreachable!("a replay toward a known finish never asks again"),
            }
        }
    };
    Ok(Streamed { restored, log_bytes, records })
}

/// One pass over the vnode's base and log through the filter `filter_of` makes of the base.
fn stream_once(
    chain: &Chain,
    vnode: &str,
    filter_of: impl FnOnce(restore::Checkpoint) -> CutReplay,
) -> Result<(Replayed, u64, u64), ReplayError> {
    let cut = CutId(chain.target().manifest.cut);
    let (mut log_bytes, mut records) = (0u64, 0);
    let mut filter_of = Some(filter_of);
    let mut pass = None;
    let start = chain.start_of(vnode).ok_or_else(|| missing(chain, chain.members.len() - 1, vnode))?;
    for (k, member) in chain.members.iter().enumerate().skip(start) {
        let files = member_files(chain, k, vnode)?;
        let vnode_dir = member.dir.join(vnode);
        if k == start {
            let base = match files.checkpoint {
                Some(_) => read_base(&vnode_dir, files.from)?,
                None => restore::Checkpoint::default(),
            };
            pass = filter_of.take().map(|f| Pass { cut, replay: f(base), verdict: Ok(()), finish_seen: false });
        }
        let Some(pass) = pass.as_mut() else { continue };
        if files.segments.is_empty() {
            continue;
        }
        records += pass.segments(&vnode_dir, vnode, files)?;
        log_bytes = log_bytes.saturating_add(bytes_of(&files.segments));
    }
    let pass = pass.ok_or_else(|| missing(chain, 0, vnode))?;
    let no_finish = || ReplayError::NoFinish { dir: chain.target().dir.join(vnode), vnode: vnode.into(), cut: cut.0 };
    if !pass.finish_seen {
        return Err(no_finish());
    }
    pass.verdict.map_err(|source| restore_error(chain, vnode, source))?;
    let outcome = pass.replay.finish().map_err(|source| restore_error(chain, vnode, source))?;
    Ok((outcome, log_bytes, records))
}

fn member_files<'c>(chain: &'c Chain, k: usize, vnode: &str) -> Result<&'c VnodeFiles, ReplayError> {
    chain.members[k].manifest.vnode(vnode).ok_or_else(|| missing(chain, k, vnode))
}

fn missing(chain: &Chain, k: usize, vnode: &str) -> ReplayError {
    ReplayError::MissingVnode {
        manifest: chain.members[k].dir.join(super::manifest::MANIFEST_FILE),
        vnode: vnode.into(),
    }
}

fn restore_error(chain: &Chain, vnode: &str, source: RestoreError) -> ReplayError {
    let cut = chain.target().manifest.cut;
    ReplayError::Restore { dir: chain.target().dir.join(vnode), vnode: vnode.into(), cut, source }
}

/// One pass of the filter over a vnode's log, and what decides which error it reports: as
/// `read_vnode_log` then `replay_to_cut` would, damage anywhere first, then a log without the
/// cut's finish, then the filter's own first error.
struct Pass {
    cut: CutId,
    replay: CutReplay,
    /// The filter's first error; it is fed nothing after.
    verdict: Result<(), RestoreError>,
    /// A `CutFinish` of the cut was met (whether or not the filter got that far).
    finish_seen: bool,
}

impl Pass {
    /// Feeds every frame of one member's segments to the filter, checking and decoding each (those
    /// after the finish too). Returns the records read.
    fn segments(&mut self, vnode_dir: &Path, vnode: &str, files: &VnodeFiles) -> Result<u64, ReplayError> {
        let wal_dir = vnode_dir.join("wal");
        let wal_err = |source| ReplayError::Wal { vnode: vnode.into(), dir: wal_dir.clone(), source };
        let mut scanner = FrameScanner::open(&wal_dir, files.from, RECORD_BYTES_MAX).map_err(wal_err)?;
        let mut records = 0;
        while let Some(frame) = scanner.next_frame().map_err(wal_err)? {
            records += 1;
            let view = RecordView::decode(frame.kind, frame.payload).map_err(|e| ReplayError::Record {
                file: wal_dir.join(waymark_wal::segment::segment_file_name(frame.position.segment)),
                offset: frame.position.offset,
                source: e,
            })?;
            self.finish_seen |= matches!(&view, RecordView::CutFinish(f) if f.cut == self.cut);
            if self.verdict.is_ok() {
                if let Err(e) = self.replay.step(view) {
                    self.verdict = Err(e);
                }
            }
        }
        Ok(records)
    }
}
