//! Read throughput of a whole log, as a snapshot's replay reads it: the `Reader` (a buffered
//! reader, each payload copied into a `Vec` of its own) against the `FrameScanner` (large reads
//! into one buffer, payloads lent) at several read sizes, over a log of 4 000-byte records (the
//! values of `bench/peers.sh`'s restore). The log is read once before timing, so both read from
//! the page cache, as a restore right after `snapshot create` does.
//!
//! Criterion reports `reader` and `scanner/<read bytes>` with MB/s. WAYMARK_BENCH_DIR chooses
//! the file system; WAYMARK_BENCH_LOG_MB the log size (default 256).

use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, Throughput};
use waymark_wal::{FrameScanner, Options, Position, Reader, Wal};

const RECORD_BYTES: usize = 4000;
const READ_SIZES_BYTES: [usize; 4] = [256 << 10, 1 << 20, 4 << 20, 16 << 20];

fn log_dir() -> (tempfile::TempDir, u64) {
    let parent = std::env::var_os("WAYMARK_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(parent).expect("bench dir");
    let log_mb: u64 = std::env::var("WAYMARK_BENCH_LOG_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(256);
    let (mut wal, _) = Wal::open(dir.path(), Options::default()).expect("open");
    let payload: Vec<u8> = (0..RECORD_BYTES).map(|i| (i * 7) as u8).collect();
    let records = log_mb * 1_000_000 / RECORD_BYTES as u64;
    for _ in 0..records {
        wal.append(3, &payload).expect("append");
    }
    wal.close().expect("close");
    let bytes =
        std::fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").metadata().expect("meta").len()).sum();
    (dir, bytes)
}

/// Sums a byte of every payload, so that neither loop can skip reading them.
fn read_with_reader(dir: &std::path::Path) -> u64 {
    let reader = Reader::open(dir, Position::ZERO, 1 << 20).expect("reader");
    reader.map(|r| u64::from(r.expect("record").payload[0])).sum()
}

fn read_with_scanner(dir: &std::path::Path, read_bytes: usize) -> u64 {
    let mut scanner = FrameScanner::with_read_bytes(dir, Position::ZERO, 1 << 20, read_bytes).expect("scanner");
    let mut sum = 0;
    while let Some(frame) = scanner.next_frame().expect("frame") {
        sum += u64::from(frame.payload[0]);
    }
    sum
}

fn main() {
    let (dir, bytes) = log_dir();
    let expected = read_with_reader(dir.path());
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let mut group = c.benchmark_group("scan_log");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("reader", |b| b.iter(|| assert_eq!(read_with_reader(dir.path()), expected)));
    for read_bytes in READ_SIZES_BYTES {
        group.bench_with_input(BenchmarkId::new("scanner", read_bytes), &read_bytes, |b, &n| {
            b.iter(|| assert_eq!(read_with_scanner(dir.path(), n), expected))
        });
    }
    group.finish();
    c.final_summary();
}
