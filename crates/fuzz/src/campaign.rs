//! One target's run: its corpus replayed, then a seeded series of mutants, each case watched.

use crate::mutate::Mutator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A case running longer than this is a hang (a loop on a length read from the input, or work as
/// large as a number it read): the watchdog saves the input and aborts the process.
const CASE_TIME_LIMIT: Duration = Duration::from_secs(20);

thread_local! {
    /// The case this thread runs, for the allocator to name when it refuses an allocation.
    static RUNNING: RefCell<Option<(&'static str, Vec<u8>)>> = const { RefCell::new(None) };
    static SAVING: Cell<bool> = const { Cell::new(false) };
}

/// Called by [`crate::BoundedAlloc`] before it refuses `size` bytes (the process then aborts):
/// saves the input of the case this thread runs, if any, and says where.
pub(crate) fn refusing(size: usize) {
    if SAVING.with(|s| s.replace(true)) {
        return;
    }
    let _ = RUNNING.try_with(|running| {
        if let Ok(running) = running.try_borrow() {
            if let Some((target, input)) = &*running {
                let file = save(target, input);
                eprintln!(
                    "{target}: a case asked for {size} bytes more than allowed; its input is in {}",
                    file.display()
                );
                if std::env::var_os("WAYMARK_FUZZ_BACKTRACE").is_some() {
                    eprintln!("{}", std::backtrace::Backtrace::force_capture());
                }
            }
        }
    });
    SAVING.with(|s| s.set(false));
}

/// A fuzz campaign against one target body.
pub struct Campaign {
    target: &'static str,
    corpus: PathBuf,
    mutants: u32,
    seed: u64,
    time_limit: Option<Duration>,
}

/// What a campaign did.
#[derive(Debug)]
pub struct Summary {
    pub corpus_files: usize,
    pub mutants: u32,
    /// Cases the target decoded to a value (the rest it refused with an error).
    pub accepted: u32,
    pub elapsed: Duration,
}

impl Campaign {
    /// `corpus` is the target's directory of seed files. The seed of the generator is drawn from
    /// the target's name, so each target sees its own series.
    pub fn new(target: &'static str, corpus: impl Into<PathBuf>) -> Campaign {
        let seed =
            target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Campaign { target, corpus: corpus.into(), mutants: 1000, seed, time_limit: Some(Duration::from_secs(10)) }
    }

    /// How many mutants follow the corpus (`WAYMARK_FUZZ_CASES` overrides it).
    pub fn mutants(mut self, n: u32) -> Campaign {
        self.mutants = n;
        self
    }

    /// Mutants stop once the campaign has run this long (a slow machine runs fewer, never
    /// longer); lifted when `WAYMARK_FUZZ_CASES` is set.
    pub fn time_limit(mut self, limit: Duration) -> Campaign {
        self.time_limit = Some(limit);
        self
    }

    /// The corpus files, by name.
    pub fn corpus(&self) -> Vec<(String, Vec<u8>)> {
        let entries = std::fs::read_dir(&self.corpus).unwrap_or_else(|e| {
            panic!("{}: {e} (write it with the ignored `writes_the_seed_corpus` test)", self.corpus.display())
        });
        let mut files: Vec<(String, Vec<u8>)> = entries
            .map(|e| {
                let path = e.expect("a directory entry").path();
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (path.file_name().expect("a file name").to_string_lossy().into_owned(), bytes)
            })
            .collect();
        files.sort();
        files
    }

    /// Runs the corpus, then the mutants, through `body`, which must not panic and answers whether
    /// it decoded a value. Corpus files named `valid-…` must decode. Panics with the failing input
    /// (saved to a file) if the body panics.
    pub fn run(&self, body: impl Fn(&[u8]) -> bool) -> Summary {
        let started = Instant::now();
        let corpus = self.corpus();
        assert!(!corpus.is_empty(), "{}: an empty corpus", self.corpus.display());
        let (mutants, time_limit) = match std::env::var("WAYMARK_FUZZ_CASES") {
            Ok(n) => (n.parse().expect("WAYMARK_FUZZ_CASES is a number"), None),
            Err(_) => (self.mutants, self.time_limit),
        };
        let seed = match std::env::var("WAYMARK_FUZZ_SEED") {
            Ok(n) => self.seed ^ n.parse::<u64>().expect("WAYMARK_FUZZ_SEED is a number"),
            Err(_) => self.seed,
        };
        let watch = Watchdog::start(self.target);
        let mut summary = Summary { corpus_files: corpus.len(), mutants: 0, accepted: 0, elapsed: Duration::ZERO };
        for (name, bytes) in &corpus {
            let accepted = watch.case(name, bytes, &body);
            assert!(accepted || !name.starts_with("valid-"), "{}: the corpus file {name} does not decode", self.target);
            summary.accepted += u32::from(accepted);
        }
        let seeds: Vec<Vec<u8>> = corpus.into_iter().map(|(_, b)| b).collect();
        let mut mutator = Mutator::new(ChaCha8Rng::seed_from_u64(seed));
        for case in 0..mutants {
            if time_limit.is_some_and(|limit| started.elapsed() > limit) {
                eprintln!("{}: stopped after {case} of {mutants} mutants, at the time limit", self.target);
                break;
            }
            let bytes = mutator.mutant(&seeds);
            summary.accepted += u32::from(watch.case(&format!("mutant {case} (seed {seed:#x})"), &bytes, &body));
            summary.mutants += 1;
        }
        summary.elapsed = started.elapsed();
        eprintln!("{}: {summary:?}", self.target);
        summary
    }
}

/// A case in progress: when it started, and its input.
type Case = (Instant, Vec<u8>);

/// Watches the case in progress from another thread.
struct Watchdog {
    target: &'static str,
    current: Arc<Mutex<Option<Case>>>,
    done: Arc<Mutex<bool>>,
}

impl Watchdog {
    fn start(target: &'static str) -> Watchdog {
        let current: Arc<Mutex<Option<Case>>> = Arc::default();
        let done: Arc<Mutex<bool>> = Arc::default();
        let (watched, finished) = (current.clone(), done.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            if *finished.lock().unwrap_or_else(|e| e.into_inner()) {
                return;
            }
            if let Some((since, input)) = &*watched.lock().unwrap_or_else(|e| e.into_inner()) {
                if since.elapsed() > CASE_TIME_LIMIT {
                    let file = save(target, input);
                    eprintln!("{target}: a case ran over {CASE_TIME_LIMIT:?}; its input is in {}", file.display());
                    std::process::abort();
                }
            }
        });
        Watchdog { target, current, done }
    }

    fn case(&self, name: &str, bytes: &[u8], body: &impl Fn(&[u8]) -> bool) -> bool {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), bytes.to_vec()));
        RUNNING.with(|r| *r.borrow_mut() = Some((self.target, bytes.to_vec())));
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| body(bytes)));
        RUNNING.with(|r| *r.borrow_mut() = None);
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        match outcome {
            Ok(accepted) => accepted,
            Err(cause) => {
                let file = save(self.target, bytes);
                let shown = if bytes.len() <= 256 { format!("{bytes:02x?}") } else { format!("{} bytes", bytes.len()) };
                eprintln!("{}: {name} panicked on {shown}; the input is in {}", self.target, file.display());
                panic::resume_unwind(cause)
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }
}

/// Saves a failing input where a regression test can be made of it.
fn save(target: &str, bytes: &[u8]) -> PathBuf {
    let file = std::env::temp_dir().join(format!("waymark-fuzz-{target}-{:08x}.bin", crc(bytes)));
    if let Err(e) = std::fs::write(&file, bytes) {
        eprintln!("{}: {e}", file.display());
    }
    file
}

/// A short name for an input (FNV-1a, folded).
fn crc(bytes: &[u8]) -> u32 {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    (h ^ (h >> 32)) as u32
}

/// `crates/<crate>/fuzz/corpus/<target>` for a crate's tests, given its `CARGO_MANIFEST_DIR`.
pub fn corpus_dir(manifest_dir: &str, target: &str) -> PathBuf {
    Path::new(manifest_dir).join("fuzz").join("corpus").join(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A corpus directory of its own for a test, with `files` in it.
    fn corpus(test: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("waymark-fuzz-test-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn a_body_that_panics_on_a_mutant_fails_the_campaign() {
        let dir = corpus("panics", &[("valid-a", b"abc")]);
        let run = panic::catch_unwind(|| {
            Campaign::new("panics", &dir).mutants(1000).run(|bytes| {
                assert_eq!(bytes.len(), 3, "only the seed's length is fine");
                true
            })
        });
        assert!(run.is_err(), "the campaign passed a panicking body");
    }

    #[test]
    fn a_valid_corpus_file_the_body_refuses_fails_the_campaign() {
        let dir = corpus("refuses", &[("valid-a", b"abc"), ("junk", b"xyz")]);
        let run = panic::catch_unwind(|| Campaign::new("refuses", &dir).mutants(0).run(|bytes| bytes != b"abc"));
        assert!(run.is_err(), "a valid- file that does not decode passed");
        let dir = corpus("accepts", &[("valid-a", b"abc"), ("junk", b"xyz")]);
        let summary = Campaign::new("accepts", &dir).mutants(10).run(|bytes| bytes == b"abc");
        assert_eq!(summary.corpus_files, 2);
        assert!(summary.accepted >= 1, "the valid file was not counted");
        for test in ["panics", "refuses", "accepts"] {
            let _ = std::fs::remove_dir_all(
                std::env::temp_dir().join(format!("waymark-fuzz-test-{}-{test}", std::process::id())),
            );
        }
    }
}
