//! `waymark snapshot` as a user runs it without a snapshot at hand: where the root is, and the
//! refusals that protect data (the file layer itself is tested in `waymark-server`'s
//! `tests/snapshot_files.rs`, on real WAL files).

mod common;

use common::{temp_dir, waymark_said};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(30);

fn waymark(words: &[&str]) -> (bool, String) {
    waymark_said(words, WITHIN)
}

#[test]
fn the_root_must_be_given_and_dir_means_its_snapshots_subdirectory() {
    let (ok, text) = waymark(&["snapshot", "list"]);
    assert!(!ok && text.contains("--path ROOT"), "{text}");
    let dir = temp_dir();
    let d = dir.path().display().to_string();
    let (ok, text) = waymark(&["snapshot", "list", "--dir", &d]);
    assert!(ok && text.contains(&format!("no snapshots under {d}/snapshots")), "{text}");
}

#[test]
fn check_of_a_missing_snapshot_fails_and_restore_refuses_a_non_empty_directory() {
    let dir = temp_dir();
    let root = dir.path().join("snapshots");
    std::fs::create_dir_all(root.join("nightly")).unwrap();
    let root = root.display().to_string();
    let (ok, text) = waymark(&["snapshot", "check", "nightly", "--path", &root]);
    assert!(!ok && text.contains("incomplete snapshot") && text.contains("FAILED"), "{text}");
    let to = dir.path().join("busy");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("keep-me"), "data").unwrap();
    let to = to.display().to_string();
    let (ok, text) = waymark(&["snapshot", "restore", "nightly", "--path", &root, "--to", &to, "--insecure"]);
    assert!(!ok && text.contains("is not empty"), "{text}");
    assert!(dir.path().join("busy/keep-me").exists());
}
