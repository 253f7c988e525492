//! Checkpoint files (DESIGN §7): a vnode's image (`waymark_core::image`) and the log position its
//! replay resumes from, so that a restart replays only the log written since.
//!
//! Layout: `magic[8] | segment u64 | offset u64 | payload_len u64 | crc32c(payload) u32 | payload`,
//! little-endian, payload = postcard of [`Image`]. Written to `checkpoint.tmp`, fsynced, renamed to
//! `checkpoint`, and the directory fsynced: a crash leaves the old checkpoint or the new one, never
//! half of one. Reading checks the magic, the length against the file's size before allocating,
//! and the checksum before decoding.

use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use waymark_core::{TreeImage, VnodeImage};
use waymark_wal::Position;

const MAGIC: &[u8; 8] = b"WMCKPT01";
const HEADER_BYTES: usize = 8 + 8 + 8 + 8 + 4;
pub const FILE_NAME: &str = "checkpoint";

/// What a checkpoint holds: a store vnode's image or a manager's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Image {
    Store(VnodeImage),
    Manager(TreeImage),
}

/// `Image` as builds before catch-up (issue 33) wrote it: a store vnode's image had no
/// `learner_resets`. Tried when the current layout does not decode.
#[derive(serde::Deserialize)]
enum ImageBefore33 {
    Store(waymark_core::image::VnodeImageBefore33),
    Manager(TreeImage),
}

impl From<ImageBefore33> for Image {
    fn from(old: ImageBefore33) -> Self {
        match old {
            ImageBefore33::Store(image) => Image::Store(image.into()),
            ImageBefore33::Manager(tree) => Image::Manager(tree),
        }
    }
}

/// The image in a checkpoint's payload, in the current layout or the one before it.
fn decode_image(payload: &[u8]) -> Result<Image, postcard::Error> {
    postcard::from_bytes(payload)
        .or_else(|e| postcard::from_bytes::<ImageBefore33>(payload).map(Image::from).map_err(|_| e))
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{file}: {action}: {source}")]
    Io { file: PathBuf, action: &'static str, source: std::io::Error },
    #[error("{file}: not a Waymark checkpoint (bad magic)")]
    Magic { file: PathBuf },
    #[error("{file}: header says {claimed} payload bytes but the file holds {actual}")]
    Length { file: PathBuf, claimed: u64, actual: u64 },
    #[error("{file}: checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is damaged")]
    Checksum { file: PathBuf, stored: u32, computed: u32 },
    #[error("{file}: payload cannot be decoded: {source}")]
    Decode { file: PathBuf, source: postcard::Error },
}

/// A checkpoint as read back.
#[derive(Debug)]
pub struct Checkpoint {
    pub image: Image,
    /// The first log record the image does not include.
    pub resume_at: Position,
}

fn io<'a>(file: &'a Path, action: &'static str) -> impl FnOnce(std::io::Error) -> CheckpointError + 'a {
    move |source| CheckpointError::Io { file: file.into(), action, source }
}

/// Writes a checkpoint into `dir` durably, replacing the previous one.
pub fn write(dir: &Path, image: &Image, resume_at: Position) -> Result<u64, CheckpointError> {
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    // Sized first, so that an image of gigabytes is written into one allocation, not copied each
    // time a growing buffer doubles.
    let size = postcard::experimental::serialized_size(image).expect("images always serialize");
    let payload = postcard::to_extend(image, Vec::with_capacity(size)).expect("images always serialize");
    debug_assert_eq!(payload.len(), size);
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&resume_at.segment.to_le_bytes());
    header.extend_from_slice(&resume_at.offset.to_le_bytes());
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    header.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    let mut f = File::create(&tmp).map_err(io(&tmp, "creating"))?;
    f.write_all(&header).and_then(|_| f.write_all(&payload)).map_err(io(&tmp, "writing"))?;
    f.sync_all().map_err(io(&tmp, "syncing"))?;
    let dest = dir.join(FILE_NAME);
    fs::rename(&tmp, &dest).map_err(io(&dest, "renaming into place"))?;
    sync_dir(dir)?;
    Ok((header.len() + payload.len()) as u64)
}

/// Reads the checkpoint in `dir`, if there is one. A leftover `.tmp` (a crash while writing) is
/// ignored: the rename never happened, so the previous checkpoint is the valid one.
pub fn read(dir: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let file = dir.join(FILE_NAME);
    let mut f = match File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&file, "opening")(e)),
    };
    let size = f.metadata().map_err(io(&file, "reading metadata"))?.len();
    let mut header = [0u8; HEADER_BYTES];
    f.read_exact(&mut header).map_err(|_| CheckpointError::Magic { file: file.clone() })?;
    if &header[..8] != MAGIC {
        return Err(CheckpointError::Magic { file });
    }
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    let resume_at = Position::new(word(8), word(16));
    let claimed = word(24);
    let stored = u32::from_le_bytes(header[32..36].try_into().expect("4 bytes"));
    let actual = size - HEADER_BYTES as u64;
    if claimed != actual {
        return Err(CheckpointError::Length { file, claimed, actual });
    }
    let mut payload = Vec::with_capacity(actual as usize);
    f.read_to_end(&mut payload).map_err(io(&file, "reading"))?;
    let computed = crc32c::crc32c(&payload);
    if computed != stored {
        return Err(CheckpointError::Checksum { file, stored, computed });
    }
    let image = decode_image(&payload).map_err(|source| CheckpointError::Decode { file, source })?;
    Ok(Some(Checkpoint { image, resume_at }))
}

/// The resume position in a checkpoint file's header, without reading the image.
pub fn read_resume_at(file: &Path) -> Result<Position, CheckpointError> {
    let mut f = File::open(file).map_err(io(file, "opening"))?;
    let mut header = [0u8; HEADER_BYTES];
    f.read_exact(&mut header).map_err(|_| CheckpointError::Magic { file: file.into() })?;
    if &header[..8] != MAGIC {
        return Err(CheckpointError::Magic { file: file.into() });
    }
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    Ok(Position::new(word(8), word(16)))
}

pub fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir, "syncing directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        Image::Manager(TreeImage { metadata: Default::default(), term: waymark_core::alter::Term(7) })
    }

    /// A store vnode's checkpoint written by a build before catch-up (no `learner_resets` in its
    /// image) still starts the vnode, with no reset recorded.
    #[test]
    fn a_checkpoint_from_before_catch_up_reads_with_no_reset() {
        let mut store = waymark_core::Store::default();
        store.apply(&waymark_core::ResolvedWrite {
            key: b"k".to_vec(),
            value: Some(b"v".to_vec()),
            version: 3,
            deadline_ms: None,
        });
        let summary = waymark_core::image::LogSummary { records: 9, incarnation: 2, ..Default::default() };
        let empty = VnodeImage::empty(None);
        // `Image::Store` is variant 0; a struct is its fields in order.
        let mut old = vec![0u8];
        let fields = (&summary, &store, &empty.prepared, &empty.decided, &empty.tombstones);
        old.extend(postcard::to_stdvec(&fields).unwrap());
        let Image::Store(image) = decode_image(&old).unwrap() else { panic!("a store image") };
        assert_eq!((image.summary, image.store), (summary, store));
        assert!(image.learner_resets.is_empty());
    }

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        write(dir.path(), &image(), Position::new(100, 24)).unwrap();
        let c = read(dir.path()).unwrap().unwrap();
        assert_eq!(c.image, image());
        assert_eq!(c.resume_at, Position::new(100, 24));
    }

    #[test]
    fn a_flipped_bit_is_reported_with_the_file_name() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &image(), Position::new(0, 24)).unwrap();
        let file = dir.path().join(FILE_NAME);
        let mut bytes = fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        fs::write(&file, bytes).unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(matches!(err, CheckpointError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("checkpoint"));
    }

    #[test]
    fn a_truncated_file_is_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &image(), Position::new(0, 24)).unwrap();
        let file = dir.path().join(FILE_NAME);
        let mut bytes = fs::read(&file).unwrap();
        bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        fs::write(&file, bytes).unwrap();
        assert!(matches!(read(dir.path()).unwrap_err(), CheckpointError::Length { .. }));
    }
}
