//! Exporting one store vnode's files into a snapshot (DESIGN §5): the sealed WAL segments that
//! cover `[from, upto)`, hard-linked where the file system allows (else copied durably), and for a
//! full snapshot the checkpoint replay starts from. Sealed segments are never written again, so a
//! link is as good as a copy and costs nothing; the live log may remove its name later.
//!
//! The live side decides when: it seals the segment holding the cut's end before it exports
//! (`Wal::seal_through`), so `upto` is a segment start and everything before it is sealed.

use super::checkpoint;
use crate::snapshot::manifest::{size_and_crc, sync_dir, FileEntry, ManifestError, VnodeFiles};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use waymark_wal::segment::HEADER_BYTES;
use waymark_wal::{Position, Wal, WalError};

/// Checksums are computed reading this much at a time.

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{file}: {action}: {source}")]
    Io { file: PathBuf, action: &'static str, source: std::io::Error },
    #[error("exporting from the log in {dir}: {source}")]
    Wal { dir: PathBuf, source: WalError },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{dir}: not a vnode directory (its name must be `kind@host`)")]
    VnodeName { dir: PathBuf },
    #[error("log in {dir}: cannot export [{from}, {upto}): {reason}")]
    Range { dir: PathBuf, from: Position, upto: Position, reason: RangeProblem },
}

/// Why `[from, upto)` is not a range of sealed segments the export can link.
#[derive(Debug, thiserror::Error)]
pub enum RangeProblem {
    #[error("`upto` must be a segment start (offset {HEADER_BYTES}) at or after `from`")]
    NotSegmentStart,
    #[error("`from` is not in a sealed segment (the oldest kept starts at {oldest})")]
    FromNotSealed { oldest: u64 },
    #[error("the sealed segments end at {end}, not at `upto` (is the segment rolled?)")]
    EndsElsewhere { end: u64 },
}

fn io<'a>(file: &'a Path, action: &'static str) -> impl FnOnce(std::io::Error) -> ExportError + 'a {
    move |source| ExportError::Io { file: file.into(), action, source }
}

/// Exports the vnode whose directory is `vnode_dir` (`…/vnodes/<kind@host>`, which names it) into
/// `dest_vnode_dir` (`<snapshot dir>/<kind@host>`, created here): the sealed segments covering
/// `[from, upto)` into `dest/wal/`, and `base_checkpoint` (full snapshots) as `dest/checkpoint`.
///
/// `upto` must be a segment start (what `Wal::roll_segment` returned) with every segment before
/// it sealed; `from` is the base checkpoint's `resume_at`, or the previous export's `upto`, or the
/// start of the log. File paths in the result are relative to `dest_vnode_dir`'s parent (the
/// manifest's directory). `partitions` is left empty: the caller, who knows the placement, sets it.
pub fn export_vnode(
    wal: &mut Wal,
    vnode_dir: &Path,
    base_checkpoint: Option<&Path>,
    from: Position,
    upto: Position,
    dest_vnode_dir: &Path,
) -> Result<VnodeFiles, ExportError> {
    let vnode = vnode_name(vnode_dir)?;
    let bases = covering_segments(wal, from, upto)?;
    let dest_wal = dest_vnode_dir.join("wal");
    fs::create_dir_all(&dest_wal).map_err(io(&dest_wal, "creating"))?;
    let wal_err = |source| ExportError::Wal { dir: wal.dir().to_path_buf(), source };
    let linked = wal.link_or_copy_segments(bases, &dest_wal).map_err(wal_err)?;
    let manifest_dir = dest_vnode_dir.parent().unwrap_or(Path::new("."));
    let checkpoint = match base_checkpoint {
        Some(src) => {
            let dest = dest_vnode_dir.join(checkpoint::FILE_NAME);
            link_or_copy(src, &dest)?;
            Some(file_entry(manifest_dir, &dest)?)
        }
        None => None,
    };
    let segments = linked.iter().map(|s| file_entry(manifest_dir, &s.path)).collect::<Result<Vec<_>, _>>()?;
    sync_dir(dest_vnode_dir)?;
    sync_dir(manifest_dir)?;
    let (epochs, chains) = (Default::default(), Default::default());
    Ok(VnodeFiles { vnode, partitions: vec![], epochs, chains, checkpoint, from, upto, segments })
}

/// The `kind@host` a vnode directory is named after.
fn vnode_name(vnode_dir: &Path) -> Result<String, ExportError> {
    let name = vnode_dir.file_name().and_then(|n| n.to_str());
    match name.and_then(waymark_core::VnodeId::parse) {
        Some(id) => Ok(id.to_string()),
        None => Err(ExportError::VnodeName { dir: vnode_dir.into() }),
    }
}

/// The bases of the sealed segments covering `[from, upto)`, checked to cover it exactly.
fn covering_segments(wal: &Wal, from: Position, upto: Position) -> Result<std::ops::Range<u64>, ExportError> {
    let fail = |reason| ExportError::Range { dir: wal.dir().into(), from, upto, reason };
    if upto.offset != HEADER_BYTES || from.offset < HEADER_BYTES || from > upto {
        return Err(fail(RangeProblem::NotSegmentStart));
    }
    let sealed = wal.sealed_segments();
    let picked: Vec<_> = sealed.iter().filter(|s| s.base >= from.segment && s.base < upto.segment).collect();
    if from.segment == upto.segment {
        return Ok(from.segment..from.segment);
    }
    match (picked.first(), picked.last()) {
        (Some(first), _) if first.base != from.segment || from.offset > first.len => {
            Err(fail(RangeProblem::FromNotSealed { oldest: first.base }))
        }
        (Some(_), Some(last)) if last.end_global() == upto.segment => Ok(from.segment..upto.segment),
        (_, last) => Err(fail(RangeProblem::EndsElsewhere { end: last.map_or(from.segment, |s| s.end_global()) })),
    }
}

/// A hard link, or a durable copy when linking fails (another file system, no link support).
fn link_or_copy(src: &Path, dest: &Path) -> Result<(), ExportError> {
    if fs::hard_link(src, dest).is_ok() {
        return Ok(());
    }
    let tmp = dest.with_extension("tmp");
    fs::copy(src, &tmp).map_err(io(&tmp, "copying to"))?;
    File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(&tmp, "syncing"))?;
    fs::rename(&tmp, dest).map_err(io(dest, "renaming into place"))
}

/// The entry of `file` (relative to `manifest_dir`), with its size and crc32c as it is now.
pub fn file_entry(manifest_dir: &Path, file: &Path) -> Result<FileEntry, ExportError> {
    let (size, crc32c) = size_and_crc(file).map_err(io(file, "reading"))?;
    let relative = file.strip_prefix(manifest_dir).unwrap_or(file);
    Ok(FileEntry { path: relative.to_string_lossy().into_owned(), size, crc32c })
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_wal::Options;

    fn small_wal(dir: &Path) -> Wal {
        let options = Options { segment_size_bytes: 4096, ..Options::default() };
        Wal::open(dir, options).unwrap().0
    }

    #[test]
    fn exports_exactly_the_sealed_segments_of_the_range_with_checksums() {
        let tmp = tempfile::tempdir().unwrap();
        let vnode_dir = tmp.path().join("vnodes/store0@node1");
        let mut wal = small_wal(&vnode_dir.join("wal"));
        wal.append(1, b"before").unwrap();
        let from = wal.roll_segment().unwrap();
        wal.append(1, b"one").unwrap();
        wal.roll_segment().unwrap();
        wal.append(1, b"two").unwrap();
        let upto = wal.roll_segment().unwrap();
        wal.append(1, b"after").unwrap();
        fs::write(tmp.path().join("ckpt"), b"a checkpoint").unwrap();
        let dest = tmp.path().join("snap/store0@node1");
        let files = export_vnode(&mut wal, &vnode_dir, Some(&tmp.path().join("ckpt")), from, upto, &dest).unwrap();
        assert_eq!(files.vnode, "store0@node1");
        assert_eq!((files.from, files.upto), (from, upto));
        assert_eq!(files.segments.len(), 2);
        assert_eq!(files.segments[0].path, format!("store0@node1/wal/{:020}.wal", from.segment));
        for f in files.files() {
            let bytes = fs::read(tmp.path().join("snap").join(&f.path)).unwrap();
            assert_eq!((bytes.len() as u64, crc32c::crc32c(&bytes)), (f.size, f.crc32c), "{}", f.path);
        }
        assert_eq!(files.checkpoint.unwrap().path, "store0@node1/checkpoint");
    }

    #[test]
    fn an_unsealed_or_truncated_range_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let vnode_dir = tmp.path().join("store0@node1");
        let mut wal = small_wal(&vnode_dir.join("wal"));
        let from = wal.first_position();
        wal.append(1, b"one").unwrap();
        let active = wal.appended();
        let dest = tmp.path().join("snap/store0@node1");
        let not_sealed =
            export_vnode(&mut wal, &vnode_dir, None, from, Position::new(active.offset, HEADER_BYTES), &dest);
        assert!(matches!(not_sealed, Err(ExportError::Range { .. })), "{not_sealed:?}");
        let upto = wal.roll_segment().unwrap();
        wal.truncate_before(upto).unwrap();
        let gone = export_vnode(&mut wal, &vnode_dir, None, from, upto, &dest);
        assert!(matches!(gone, Err(ExportError::Range { .. })), "{gone:?}");
    }
}
