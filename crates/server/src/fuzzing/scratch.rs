//! The directory a file-reading target writes its input into: one per thread, emptied before each
//! case, in memory (`/dev/shm`) where there is one, since a case costs a few file writes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
        Scratch(base.join(format!("waymark-fuzz-{}-{thread}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Runs `case` with an empty directory of its own.
pub fn with_empty_dir<R>(case: impl FnOnce(&Path) -> R) -> R {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let dir = &scratch.get_or_insert_with(Scratch::new).0;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        case(dir)
    })
}
