//! An allocator that refuses what no decoder of a small input should ask for.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, refusing (so the process aborts with "memory allocation of N bytes
/// failed") any single allocation above `single_max_bytes` and any that would take the bytes live
/// in the process above `live_max_bytes`. A fuzz test binary installs it as its
/// `#[global_allocator]`: a decoder that sizes a buffer by a length read from its input, or builds
/// a map as large as a number it read, then fails the test instead of taking the machine's memory.
pub struct BoundedAlloc {
    single_max_bytes: usize,
    live_max_bytes: usize,
    live: AtomicUsize,
}

impl BoundedAlloc {
    pub const fn new(single_max_bytes: usize, live_max_bytes: usize) -> BoundedAlloc {
        BoundedAlloc { single_max_bytes, live_max_bytes, live: AtomicUsize::new(0) }
    }

    /// Reserves `size` bytes of the live budget; false (nothing reserved) if it would be exceeded.
    fn reserve(&self, size: usize) -> bool {
        if size > self.single_max_bytes {
            crate::campaign::refusing(size);
            return false;
        }
        let before = self.live.fetch_add(size, Ordering::Relaxed);
        if before.saturating_add(size) > self.live_max_bytes {
            self.live.fetch_sub(size, Ordering::Relaxed);
            crate::campaign::refusing(size);
            return false;
        }
        true
    }
}

// SAFETY: every call is passed to `System` unchanged, or refused with a null pointer as
// `GlobalAlloc` allows; the counter is only bookkeeping.
unsafe impl GlobalAlloc for BoundedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !self.reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(layout);
        if p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !self.reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grows = new_size > layout.size();
        if new_size > self.single_max_bytes {
            crate::campaign::refusing(new_size);
            return std::ptr::null_mut();
        }
        if grows && !self.reserve(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if grows {
                self.live.fetch_sub(new_size - layout.size(), Ordering::Relaxed);
            }
        } else if new_size < layout.size() {
            self.live.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        p
    }
}
