//! The writer: appends into a user-space buffer, group-commits with one
//! `fdatasync` per `sync`, rolls segments, and removes or exports sealed ones.
//!
//! Appends are cheap (a copy into the buffer) so that a writer thread can
//! take many requests, append them all, and pay for a single `sync` that
//! covers the whole batch. Three positions track progress through the
//! pipeline and only move forward:
//! `durable` (fdatasync'ed) <= `written` (handed to the OS) <= `appended`.

use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::dir::{create_segment, sync_dir, SegmentInfo};
use crate::error::{io_err, FrameError, Result, WalError};
use crate::link::link_or_copy_file;
use crate::options::Options;
use crate::position::Position;
use crate::reader::{Reader, Record};
use crate::recovery::{recover, OpenReport};
use crate::segment::{
    encode_frame_header, frame_bytes, segment_file_name, FrameHeader, FRAME_HEADER_BYTES, HEADER_BYTES,
};

/// The segment currently being appended to.
///
/// Invariant: `synced_len <= written_len <= file_len`, the file's write
/// position is `written_len` (everything before it was written), and every
/// byte from `written_len` to `file_len` is zero (preallocated, see
/// `Options::preallocate`).
struct Active {
    base: u64,
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    written_len: u64,
    synced_len: u64,
    file_len: u64,
}

impl Active {
    fn appended_len(&self) -> u64 {
        self.written_len + self.buf.len() as u64
    }

    fn has_records(&self) -> bool {
        self.appended_len() > HEADER_BYTES
    }

    /// Hands buffered bytes to the OS.
    fn write_buffer(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.buf).map_err(io_err("writing", &self.path))?;
        self.written_len += self.buf.len() as u64;
        self.file_len = self.file_len.max(self.written_len);
        self.buf.clear();
        Ok(())
    }

    /// Writes a payload straight to the file, skipping the buffer copy;
    /// used for payloads at least as large as the buffer.
    fn write_direct(&mut self, payload: &[u8]) -> Result<()> {
        debug_assert!(self.buf.is_empty());
        self.file.write_all(payload).map_err(io_err("writing", &self.path))?;
        self.written_len += payload.len() as u64;
        self.file_len = self.file_len.max(self.written_len);
        Ok(())
    }

    /// One fdatasync covering everything written so far.
    fn sync(&mut self) -> Result<()> {
        if self.synced_len == self.written_len {
            return Ok(());
        }
        self.file.sync_data().map_err(io_err("syncing", &self.path))?;
        self.synced_len = self.written_len;
        Ok(())
    }

    /// Cuts the preallocated zero tail off (durably), so the file's length
    /// is the segment's length again: done before the segment is sealed.
    fn trim(&mut self) -> Result<()> {
        if self.file_len == self.written_len {
            return Ok(());
        }
        debug_assert_eq!(self.synced_len, self.written_len, "trim after sync only");
        self.file.set_len(self.written_len).map_err(io_err("trimming", &self.path))?;
        self.file.sync_all().map_err(io_err("syncing", &self.path))?;
        self.file_len = self.written_len;
        Ok(())
    }

    fn info(&self) -> SegmentInfo {
        SegmentInfo { base: self.base, path: self.path.clone(), len: self.written_len }
    }
}

/// A segmented write-ahead log open for appending. Not shared between
/// threads by itself: give it to one writer thread, which batches appends
/// and calls [`Wal::sync`] once per batch.
pub struct Wal {
    dir: PathBuf,
    options: Options,
    /// Invariant: contiguous, oldest first, each synced and never written again.
    sealed: Vec<SegmentInfo>,
    active: Active,
    /// Set when a write or sync failed: the kernel may have dropped dirty
    /// pages, so retrying could report durability that is not there.
    poisoned: bool,
}

impl Wal {
    /// Opens (or creates) the log in `dir`, recovering from a crash: a torn
    /// or corrupt tail of the last segment is cut off and reported; any other
    /// damage is an error.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<(Wal, OpenReport)> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let recovered = recover(&dir, &options)?;
        let active = open_active(&recovered.active, &options)?;
        let wal = Wal { dir, options, sealed: recovered.sealed, active, poisoned: false };
        Ok((wal, recovered.report))
    }

    /// Buffers a record and returns the position it starts at. The record is
    /// durable once [`Wal::durable`] is past that position. May roll to a new
    /// segment first (which syncs the old one).
    pub fn append(&mut self, kind: u8, payload: &[u8]) -> Result<Position> {
        self.check_usable()?;
        let len = payload.len() as u64;
        if len > self.options.max_record_bytes {
            return Err(WalError::RecordTooLarge { len, max: self.options.max_record_bytes });
        }
        let frame_len = frame_bytes(len);
        if self.active.has_records() && self.active.appended_len() + frame_len > self.options.segment_size_bytes {
            self.poison_on_err(|wal| wal.roll())?;
        }
        let position = self.appended();
        self.poison_on_err(|wal| wal.buffer_frame(kind, payload))?;
        self.debug_check();
        Ok(position)
    }

    /// Puts one frame in the buffer, writing the buffer out when it is full.
    fn buffer_frame(&mut self, kind: u8, payload: &[u8]) -> Result<()> {
        let header = encode_frame_header(kind, payload);
        let limit = self.options.write_buffer_bytes;
        self.active.buf.extend_from_slice(&header);
        if payload.len() >= limit {
            // Large payloads go straight from the caller's slice to the file.
            self.active.write_buffer()?;
            return self.active.write_direct(payload);
        }
        self.active.buf.extend_from_slice(payload);
        if self.active.buf.len() >= limit {
            self.active.write_buffer()?;
        }
        Ok(())
    }

    /// Writes everything appended so far and makes it durable with a single
    /// `fdatasync`. Returns the new [`Wal::durable`] position.
    pub fn sync(&mut self) -> Result<Position> {
        self.check_usable()?;
        self.poison_on_err(|wal| {
            wal.active.write_buffer()?;
            wal.active.sync()
        })?;
        self.debug_check();
        Ok(self.durable())
    }

    /// Hands buffered records to the OS without syncing, so that readers
    /// opened afterwards see them. Returns [`Wal::written`].
    pub fn flush(&mut self) -> Result<Position> {
        self.check_usable()?;
        self.poison_on_err(|wal| wal.active.write_buffer())?;
        Ok(self.written())
    }

    /// Every record before this position is durable on disk.
    pub fn durable(&self) -> Position {
        Position::new(self.active.base, self.active.synced_len)
    }

    /// Every record before this position has been handed to the OS.
    pub fn written(&self) -> Position {
        Position::new(self.active.base, self.active.written_len)
    }

    /// Where the next record will go (if it does not cause a roll).
    pub fn appended(&self) -> Position {
        Position::new(self.active.base, self.active.appended_len())
    }

    /// The first record position still kept in the log.
    pub fn first_position(&self) -> Position {
        let base = self.sealed.first().map_or(self.active.base, |s| s.base);
        Position::new(base, HEADER_BYTES)
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Sealed (immutable, synced) segments, oldest first.
    pub fn sealed_segments(&self) -> Vec<SegmentInfo> {
        self.sealed.clone()
    }

    /// Seals the active segment now (if it holds any record) and starts a
    /// new one, e.g. so that a snapshot can link everything written so far.
    /// Returns the first position of the new active segment.
    pub fn roll_segment(&mut self) -> Result<Position> {
        self.check_usable()?;
        if self.active.has_records() {
            self.poison_on_err(|wal| wal.roll())?;
        }
        Ok(self.appended())
    }

    /// Syncs and seals the active segment and opens the next one, whose base
    /// is the old base plus the old length so positions stay contiguous.
    fn roll(&mut self) -> Result<()> {
        self.active.write_buffer()?;
        self.active.sync()?;
        // Before the next segment exists: only the last segment may end in zeros.
        self.active.trim()?;
        let next_base = self.active.base + self.active.written_len;
        let preallocated = self.options.preallocated_bytes();
        let (file, path) = create_segment(&self.dir, next_base, preallocated)?;
        let next = new_active(next_base, path, file, HEADER_BYTES, self.options.write_buffer_bytes);
        let next = Active { file_len: preallocated.max(HEADER_BYTES), ..next };
        let old = std::mem::replace(&mut self.active, next);
        self.sealed.push(old.info());
        Ok(())
    }

    /// Seals everything before `at`: returns the start of the segment after the one holding `at`,
    /// rolling the active segment first if `at` is in it (or at its end). Every record before the
    /// returned position is then in sealed segments, which can be linked into a snapshot.
    pub fn seal_through(&mut self, at: Position) -> Result<Position> {
        if at.segment == self.active.base {
            return self.roll_segment();
        }
        match self.sealed.iter().find(|s| s.base == at.segment) {
            Some(s) if at.offset <= s.len => Ok(Position::new(s.end_global(), HEADER_BYTES)),
            _ => Err(WalError::PositionOutOfRange { requested: at, end: self.appended() }),
        }
    }

    /// Deletes sealed segments that lie entirely before `position` (their
    /// records are no longer needed). The active segment is never removed.
    /// Returns what was removed. Oldest go first, so a crash part-way leaves
    /// a contiguous log.
    pub fn truncate_before(&mut self, position: Position) -> Result<Vec<SegmentInfo>> {
        let mut removed = Vec::new();
        while let Some(oldest) = self.sealed.first() {
            if Position::new(oldest.base, oldest.len) > position {
                break;
            }
            fs::remove_file(&oldest.path).map_err(io_err("removing", &oldest.path))?;
            removed.push(self.sealed.remove(0));
        }
        if !removed.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// Hard-links the sealed segments whose base is in `bases` into
    /// `dest_dir` (copying when linking is impossible, e.g. across file
    /// systems), then syncs `dest_dir`, which must already exist. An
    /// existing file of the same name is an error, never overwritten.
    /// Returns the new files.
    pub fn link_or_copy_segments(
        &self,
        bases: impl RangeBounds<u64>,
        dest_dir: impl AsRef<Path>,
    ) -> Result<Vec<SegmentInfo>> {
        let dest_dir = dest_dir.as_ref();
        let mut out = Vec::new();
        for segment in self.sealed.iter().filter(|s| bases.contains(&s.base)) {
            let dest = dest_dir.join(segment_file_name(segment.base));
            link_or_copy_file(&segment.path, &dest, true)?;
            out.push(SegmentInfo { base: segment.base, path: dest, len: segment.len });
        }
        sync_dir(dest_dir)?;
        Ok(out)
    }

    /// A reader from `from` up to everything appended so far (the buffer is
    /// handed to the OS first so the reader can see it).
    pub fn reader_from(&mut self, from: Position) -> Result<Reader> {
        self.flush()?;
        let mut segments = self.sealed.clone();
        segments.push(self.active.info());
        Reader::from_segments(segments, from, self.options.max_record_bytes)
    }

    /// The one record that starts at `at`, read back exactly — its frame header, then its payload
    /// — rather than through a [`Reader`]'s read-ahead: a read-after-write check of a record just
    /// appended costs two small reads, not a file open and a buffer of the segment's zero tail.
    /// The length is checked against `max_record_bytes` and the bytes written before the payload
    /// is sized; the checksum before the record is returned.
    pub fn read_at(&mut self, at: Position) -> Result<Record> {
        self.flush()?;
        if at.segment == self.active.base {
            return read_frame_at(&self.active.file, &self.active.path, at, self.active.written_len, self.max_record());
        }
        let Some(sealed) = self.sealed.iter().find(|s| s.base == at.segment) else {
            return Err(WalError::PositionOutOfRange { requested: at, end: self.appended() });
        };
        let file = File::open(&sealed.path).map_err(io_err("opening", &sealed.path))?;
        read_frame_at(&file, &sealed.path, at, sealed.len, self.max_record())
    }

    fn max_record(&self) -> u64 {
        self.options.max_record_bytes
    }

    /// Syncs and closes the log, returning the final durable position.
    /// A cleanly closed log has no preallocated tail.
    pub fn close(mut self) -> Result<Position> {
        let durable = self.sync()?;
        self.poison_on_err(|wal| wal.active.trim())?;
        Ok(durable)
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(WalError::Poisoned);
        }
        Ok(())
    }

    /// Runs a step that writes; any failure poisons the log.
    fn poison_on_err<T>(&mut self, step: impl FnOnce(&mut Wal) -> Result<T>) -> Result<T> {
        let result = step(self);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn debug_check(&self) {
        debug_assert!(self.durable() <= self.written());
        debug_assert!(self.written() <= self.appended());
        if let Some(last) = self.sealed.last() {
            debug_assert_eq!(last.end_global(), self.active.base);
        }
    }
}

impl Drop for Wal {
    /// Like `BufWriter`, hands buffered records to the OS (without syncing),
    /// so dropping the log does not discard appends a reader may expect.
    fn drop(&mut self) {
        if !self.poisoned {
            let _ = self.active.write_buffer();
        }
    }
}

/// Opens the recovered last segment for appending at its (logical) end,
/// extending it to the preallocated length if it is shorter.
fn open_active(segment: &SegmentInfo, options: &Options) -> Result<Active> {
    let path = &segment.path;
    let mut file =
        fs::OpenOptions::new().read(true).write(true).open(path).map_err(io_err("opening for append", path))?;
    let physical = file.metadata().map_err(io_err("reading metadata of", path))?.len();
    let file_len = physical.max(options.preallocated_bytes()).max(segment.len);
    if file_len > physical {
        file.set_len(file_len).map_err(io_err("preallocating", path))?;
    }
    file.seek(SeekFrom::Start(segment.len)).map_err(io_err("seeking in", path))?;
    // What recovery kept may only be in the page cache (the previous process
    // died, not the machine); make it durable before calling it durable.
    file.sync_data().map_err(io_err("syncing", path))?;
    let active = new_active(segment.base, path.clone(), file, segment.len, options.write_buffer_bytes);
    Ok(Active { file_len, ..active })
}

/// The frame at `at` in `file` (`path`), whose bytes end at `len`.
fn read_frame_at(file: &File, path: &Path, at: Position, len: u64, max_record_bytes: u64) -> Result<Record> {
    let corrupt = |reason| WalError::CorruptRecord { path: path.to_owned(), offset: at.offset, reason };
    let available = len.saturating_sub(at.offset);
    if at.offset < HEADER_BYTES || available < FRAME_HEADER_BYTES as u64 {
        let needed = FRAME_HEADER_BYTES as u64;
        return Err(corrupt(FrameError::Truncated { needed, available }));
    }
    let mut head = [0u8; FRAME_HEADER_BYTES];
    file.read_exact_at(&mut head, at.offset).map_err(io_err("reading", path))?;
    let header = FrameHeader::parse(&head);
    header.check_len(available - FRAME_HEADER_BYTES as u64, max_record_bytes).map_err(corrupt)?;
    // Safe to size now: len <= max_record_bytes and len <= the bytes written after the header.
    let mut payload = vec![0u8; header.len as usize];
    file.read_exact_at(&mut payload, at.offset + FRAME_HEADER_BYTES as u64).map_err(io_err("reading", path))?;
    header.check_crc(&payload).map_err(corrupt)?;
    Ok(Record { position: at, kind: header.kind, payload })
}

fn new_active(base: u64, path: PathBuf, file: File, len: u64, write_buffer_bytes: usize) -> Active {
    Active {
        base,
        path,
        file,
        buf: Vec::with_capacity(write_buffer_bytes + frame_bytes(0) as usize),
        written_len: len,
        synced_len: len,
        file_len: len,
    }
}
