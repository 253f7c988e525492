//! A header claiming billions of arguments or a 512 MiB argument must cost
//! nothing until the bytes arrive. This test binary installs an allocator
//! that aborts on any single allocation over 64 MiB, so "it did not
//! allocate" is checked, not assumed.

use std::alloc::{GlobalAlloc, Layout, System};

use waymark_resp::{Limits, Parsed, ProtocolError, RequestParser};

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

/// Limits that let any announced length through, so only the parser's own
/// care stands between a header and an allocation.
fn unlimited() -> Limits {
    Limits {
        bulk_max_bytes: usize::MAX,
        args_max: usize::MAX,
        unauthenticated_args_max: usize::MAX,
        unauthenticated_bulk_max_bytes: usize::MAX,
        command_max_bytes: usize::MAX,
        ..Limits::default()
    }
}

#[test]
fn a_huge_argument_count_reserves_nothing_for_it() {
    let mut parser = RequestParser::new(unlimited());
    assert_eq!(parser.parse(b"*2147483647\r\n", true), Ok(Parsed { consumed: 13, command: None }));
    for _ in 0..1000 {
        assert_eq!(parser.parse(b"$1\r\nx\r\n", true), Ok(Parsed { consumed: 7, command: None }));
    }
    let mut parser = RequestParser::new(unlimited());
    assert_eq!(parser.parse(b"*9223372036854775807\r\n", false), Ok(Parsed { consumed: 22, command: None }));
}

#[test]
fn a_huge_argument_count_is_refused_under_the_default_limits() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*2147483647\r\n", true), Err(ProtocolError::InvalidMultibulkLength));
}

#[test]
fn a_bulk_of_the_largest_allowed_length_is_not_allocated_before_its_bytes_arrive() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*1\r\n$536870912\r\n", true), Ok(Parsed { consumed: 16, command: None }));
    let some_of_it = vec![b'v'; 1 << 20];
    assert_eq!(parser.parse(&some_of_it, true), Ok(Parsed::default()));
}

#[test]
fn a_bulk_of_any_length_is_not_allocated_before_its_bytes_arrive() {
    let mut parser = RequestParser::new(unlimited());
    assert_eq!(parser.parse(b"*1\r\n$9223372036854775807\r\n", true), Ok(Parsed { consumed: 26, command: None }));
    assert_eq!(parser.parse(b"abc\r\n", true), Ok(Parsed::default()));
}
