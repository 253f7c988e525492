//! Exporting sealed segments by hard link (cheap, for snapshots and
//! shipping to followers), falling back to a durable copy when the
//! destination is on another file system or linking is not supported.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use crate::dir::TEMP_SUFFIX;
use crate::error::{io_err, Result, WalError};

/// Links `src` to `dest`, or copies it if linking fails for a reason other
/// than `dest` existing. `try_link: false` forces the copy path (tests).
/// The caller syncs the destination directory.
pub(crate) fn link_or_copy_file(src: &Path, dest: &Path, try_link: bool) -> Result<()> {
    if dest.exists() {
        return Err(WalError::DestinationExists { path: dest.to_owned() });
    }
    if try_link {
        match fs::hard_link(src, dest) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(WalError::DestinationExists { path: dest.to_owned() })
            }
            Err(_) => {} // e.g. EXDEV: fall back to copying.
        }
    }
    copy_durably(src, dest)
}

/// Copies through a temporary name and renames, so `dest` never exists
/// half-written, and syncs the data before the rename.
fn copy_durably(src: &Path, dest: &Path) -> Result<()> {
    let mut temp = dest.as_os_str().to_owned();
    temp.push(TEMP_SUFFIX);
    let temp = Path::new(&temp);
    fs::copy(src, temp).map_err(io_err("copying to", temp))?;
    File::open(temp).and_then(|f| f.sync_all()).map_err(io_err("syncing", temp))?;
    fs::rename(temp, dest).map_err(io_err("renaming into place", dest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_fallback_produces_identical_file() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a.wal");
        let dest = tmp.path().join("b.wal");
        fs::write(&src, b"segment bytes").unwrap();
        link_or_copy_file(&src, &dest, false).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"segment bytes");
        assert!(!tmp.path().join("b.wal.tmp").exists());
        let err = link_or_copy_file(&src, &dest, false).unwrap_err();
        assert!(matches!(err, WalError::DestinationExists { .. }));
    }

    #[test]
    fn link_shares_the_inode() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a.wal");
        let dest = tmp.path().join("b.wal");
        fs::write(&src, b"x").unwrap();
        link_or_copy_file(&src, &dest, true).unwrap();
        let (a, b) = (fs::metadata(&src).unwrap(), fs::metadata(&dest).unwrap());
        assert_eq!(a.ino(), b.ino());
    }
}
