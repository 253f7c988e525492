//! `checkpoint`: a vnode's checkpoint file, read as a start reads it.

use super::scratch::with_empty_dir;
use crate::storage::checkpoint::{self, FILE_NAME};

/// The header's size (`storage::checkpoint`'s layout): magic, segment, offset, length, checksum.
const HEADER_BYTES: usize = 8 + 8 + 8 + 8 + 4;

/// Writes the input (after its first byte) as a vnode's checkpoint file and reads it with
/// `storage::checkpoint::read`, and its header with `read_resume_at`. Contract: an error or a
/// value, never a panic or an allocation sized by the header's length; both readers agree on the
/// resume position; a checkpoint read is written back and reads back the same.
///
/// An odd first byte makes the header's length and checksum right for the payload before the file
/// is written, so that damaged images reach the image decoder instead of stopping at the checksum.
pub fn checkpoint(data: &[u8]) -> bool {
    let Some((&mode, file)) = data.split_first() else {
        return false;
    };
    let mut file = file.to_vec();
    if mode & 1 == 1 && file.len() >= HEADER_BYTES {
        let payload_len = (file.len() - HEADER_BYTES) as u64;
        let crc = crc32c::crc32c(&file[HEADER_BYTES..]);
        file[24..32].copy_from_slice(&payload_len.to_le_bytes());
        file[32..36].copy_from_slice(&crc.to_le_bytes());
    }
    with_empty_dir(|dir| {
        std::fs::write(dir.join(FILE_NAME), &file).expect("the checkpoint written");
        let header = checkpoint::read_resume_at(&dir.join(FILE_NAME));
        let Ok(Some(read)) = checkpoint::read(dir) else {
            return false;
        };
        assert_eq!(header.ok(), Some(read.resume_at), "the header reader and the reader disagree");
        checkpoint::write(dir, &read.image, read.resume_at).expect("a checkpoint read is written back");
        let again = checkpoint::read(dir).expect("written back, it reads").expect("a checkpoint");
        assert_eq!((again.image, again.resume_at), (read.image, read.resume_at), "it read back otherwise");
        true
    })
}
