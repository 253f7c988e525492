//! `manifest`: a snapshot's manifest, read as a restore and `waymark snapshot check` read it.

use super::scratch::with_empty_dir;
use crate::snapshot::check::check;
use crate::snapshot::manifest::{read_manifest, write_manifest, MANIFEST_FILE};

/// Writes the input as a full snapshot's `manifest.json` and reads it with `read_manifest`; a
/// manifest read is then checked whole (`snapshot::check::check`: the chain, the files it lists —
/// absent here, each a problem — the logs' gaps, the replay) and written back. Contract: an error
/// or a value, never a panic, a hang or an allocation sized by a number in the file; a manifest
/// read names no path outside its snapshot; it is written back and reads back the same.
pub fn manifest(data: &[u8]) -> bool {
    with_empty_dir(|root| {
        let staged = root.join("staged");
        std::fs::create_dir_all(&staged).expect("a directory");
        std::fs::write(staged.join(MANIFEST_FILE), data).expect("the manifest written");
        let Ok(Some(manifest)) = read_manifest(&staged) else {
            return false;
        };
        manifest.confined().expect("a manifest read is confined to its snapshot");
        // Where a restore finds it: under the root, in a directory of its name (unless the file
        // system refuses the name, e.g. as too long: then no snapshot can be there).
        let dir = root.join(&manifest.name);
        if std::fs::create_dir_all(&dir).is_err() {
            return true;
        }
        std::fs::write(dir.join(MANIFEST_FILE), data).expect("the manifest written");
        let report = check(root, &manifest.name, None);
        assert!(report.target.is_some() || !report.ok(), "a check that read no chain reported no problem");
        let _ = (manifest.size_bytes(), manifest.fewer_copies());
        write_manifest(&dir, &manifest).expect("a manifest read is written back");
        let again = read_manifest(&dir).expect("written back, it reads").expect("a manifest");
        assert_eq!(again, manifest, "it read back otherwise");
        true
    })
}
