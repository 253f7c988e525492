//! A vnode's log writer (DESIGN §7), run on the vnode's own thread: it owns the vnode's
//! `waymark-wal` log, appends what the vnode's steps emit, and group-commits — the driver handles a
//! batch of inputs, appending as it goes, then calls `sync` once: one `fdatasync` for everything the
//! batch appended. What became durable (and the alteration records read back after the sync: seed
//! 004 point 4, the record is read after write and its md5 compared) waits in `take_progress` for
//! the driver to step. One thread for both, because a hand-over per batch to a writer thread and
//! back cost two context switches per durable write, and the vnode waits for that sync anyway (its
//! outbox holds every send and reply behind the records before it).
//!
//! Checkpoints: with the vnode's image, the writer seals the active segment, so the checkpoint
//! stands exactly for the sealed segments; a helper thread writes the file and says so on the
//! `CheckpointWritten` channel, then the sealed segments before it are removed (`truncate`, unless
//! pinned: a kept snapshot still needs them).
//!
//! Snapshots (`cut_files`): the writer notes each cut's base and end as it appends `CutStart` and
//! `CutFinish` (under `versions`: the cut's first record, and `VersionsSkip`), and exports a cut's
//! files on request (`export`), sealing the segment that holds the cut's end then — it owns the
//! log, so the segments it links cannot be removed meanwhile.
//!
//! Invariant: `reported <= durable <= appended`; `take_progress` reports a durable position only
//! after the records before it are synced (or, with `fsync = "never"`, handed to the OS).

use super::checkpoint::{self, Image};
use super::cut_files::{CutFileError, CutFiles};
use super::export::{export_vnode, ExportError};
use crate::config::FsyncPolicy;
use crate::snapshot::manifest::VnodeFiles;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use waymark_core::alter::AlterSeq;
use waymark_core::{CutId, Lsn, Record, VnodeId};
use waymark_wal::{Position, Wal, WalError};

/// Why a vnode's log cannot go on: the driver stops the host (`HostEvent::Fatal`), since a node
/// with a broken disk stops rather than lie.
#[derive(Debug, thiserror::Error)]
pub enum LogWriteError {
    #[error("appending: {source}")]
    Append { source: WalError },
    #[error("syncing: {source}")]
    Sync { source: WalError },
    #[error("reading back at {at}: {source}")]
    ReadBack { at: Position, source: WalError },
    /// A cut's base could not be kept as its first record was appended.
    #[error(transparent)]
    CutBase(#[from] CutFileError),
    #[error("rolling for a checkpoint: {source}")]
    Roll { source: WalError },
    #[error("starting the checkpoint writer: {source}")]
    CheckpointThread { source: std::io::Error },
    #[error("removing old segments: {source}")]
    Truncate { source: WalError },
}

/// Why a cut's files were not exported into a snapshot; the vnode goes on (the snapshot fails).
#[derive(Debug, thiserror::Error)]
pub enum CutExportError {
    #[error("{dir}: {cut} did not finish here (or finished before this process started)")]
    NotFinished { dir: PathBuf, cut: CutId },
    #[error("{dir}: sealing the log through {cut}'s end: {source}")]
    Seal { dir: PathBuf, cut: CutId, source: WalError },
    #[error("{dir}: no base kept for {cut}")]
    NoBase { dir: PathBuf, cut: CutId },
    /// An increment cannot continue the chain: only a full snapshot can be taken now.
    #[error("{dir}: the log from {from} was removed (it starts at {first}); take a full snapshot")]
    Removed { dir: PathBuf, from: Position, first: Position },
    #[error(transparent)]
    Files(#[from] ExportError),
    #[error(transparent)]
    Pin(#[from] CutFileError),
    /// The driver could not sync everything appended before the request (or its log failed).
    #[error("{vnode}: its log did not settle for the export (or failed)")]
    Unsettled { vnode: VnodeId },
}

/// A checkpoint file the helper thread finished: the segments before `resume_at` may go.
#[derive(Debug)]
pub struct CheckpointWritten {
    pub resume_at: Position,
    pub bytes: u64,
    pub took_ms: u64,
}

/// An alteration record as the log gave it back after the sync.
#[derive(Debug)]
pub struct ReadBack {
    pub seq: AlterSeq,
    pub bytes: Vec<u8>,
}

/// What the syncs since the last `take_progress` made durable, for the vnode to step.
#[derive(Debug)]
pub struct Progress {
    /// The records `..durable` are durable.
    pub durable: Lsn,
    /// In the order they were appended.
    pub read_back: Vec<ReadBack>,
}

/// What a vnode's log writer starts with.
pub struct LogSetup {
    pub wal: Wal,
    /// The vnode's directory (the checkpoint goes there).
    pub dir: PathBuf,
    /// The vnode was rebuilt from this many records: its next append is the `base`-th.
    pub base: Lsn,
    pub fsync: FsyncPolicy,
    /// Bytes of records appended, added to by every vnode log of the host (`INFO replication`'s
    /// `master_repl_offset`: the log the host's copies write is Waymark's replication stream).
    pub appended_bytes: Arc<AtomicU64>,
}

pub struct LogWriter {
    wal: Wal,
    dir: PathBuf,
    fsync: FsyncPolicy,
    appended: Lsn,
    durable: Lsn,
    /// How far the driver was told (`take_progress`).
    reported: Lsn,
    cuts: CutFiles,
    /// Alteration records appended since the last sync, to read back after it.
    to_read_back: Vec<Position>,
    /// Read back after a sync, not yet taken by the driver.
    read_back: Vec<ReadBack>,
    /// When the oldest record not yet synced was appended.
    unsynced_since: Option<Instant>,
    checkpoints: mpsc::UnboundedSender<CheckpointWritten>,
    /// Where the log stood (global byte offset) when the last checkpoint was taken — at open, its
    /// first record: a node restarted with a long log checkpoints soon.
    checkpointed_at: u64,
    appended_bytes: Arc<AtomicU64>,
}

impl LogWriter {
    /// The writer, and where its checkpoint helper threads say they finished.
    pub fn open(setup: LogSetup) -> (LogWriter, mpsc::UnboundedReceiver<CheckpointWritten>) {
        let LogSetup { wal, dir, base, fsync, appended_bytes } = setup;
        let (checkpoints, written) = mpsc::unbounded_channel();
        let cuts = CutFiles::open(&dir);
        let checkpointed_at = wal.first_position().global();
        let w = LogWriter {
            checkpointed_at,
            wal,
            dir,
            fsync,
            appended: base,
            durable: base,
            reported: base,
            cuts,
            to_read_back: vec![],
            read_back: vec![],
            unsynced_since: None,
            checkpoints,
            appended_bytes,
        };
        (w, written)
    }

    /// Bytes appended since the last checkpoint was taken.
    pub fn bytes_since_checkpoint(&self) -> u64 {
        self.wal.appended().global().saturating_sub(self.checkpointed_at)
    }

    /// Records appended and not yet synced.
    pub fn unsynced(&self) -> bool {
        self.durable < self.appended
    }

    /// How long the oldest record not yet synced has waited (zero when all are synced).
    pub fn unsynced_for(&self) -> std::time::Duration {
        self.unsynced_since.map(|t| t.elapsed()).unwrap_or_default()
    }

    /// Records whose sync the driver learns from, whatever the vnode awaits: alterations to read
    /// back, the end of a cut.
    pub fn sync_wanted_by_log(&self) -> bool {
        !self.to_read_back.is_empty() || self.cuts.finish_pending()
    }

    pub fn append(&mut self, record: &Record) -> Result<(), LogWriteError> {
        let encoded = record.encode();
        let at = self.wal.append(record.kind(), &encoded).map_err(|source| LogWriteError::Append { source })?;
        self.appended_bytes.fetch_add(encoded.len() as u64, Ordering::Relaxed);
        self.appended = Lsn(self.appended.0 + 1);
        self.unsynced_since.get_or_insert_with(Instant::now);
        match record {
            Record::Alteration { .. } => self.to_read_back.push(at),
            Record::CutStart { cut } => self.cuts.on_cut_start(*cut, self.wal.first_position())?,
            Record::CutFinish(f) => self.cuts.on_cut_finish(f.cut),
            // `versions`: a vnode's first record of a cut is its phase 1 (`VersionsLocalState`) or,
            // before it, the first prepare of a transaction after the cut (`VersionsSideSeen`);
            // everything before either is in the cut. It ends with `VersionsSkip`.
            Record::VersionsSideSeen { cut } | Record::VersionsLocalState { cut, .. } => {
                self.cuts.on_cut_first_record(*cut, self.wal.first_position())?
            }
            Record::VersionsSkip { cut, .. } => self.cuts.on_cut_finish(*cut),
            _ => {}
        }
        Ok(())
    }

    /// Group commit: one sync for everything appended since the last one.
    pub fn sync(&mut self) -> Result<(), LogWriteError> {
        if !self.unsynced() {
            return Ok(());
        }
        let done = match self.fsync {
            FsyncPolicy::Always => {
                let begun = Instant::now();
                let synced = self.wal.sync().map(|_| ());
                crate::telemetry::wal_synced(begun.elapsed());
                synced
            }
            FsyncPolicy::Never => self.wal.flush().map(|_| ()),
        };
        done.map_err(|source| LogWriteError::Sync { source })?;
        assert!(self.appended >= self.durable, "the log's durable end passed its appended end");
        self.durable = self.appended;
        self.unsynced_since = None;
        for at in std::mem::take(&mut self.to_read_back) {
            self.read_back_one(at)?;
        }
        if let Some(cut) = self.cuts.take_finish_pending() {
            // The cut ends here; its export seals the segment holding this end (rolling the
            // active one then, not now: a cut no snapshot is made of costs no segment).
            self.cuts.finished(cut, self.wal.appended());
        }
        Ok(())
    }

    /// What became durable since the last call, if anything did.
    pub fn take_progress(&mut self) -> Option<Progress> {
        assert!(self.reported <= self.durable && self.durable <= self.appended);
        if self.reported == self.durable {
            // Read-backs are made only by a sync that moved `durable`.
            assert!(self.read_back.is_empty(), "alterations read back without a sync");
            return None;
        }
        self.reported = self.durable;
        Some(Progress { durable: self.durable, read_back: std::mem::take(&mut self.read_back) })
    }

    /// A cut's files into a snapshot's vnode directory. Every record appended so far must be
    /// synced, and that reported, first (`Driver::sync_log`): what the vnode appended before the
    /// request is exported.
    ///
    /// The writer never syncs on its own: a sync whose progress did not reach the vnode left
    /// outputs waiting for a durability it was never told of, and a vnode with nothing more to
    /// append waited for ever (the nemesis, `--seed 3 --faults partition,loss,disk`: a snapshot's
    /// export synced what a store vnode's `Alive` waited for; its lease lapsed, it refused every
    /// client, appended nothing more, and the cluster stopped answering).
    pub fn export(
        &mut self,
        cut: CutId,
        from: Option<Position>,
        dest: &std::path::Path,
    ) -> Result<VnodeFiles, CutExportError> {
        self.assert_synced_and_reported("an export");
        self.export_synced(cut, from, dest)
    }

    /// Invariant of `export` and `checkpoint`: nothing unsynced, no progress unreported.
    fn assert_synced_and_reported(&self, what: &str) {
        assert!(!self.unsynced(), "{what} with records not synced: the driver syncs first");
        assert!(self.reported == self.durable, "{what} with a sync not reported to the vnode");
    }

    fn export_synced(
        &mut self,
        cut: CutId,
        from: Option<Position>,
        dest: &std::path::Path,
    ) -> Result<VnodeFiles, CutExportError> {
        let dir = || self.dir.clone();
        let end = self.cuts.finish_of(cut).ok_or_else(|| CutExportError::NotFinished { dir: dir(), cut })?;
        // A snapshot links sealed segments: everything up to the cut's end is sealed now. The
        // segments may hold records after the end; a restore stops at the cut's `CutFinish`.
        let upto = self.wal.seal_through(end).map_err(|source| CutExportError::Seal { dir: dir(), cut, source })?;
        let (checkpoint, from) = match from {
            Some(from) => (None, from),
            None => {
                let base = self.cuts.base(cut).ok_or_else(|| CutExportError::NoBase { dir: dir(), cut })?;
                (base.checkpoint.clone(), base.from)
            }
        };
        let first = self.wal.first_position();
        if from < first {
            return Err(CutExportError::Removed { dir: dir(), from, first });
        }
        let files = export_vnode(&mut self.wal, &self.dir, checkpoint.as_deref(), from, upto, dest)?;
        self.cuts.exported(upto)?;
        Ok(files)
    }

    /// Seed 004 point 4: the alteration as the log gives it back, not as it was handed over.
    fn read_back_one(&mut self, at: Position) -> Result<(), LogWriteError> {
        let read = self.wal.read_at(at).map_err(|source| LogWriteError::ReadBack { at, source })?;
        match Record::decode(read.kind, &read.payload) {
            Ok(Record::Alteration { seq, bytes }) => self.read_back.push(ReadBack { seq, bytes }),
            // A record that does not decode is damage: the alteration is not confirmed and times
            // out, and the vnode clones its parent's metadata.
            other => tracing::error!(at = %at, "alteration read back as {other:?}"),
        }
        Ok(())
    }

    /// With the vnode's image of every record appended so far, all synced and reported (`export`
    /// says why): seals the active segment so the image stands for exactly the sealed log, then writes the file in the
    /// background (a large store takes a while; appends go on meanwhile).
    pub fn checkpoint(&mut self, image: Image) -> Result<(), LogWriteError> {
        self.assert_synced_and_reported("a checkpoint");
        let resume_at = self.wal.roll_segment().map_err(|source| LogWriteError::Roll { source })?;
        self.checkpointed_at = resume_at.global();
        let (dir, done) = (self.dir.clone(), self.checkpoints.clone());
        let spawned = std::thread::Builder::new().name("checkpoint".into()).spawn(move || {
            let begun = Instant::now();
            match checkpoint::write(&dir, &image, resume_at) {
                Ok(bytes) => {
                    let took_ms = begun.elapsed().as_millis() as u64;
                    let _ = done.send(CheckpointWritten { resume_at, bytes, took_ms });
                }
                Err(e) => tracing::error!("checkpoint failed (the log is kept whole): {e}"),
            }
        });
        spawned.map(drop).map_err(|source| LogWriteError::CheckpointThread { source })
    }

    /// Removes the sealed segments wholly before the written checkpoint, keeping what is pinned;
    /// how many it removed.
    pub fn truncate(&mut self, written: &CheckpointWritten) -> Result<usize, LogWriteError> {
        let upto = self.cuts.pinned_from().map_or(written.resume_at, |p| p.min(written.resume_at));
        let removed = self.wal.truncate_before(upto).map_err(|source| LogWriteError::Truncate { source })?;
        Ok(removed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_wal::Options;

    fn writer(dir: &std::path::Path) -> LogWriter {
        let wal = Wal::open(dir.join("wal"), Options::default()).expect("a log").0;
        let appended_bytes = Default::default();
        let setup = LogSetup { wal, dir: dir.to_path_buf(), base: Lsn(0), fsync: FsyncPolicy::Always, appended_bytes };
        LogWriter::open(setup).0
    }

    fn image() -> Image {
        Image::Store(waymark_core::VnodeImage::replay(None, &[]))
    }

    #[test]
    #[should_panic(expected = "a checkpoint with records not synced")]
    fn a_checkpoint_of_records_not_synced_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.append(&Record::Boot { incarnation: 1 }).unwrap();
        let _ = w.checkpoint(image());
    }

    #[test]
    #[should_panic(expected = "a sync not reported to the vnode")]
    fn a_checkpoint_after_a_sync_the_vnode_was_not_told_of_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.append(&Record::Boot { incarnation: 1 }).unwrap();
        w.sync().unwrap();
        let _ = w.checkpoint(image());
    }

    #[test]
    fn the_bytes_since_the_last_checkpoint_count_from_the_log_start_then_from_each_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        for i in 0..100 {
            w.append(&Record::Boot { incarnation: i }).unwrap();
        }
        let grown = w.bytes_since_checkpoint();
        assert!(grown > 100, "{grown}");
        w.sync().unwrap();
        w.take_progress();
        w.checkpoint(image()).unwrap();
        assert_eq!(w.bytes_since_checkpoint(), 0);
        w.append(&Record::Boot { incarnation: 100 }).unwrap();
        assert!(w.bytes_since_checkpoint() > 0 && w.bytes_since_checkpoint() < grown);
    }

    #[test]
    fn a_cut_that_did_not_finish_here_is_not_exported_and_the_error_names_the_vnode() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        let err = w.export(CutId(3), None, &dir.path().join("snap")).unwrap_err();
        assert!(matches!(err, CutExportError::NotFinished { cut: CutId(3), .. }), "{err}");
        assert!(err.to_string().starts_with(&dir.path().display().to_string()), "{err}");
    }

    #[test]
    fn a_checkpoint_after_a_sync_whose_progress_was_taken_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.append(&Record::Boot { incarnation: 1 }).unwrap();
        w.sync().unwrap();
        assert_eq!(w.take_progress().map(|p| p.durable), Some(Lsn(1)));
        w.checkpoint(image()).expect("written");
    }
}
