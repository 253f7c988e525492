//! What a store vnode's WAL writer keeps about recent cuts so that their files can be exported into
//! a snapshot after the cut process ended (DESIGN §5). The writer sees every record it appends; it
//! acts on a cut's first and last records, as file bookkeeping only (no protocol decision is made here):
//!
//! - `CutStart{C}`: the checkpoint in force is hard-linked as the base of C (`cut-bases/<C>`), so a
//!   later checkpoint replacing it cannot take away the image a full snapshot of C starts from; its
//!   resume position is where C's replay begins.
//! - Under `versions`, the first of `VersionsSideSeen{C}` and `VersionsLocalState{C}` plays
//!   `CutStart`'s part (a commit the cut excludes comes after it here), and `VersionsSkip{C}`
//!   plays `CutFinish`'s.
//! - `CutFinish{C}` durable: the log position there is C's end. C's export seals the segment
//!   holding it (rolling the active segment if it is that one), so every record up to C's end is
//!   in a sealed (immutable, hard-linkable) segment, and ends at the next segment's start. Rolling
//!   at the export rather than at every `CutFinish` keeps cuts that no snapshot is made of (a cut
//!   every 100 ms) from costing a segment each: a roll is two syncs and a new file.
//!
//! Pins: segments at or after the oldest kept base, and after the newest export (the next
//! increment starts there, persisted in `snapshot-pin` across restarts), are never removed by
//! checkpointing.
//!
//! Invariant: for a kept cut C, `base(C).from <= finished(C)`, and every segment in between is
//! on disk while C is kept.

use super::checkpoint::{self, CheckpointError};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use waymark_core::CutId;
use waymark_wal::Position;

/// Recent cuts whose bases are kept: a snapshot is exported right after its cut ends, so a few do.
const KEEP_CUTS: usize = 8;
const BASES_DIR: &str = "cut-bases";
const PIN_FILE: &str = "snapshot-pin";

/// Why a cut's base or the export pin could not be kept: the log writer fails with it, and the
/// vnode stops (a snapshot missing its base would be found only when restored).
#[derive(Debug, thiserror::Error)]
pub enum CutFileError {
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Base(#[from] CheckpointError),
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> CutFileError + 'a {
    move |source| CutFileError::Io { action, path: path.into(), source }
}

/// Where a full snapshot of a cut starts: a checkpoint file (absent before the first checkpoint)
/// and the position its replay resumes at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    pub checkpoint: Option<PathBuf>,
    pub from: Position,
}

pub struct CutFiles {
    dir: PathBuf,
    bases: BTreeMap<CutId, Base>,
    finished: BTreeMap<CutId, Position>,
    /// A `CutFinish` appended and not yet durable: its end is noted after the sync.
    finish_pending: Option<CutId>,
    /// Where the newest export ended.
    chain_upto: Option<Position>,
}

impl CutFiles {
    /// Reads the persisted export pin of the vnode in `dir`; a damaged pin file is reported and
    /// ignored (the next increment then fails its gap check and a full snapshot is needed).
    pub fn open(dir: &Path) -> CutFiles {
        let chain_upto = match fs::read_to_string(dir.join(PIN_FILE)) {
            Ok(text) => parse_pin(&text).or_else(|| {
                tracing::warn!(dir = %dir.display(), "ignoring an unreadable {PIN_FILE}");
                None
            }),
            Err(_) => None,
        };
        CutFiles {
            dir: dir.into(),
            bases: BTreeMap::new(),
            finished: BTreeMap::new(),
            finish_pending: None,
            chain_upto,
        }
    }

    /// `CutStart{cut}` was appended at a log whose oldest record is at `log_start`.
    pub fn on_cut_start(&mut self, cut: CutId, log_start: Position) -> Result<(), CutFileError> {
        let current = self.dir.join(checkpoint::FILE_NAME);
        let base = if current.exists() {
            let bases = self.dir.join(BASES_DIR);
            fs::create_dir_all(&bases).map_err(io("creating", &bases))?;
            let link = bases.join(format!("{}.checkpoint", cut.0));
            let _ = fs::remove_file(&link); // a cut id is never reused; a leftover is from a crash
            fs::hard_link(&current, &link).map_err(io("linking", &link))?;
            // Read from the link: the file it names cannot change under us any more.
            let from = checkpoint::read_resume_at(&link)?;
            Base { checkpoint: Some(link), from }
        } else {
            Base { checkpoint: None, from: log_start }
        };
        self.bases.insert(cut, base);
        self.forget_old();
        Ok(())
    }

    /// A record of `cut` that may be its first here (`versions`): the base is the checkpoint in
    /// force at the first one; later ones keep it.
    pub fn on_cut_first_record(&mut self, cut: CutId, log_start: Position) -> Result<(), CutFileError> {
        if self.bases.contains_key(&cut) {
            return Ok(());
        }
        self.on_cut_start(cut, log_start)
    }

    pub fn on_cut_finish(&mut self, cut: CutId) {
        self.finish_pending = Some(cut);
    }

    pub fn finish_pending(&self) -> bool {
        self.finish_pending.is_some()
    }

    /// The `CutFinish` pending is durable: the caller tells where the log ends now (`finished`).
    pub fn take_finish_pending(&mut self) -> Option<CutId> {
        self.finish_pending.take()
    }

    pub fn finished(&mut self, cut: CutId, upto: Position) {
        self.finished.insert(cut, upto);
    }

    pub fn base(&self, cut: CutId) -> Option<&Base> {
        self.bases.get(&cut)
    }

    pub fn finish_of(&self, cut: CutId) -> Option<Position> {
        self.finished.get(&cut).copied()
    }

    /// An export ended at `upto`: the next increment starts there, so keep it, durably.
    pub fn exported(&mut self, upto: Position) -> Result<(), CutFileError> {
        self.chain_upto = Some(upto);
        let tmp = self.dir.join(format!("{PIN_FILE}.tmp"));
        let text = format!("{} {}\n", upto.segment, upto.offset);
        fs::write(&tmp, text).map_err(io("writing", &tmp))?;
        let file = self.dir.join(PIN_FILE);
        fs::rename(&tmp, &file).map_err(io("renaming", &file))
    }

    /// Segments before this position may be removed; later ones are needed by a kept cut or by
    /// the next increment.
    pub fn pinned_from(&self) -> Option<Position> {
        self.bases.values().map(|b| b.from).chain(self.chain_upto).min()
    }

    fn forget_old(&mut self) {
        while self.bases.len() > KEEP_CUTS {
            let (_, base) = self.bases.pop_first().expect("not empty");
            if let Some(file) = base.checkpoint {
                let _ = fs::remove_file(file);
            }
        }
        while self.finished.len() > KEEP_CUTS {
            self.finished.pop_first();
        }
    }
}

fn parse_pin(text: &str) -> Option<Position> {
    let mut words = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some(Position::new(words.next()??, words.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_base_outlives_the_checkpoint_that_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let image = checkpoint::Image::Manager(Default::default());
        checkpoint::write(dir.path(), &image, Position::new(100, 24)).unwrap();
        let mut files = CutFiles::open(dir.path());
        files.on_cut_start(CutId(1), Position::ZERO).unwrap();
        checkpoint::write(dir.path(), &image, Position::new(900, 24)).unwrap();
        let base = files.base(CutId(1)).unwrap().clone();
        assert_eq!(base.from, Position::new(100, 24));
        assert_eq!(checkpoint::read_resume_at(base.checkpoint.as_ref().unwrap()).unwrap(), Position::new(100, 24));
        assert_eq!(files.pinned_from(), Some(Position::new(100, 24)));
    }

    #[test]
    fn a_versions_cut_is_based_at_its_first_record_not_a_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let image = checkpoint::Image::Manager(Default::default());
        checkpoint::write(dir.path(), &image, Position::new(100, 24)).unwrap();
        let mut files = CutFiles::open(dir.path());
        // `VersionsSideSeen{2}`, then a checkpoint, then `VersionsLocalState{2}`: commits the cut
        // excludes may lie between the two, so the base stays the one before the first.
        files.on_cut_first_record(CutId(2), Position::ZERO).unwrap();
        checkpoint::write(dir.path(), &image, Position::new(900, 24)).unwrap();
        files.on_cut_first_record(CutId(2), Position::ZERO).unwrap();
        assert_eq!(files.base(CutId(2)).unwrap().from, Position::new(100, 24));
    }

    #[test]
    fn the_export_pin_survives_a_restart_and_old_bases_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = CutFiles::open(dir.path());
        for cut in 1..=(KEEP_CUTS as u64 + 2) {
            files.on_cut_start(CutId(cut), Position::new(cut * 10, 0)).unwrap();
        }
        assert!(files.base(CutId(1)).is_none() && files.base(CutId(3)).is_some());
        files.exported(Position::new(5, 24)).unwrap();
        assert_eq!(CutFiles::open(dir.path()).pinned_from(), Some(Position::new(5, 24)));
    }
}
