//! A damaged length field claiming ~4 GiB must be rejected by bounds checks,
//! never turned into an allocation. This test binary installs an allocator
//! that aborts on any single allocation over 64 MiB, so "it did not
//! allocate" is checked, not assumed.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::{self, OpenOptions};
use std::io::Write;

use common::{payload, segment_files, small_options, write_synced};
use waymark_wal::{Options, Position, Reader, Wal, WalError};

struct CappedAllocator;

const CAP_BYTES: usize = 64 << 20;

unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP_BYTES {
            std::process::abort();
        }
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > CAP_BYTES {
            std::process::abort();
        }
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > CAP_BYTES {
            std::process::abort();
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: CappedAllocator = CappedAllocator;

/// Options whose max_record_bytes allows the full u32 range, so only the
/// remaining-file-length check stands between the field and an allocation.
fn permissive(segment_size_bytes: u64) -> Options {
    Options { max_record_bytes: u64::from(u32::MAX), ..small_options(segment_size_bytes) }
}

/// Appends a frame header claiming `len` payload bytes, plus a few bytes.
fn append_fake_frame(path: &std::path::Path, len: u32) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(&len.to_le_bytes()).unwrap();
    file.write_all(&[0xAB; 4]).unwrap();
    file.write_all(&[1, 2, 3, 4, 5]).unwrap();
}

#[test]
fn huge_length_in_tail_is_truncated_without_allocating() {
    for opts in [small_options(4096), permissive(4096)] {
        let tmp = tempfile::tempdir().unwrap();
        write_synced(tmp.path(), opts.clone(), &[(1, payload(0, 100))]);
        let last = segment_files(tmp.path()).pop().unwrap();
        let good_len = fs::metadata(&last).unwrap().len();
        append_fake_frame(&last, u32::MAX);
        let (wal, report) = Wal::open(tmp.path(), opts).unwrap();
        assert_eq!(report.truncated_at, Some(Position::new(0, good_len)));
        assert_eq!(report.bytes_dropped, 13);
        assert_eq!(wal.appended(), Position::new(0, good_len));
    }
}

#[test]
fn huge_length_in_sealed_segment_is_an_error_without_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<(u8, Vec<u8>)> = (0..20).map(|i| (1, payload(i, 100))).collect();
    write_synced(tmp.path(), permissive(512), &records);
    let first = segment_files(tmp.path()).remove(0);
    let mut bytes = fs::read(&first).unwrap();
    bytes[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&first, &bytes).unwrap();

    let err = Wal::open(tmp.path(), permissive(512)).err().unwrap();
    assert!(matches!(&err, WalError::CorruptRecord { path, offset: 24, .. } if path == &first), "{err}");
    let mut reader = Reader::open(tmp.path(), Position::ZERO, u64::from(u32::MAX)).unwrap();
    assert!(matches!(reader.next(), Some(Err(WalError::CorruptRecord { offset: 24, .. }))));
    assert!(reader.next().is_none(), "the reader stops after an error");
}
