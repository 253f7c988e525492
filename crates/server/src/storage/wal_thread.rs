//! One writer thread per vnode (DESIGN §7): it owns the vnode's `waymark-wal` log, appends what the
//! vnode asks, and group-commits — one `fdatasync` for everything that arrived while the previous
//! one ran — then tells the vnode how far the log is durable (`Input::WalDurable`). Alteration
//! records are read back from the log after the sync and handed to the vnode as bytes (seed 004
//! point 4: the record is read after write and its md5 compared).
//!
//! Checkpoints: on the vnode's word (with its image), the thread seals the active segment, so the
//! checkpoint stands exactly for the sealed segments; a helper thread writes the file, then the
//! sealed segments before it are removed (unless pinned: a kept snapshot still needs them).
//!
//! Snapshots (`cut_files`): the thread notes each cut's base and end as it appends `CutStart` and
//! `CutFinish` (under `versions`: the cut's first record, and `VersionsSkip`), and exports a cut's
//! files on request (`WalCmd::Export`), sealing the segment that holds the cut's end then — it owns
//! the log, so the segments it links cannot be removed meanwhile.
//!
//! Invariant: `durable <= appended`; a `Durable(n)` event is sent only after the records
//! `..n` are synced (or, with `fsync = "never"`, handed to the OS).

use super::checkpoint::{self, Image};
use super::cut_files::CutFiles;
use crate::config::FsyncPolicy;
use crate::snapshot::export::export_vnode;
use crate::snapshot::manifest::VnodeFiles;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use waymark_core::alter::AlterSeq;
use waymark_core::{CutId, Lsn, Record};
use waymark_wal::{Position, Wal};

/// Commands handled in one group commit at most.
const BATCH_MAX: usize = 8_192;

pub enum WalCmd {
    Append(Record),
    /// The vnode's image covering every record appended before this command.
    Checkpoint(Image),
    /// The checkpoint resuming at this position is durable.
    CheckpointWritten {
        resume_at: Position,
        bytes: u64,
        took_ms: u64,
    },
    /// Export the files of `cut` into `dest` (a vnode directory of a snapshot): from the cut's
    /// base (`from: None`, a full snapshot) or from `from` (an increment), to the cut's end.
    Export {
        cut: CutId,
        from: Option<Position>,
        dest: PathBuf,
        reply: oneshot::Sender<Result<VnodeFiles, String>>,
    },
}

#[derive(Debug)]
pub enum WalEvent {
    Durable(Lsn),
    ReadBack {
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    Checkpointed {
        bytes: u64,
        took_ms: u64,
        segments_removed: usize,
    },
    /// The log cannot be written any more (e.g. a failed fsync): the vnode must stop.
    Failed(String),
}

pub struct WalThread {
    pub tx: mpsc::Sender<WalCmd>,
    pub join: JoinHandle<()>,
}

struct Writer {
    wal: Wal,
    dir: PathBuf,
    fsync: FsyncPolicy,
    appended: Lsn,
    durable: Lsn,
    events: mpsc::UnboundedSender<WalEvent>,
    weak: mpsc::WeakSender<WalCmd>,
    cuts: CutFiles,
    /// Alteration records appended since the last sync, to read back after it.
    read_back: Vec<Position>,
}

/// What a writer thread starts with.
pub struct WalSetup {
    pub name: String,
    pub wal: Wal,
    /// The vnode's directory (the checkpoint goes there).
    pub dir: PathBuf,
    /// The vnode was rebuilt from this many records: its next append is the `base`-th.
    pub base: Lsn,
    pub fsync: FsyncPolicy,
    pub queue_max: usize,
    pub events: mpsc::UnboundedSender<WalEvent>,
}

/// Starts the writer thread of a vnode's log.
pub fn spawn(setup: WalSetup) -> std::io::Result<WalThread> {
    let WalSetup { name, wal, dir, base, fsync, queue_max, events } = setup;
    let (tx, rx) = mpsc::channel(queue_max);
    let weak = tx.downgrade();
    let cuts = CutFiles::open(&dir);
    let w = Writer { wal, dir, fsync, appended: base, durable: base, events, weak, cuts, read_back: vec![] };
    let join = std::thread::Builder::new().name(format!("wal {name}")).spawn(move || w.run(rx))?;
    Ok(WalThread { tx, join })
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<WalCmd>) {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < BATCH_MAX {
                match rx.try_recv() {
                    Ok(cmd) => batch.push(cmd),
                    Err(_) => break,
                }
            }
            if let Err(e) = self.handle_batch(batch) {
                let _ = self.events.send(WalEvent::Failed(e));
                return;
            }
        }
        // Every sender is gone: the vnode stopped. Make what it appended durable.
        let _ = self.sync();
    }

    fn handle_batch(&mut self, batch: Vec<WalCmd>) -> Result<(), String> {
        for cmd in batch {
            match cmd {
                WalCmd::Append(record) => self.append(&record)?,
                WalCmd::Checkpoint(image) => self.checkpoint(image)?,
                WalCmd::CheckpointWritten { resume_at, bytes, took_ms } => self.truncate(resume_at, bytes, took_ms)?,
                WalCmd::Export { cut, from, dest, reply } => {
                    self.sync()?;
                    let _ = reply.send(self.export(cut, from, &dest));
                }
            }
        }
        self.sync()
    }

    fn append(&mut self, record: &Record) -> Result<(), String> {
        let at = self.wal.append(record.kind(), &record.encode()).map_err(|e| format!("appending: {e}"))?;
        self.appended = Lsn(self.appended.0 + 1);
        match record {
            Record::Alteration { .. } => self.read_back.push(at),
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

    /// Group commit: one sync for the batch, then the vnode hears how far the log is durable.
    fn sync(&mut self) -> Result<(), String> {
        if self.durable == self.appended {
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
        done.map_err(|e| format!("syncing: {e}"))?;
        debug_assert!(self.appended >= self.durable);
        self.durable = self.appended;
        let _ = self.events.send(WalEvent::Durable(self.durable));
        for at in std::mem::take(&mut self.read_back) {
            self.read_back_one(at)?;
        }
        if let Some(cut) = self.cuts.take_finish_pending() {
            // The cut ends here; its export seals the segment holding this end (rolling the
            // active one then, not now: a cut no snapshot is made of costs no segment).
            self.cuts.finished(cut, self.wal.appended());
        }
        Ok(())
    }

    /// A cut's files into a snapshot's vnode directory.
    fn export(&mut self, cut: CutId, from: Option<Position>, dest: &std::path::Path) -> Result<VnodeFiles, String> {
        let vnode = self.dir.display().to_string();
        let end = self
            .cuts
            .finish_of(cut)
            .ok_or_else(|| format!("{vnode}: {cut} did not finish here (or finished before this process started)"))?;
        // A snapshot links sealed segments: everything up to the cut's end is sealed now. The
        // segments may hold records after the end; a restore stops at the cut's `CutFinish`.
        let upto =
            self.wal.seal_through(end).map_err(|e| format!("{vnode}: sealing the log through {cut}'s end: {e}"))?;
        let (checkpoint, from) = match from {
            Some(from) => (None, from),
            None => {
                let base = self.cuts.base(cut).ok_or_else(|| format!("{vnode}: no base kept for {cut}"))?;
                (base.checkpoint.clone(), base.from)
            }
        };
        if from < self.wal.first_position() {
            return Err(format!(
                "{vnode}: the log from {from} was removed (it starts at {}); take a full snapshot",
                self.wal.first_position()
            ));
        }
        let files = export_vnode(&mut self.wal, &self.dir, checkpoint.as_deref(), from, upto, dest)
            .map_err(|e| e.to_string())?;
        self.cuts.exported(upto)?;
        Ok(files)
    }

    /// Seed 004 point 4: the alteration as the log gives it back, not as it was handed over.
    fn read_back_one(&mut self, at: Position) -> Result<(), String> {
        let read = self.wal.read_at(at).map_err(|e| format!("reading back at {at}: {e}"))?;
        match Record::decode(read.kind, &read.payload) {
            Ok(Record::Alteration { seq, bytes }) => drop(self.events.send(WalEvent::ReadBack { seq, bytes })),
            // A record that does not decode is damage: the alteration is not confirmed and times
            // out, and the vnode clones its parent's metadata.
            other => tracing::error!(at = %at, "alteration read back as {other:?}"),
        }
        Ok(())
    }

    /// Seals the active segment so the image stands for exactly the sealed log, then writes the
    /// file in the background (a large store takes a while; appends go on meanwhile).
    fn checkpoint(&mut self, image: Image) -> Result<(), String> {
        self.sync()?;
        let resume_at = self.wal.roll_segment().map_err(|e| format!("rolling for a checkpoint: {e}"))?;
        let (dir, weak) = (self.dir.clone(), self.weak.clone());
        let spawned = std::thread::Builder::new().name("checkpoint".into()).spawn(move || {
            let begun = Instant::now();
            match checkpoint::write(&dir, &image, resume_at) {
                Ok(bytes) => {
                    let took_ms = begun.elapsed().as_millis() as u64;
                    if let Some(tx) = weak.upgrade() {
                        let _ = tx.blocking_send(WalCmd::CheckpointWritten { resume_at, bytes, took_ms });
                    }
                }
                Err(e) => tracing::error!("checkpoint failed (the log is kept whole): {e}"),
            }
        });
        spawned.map(drop).map_err(|e| format!("starting the checkpoint writer: {e}"))
    }

    /// Removes the sealed segments wholly before the checkpoint, keeping what is pinned.
    fn truncate(&mut self, resume_at: Position, bytes: u64, took_ms: u64) -> Result<(), String> {
        let upto = self.cuts.pinned_from().map_or(resume_at, |p| p.min(resume_at));
        let removed = self.wal.truncate_before(upto).map_err(|e| format!("removing old segments: {e}"))?;
        let segments_removed = removed.len();
        let _ = self.events.send(WalEvent::Checkpointed { bytes, took_ms, segments_removed });
        Ok(())
    }
}
