//! Append throughput of the WAL against a plain `write` + `fdatasync` loop
//! on a file in the same directory (same file system), for 128 B, 4 KiB and
//! 64 KiB records, syncing every 1 MiB or after every record.
//!
//! Criterion reports each as `wal/<size>` and `plain/<size>` in one group
//! per policy; after that a table prints MB/s and records/s for both and
//! the WAL/plain ratio. Set WAYMARK_BENCH_DIR to choose the file system
//! (default: cargo's target tmp dir).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use waymark_wal::{Options, Wal};

const SIZES_BYTES: [usize; 3] = [128, 4 << 10, 64 << 10];
/// Both sinks start a new file after this much, keeping disk use bounded.
const SEGMENT_BYTES: u64 = 64 << 20;
const COMPARISON_RUN: Duration = Duration::from_millis(1500);

/// When to sync: after at least this many unsynced payload bytes
/// (1 means after every record).
#[derive(Clone, Copy)]
struct Policy {
    name: &'static str,
    sync_every_bytes: u64,
}

const POLICIES: [Policy; 2] = [
    Policy { name: "sync_every_1MiB", sync_every_bytes: 1 << 20 },
    Policy { name: "sync_every_record", sync_every_bytes: 1 },
];

trait Sink {
    fn put(&mut self, data: &[u8]);
    fn sync(&mut self);
}

struct WalSink {
    wal: Wal,
}

impl WalSink {
    fn new(dir: &Path) -> WalSink {
        let options =
            Options { segment_size_bytes: SEGMENT_BYTES, verify_sealed_segments: false, ..Options::default() };
        let (wal, _) = Wal::open(dir.join("wal"), options).expect("open wal");
        WalSink { wal }
    }
}

impl Sink for WalSink {
    fn put(&mut self, data: &[u8]) {
        self.wal.append(1, data).expect("append");
    }

    fn sync(&mut self) {
        self.wal.sync().expect("sync");
        if self.wal.sealed_segments().len() > 1 {
            let end = self.wal.appended();
            self.wal.truncate_before(end).expect("truncate");
        }
    }
}

/// The baseline: one `write` per record straight to a file, `fdatasync`
/// per policy, a fresh file every SEGMENT_BYTES.
struct PlainSink {
    dir: PathBuf,
    file: File,
    path: PathBuf,
    len: u64,
    index: u64,
}

impl PlainSink {
    fn new(dir: &Path) -> PlainSink {
        let dir = dir.join("plain");
        fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("0.log");
        let file = File::create(&path).expect("create");
        PlainSink { dir, file, path, len: 0, index: 0 }
    }

    fn rotate(&mut self) {
        self.file.sync_data().expect("sync");
        self.index += 1;
        let path = self.dir.join(format!("{}.log", self.index));
        self.file = File::create(&path).expect("create");
        fs::remove_file(&self.path).expect("remove");
        self.path = path;
        self.len = 0;
    }
}

impl Sink for PlainSink {
    fn put(&mut self, data: &[u8]) {
        self.file.write_all(data).expect("write");
        self.len += data.len() as u64;
        if self.len >= SEGMENT_BYTES {
            self.rotate();
        }
    }

    fn sync(&mut self) {
        self.file.sync_data().expect("sync");
    }
}

/// Applies a sync policy on top of a sink.
struct Driver<S> {
    sink: S,
    policy: Policy,
    unsynced_bytes: u64,
}

impl<S: Sink> Driver<S> {
    fn new(sink: S, policy: Policy) -> Self {
        Driver { sink, policy, unsynced_bytes: 0 }
    }

    fn record(&mut self, data: &[u8]) {
        self.sink.put(data);
        self.unsynced_bytes += data.len() as u64;
        if self.unsynced_bytes >= self.policy.sync_every_bytes {
            self.sink.sync();
            self.unsynced_bytes = 0;
        }
    }
}

fn bench_root() -> PathBuf {
    let root = std::env::var_os("WAYMARK_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    fs::create_dir_all(&root).expect("bench dir");
    root
}

fn criterion_benches(c: &mut Criterion) {
    let root = bench_root();
    for policy in POLICIES {
        let mut group = c.benchmark_group(format!("append/{}", policy.name));
        for size in SIZES_BYTES {
            let data = vec![0x5a_u8; size];
            group.throughput(Throughput::Bytes(size as u64));
            let tmp = tempfile::tempdir_in(&root).expect("tempdir");
            let mut wal = Driver::new(WalSink::new(tmp.path()), policy);
            group.bench_with_input(BenchmarkId::new("wal", size), &data, |b, data| b.iter(|| wal.record(data)));
            let mut plain = Driver::new(PlainSink::new(tmp.path()), policy);
            group.bench_with_input(BenchmarkId::new("plain", size), &data, |b, data| b.iter(|| plain.record(data)));
        }
        group.finish();
    }
}

/// Records per second for `run` of one sink.
fn measure<S: Sink>(sink: S, policy: Policy, data: &[u8], run: Duration) -> f64 {
    let mut driver = Driver::new(sink, policy);
    let start = Instant::now();
    let mut records = 0u64;
    while start.elapsed() < run {
        for _ in 0..16 {
            driver.record(data);
        }
        records += 16;
    }
    driver.sink.sync();
    records as f64 / start.elapsed().as_secs_f64()
}

fn print_comparison() {
    let root = bench_root();
    println!("\nWAL vs plain write+fdatasync in {}", root.display());
    println!(
        "{:<18} {:>7} {:>11} {:>12} {:>11} {:>12} {:>9}",
        "policy", "size", "wal MB/s", "wal rec/s", "plain MB/s", "plain rec/s", "wal/plain"
    );
    for policy in POLICIES {
        for size in SIZES_BYTES {
            let data = vec![0x5a_u8; size];
            let tmp = tempfile::tempdir_in(&root).expect("tempdir");
            let wal = measure(WalSink::new(tmp.path()), policy, &data, COMPARISON_RUN);
            let plain = measure(PlainSink::new(tmp.path()), policy, &data, COMPARISON_RUN);
            let mb = |rps: f64| rps * size as f64 / 1e6;
            println!(
                "{:<18} {:>7} {:>11.1} {:>12.0} {:>11.1} {:>12.0} {:>8.0}%",
                policy.name,
                size,
                mb(wal),
                wal,
                mb(plain),
                plain,
                100.0 * wal / plain
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(10)
        .configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
    // Only in a real `cargo bench` run, not when tests smoke-run benches.
    if std::env::args().any(|a| a == "--bench") {
        print_comparison();
    }
}
