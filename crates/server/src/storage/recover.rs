//! Opening a vnode's storage at start: the newest checkpoint and the log that follows it (DESIGN §7).
//! The log repairs a torn tail itself (`Wal::open`); everything else that is wrong — a gap between
//! the checkpoint and the log, a record that does not decode — stops the start with an error that
//! names the directory and the position, and nothing is modified.

use super::checkpoint::{self, CheckpointError, Image};
use std::path::{Path, PathBuf};
use waymark_core::record::RecordError;
use waymark_core::Record;
use waymark_wal::{Options, Position, Wal, WalError};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{dir}: cannot create: {source}")]
    Create { dir: PathBuf, source: std::io::Error },
    #[error("log in {dir}: {source}")]
    Wal { dir: PathBuf, source: WalError },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{dir}: the checkpoint resumes at {resume_at} but the log starts at {first}: segments are missing")]
    Gap { dir: PathBuf, resume_at: Position, first: Position },
    #[error("{dir}: the log starts at {first} and there is no checkpoint: its first segments are missing")]
    NoCheckpoint { dir: PathBuf, first: Position },
    #[error("{dir}: record at {at} cannot be decoded: {source}")]
    Record { dir: PathBuf, at: Position, source: RecordError },
}

/// A vnode's storage, opened: the log ready for appends and what a restart rebuilds from.
pub struct Opened {
    pub wal: Wal,
    pub image: Option<Image>,
    /// The records after the checkpoint (or the whole log), in order.
    pub records: Vec<Record>,
    /// Bytes cut from a torn tail, if any.
    pub truncated_bytes: u64,
}

/// The log lives in `<dir>/wal`, the checkpoint in `<dir>/checkpoint`.
pub fn open(dir: &Path, options: Options) -> Result<Opened, StorageError> {
    let wal_dir = dir.join("wal");
    std::fs::create_dir_all(&wal_dir).map_err(|source| StorageError::Create { dir: wal_dir.clone(), source })?;
    let wal_err = |source| StorageError::Wal { dir: wal_dir.clone(), source };
    let (mut wal, report) = Wal::open(&wal_dir, options).map_err(wal_err)?;
    let checkpoint = checkpoint::read(dir)?;
    let first = wal.first_position();
    let start = match &checkpoint {
        Some(c) if c.resume_at < first => {
            return Err(StorageError::Gap { dir: dir.into(), resume_at: c.resume_at, first });
        }
        Some(c) => c.resume_at,
        None if first.segment != 0 => return Err(StorageError::NoCheckpoint { dir: dir.into(), first }),
        None => first,
    };
    let mut records = vec![];
    for read in wal.reader_from(start).map_err(wal_err)? {
        let read = read.map_err(wal_err)?;
        let record = Record::decode(read.kind, &read.payload).map_err(|source| StorageError::Record {
            dir: dir.into(),
            at: read.position,
            source,
        })?;
        records.push(record);
    }
    let image = checkpoint.map(|c| c.image);
    Ok(Opened { wal, image, records, truncated_bytes: report.bytes_dropped })
}
