//! The allocation watch behind bounded decoding.
//!
//! `kafka-protocol` sizes a `Vec` from an array's declared count before it
//! decodes a single element, so a hostile count asks for gigabytes and the
//! guest traps (capacity overflow or a failed allocation abort the module).
//! The decoder gives no hook between reading a count and allocating for it;
//! the allocator is the one place that sees it. This wraps the system
//! allocator (a `#[global_allocator]` for every module that links the SDK)
//! and, only while a bounded decode is running, records two things:
//!
//! - the size of the first allocation made after the decode buffer armed
//!   the watch (right after it handed the decoder a substituted value): an
//!   allocation there means the value was an array count, and its size is
//!   the size of one element;
//! - the bytes live since the decode started, so a request whose decoded
//!   form would not fit the module's memory is refused before it does.
//!
//! Outside a decode it adds one thread-local read per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, watched during bounded decodes.
pub struct WatchingAlloc;

#[global_allocator]
static ALLOCATOR: WatchingAlloc = WatchingAlloc;

struct State {
    /// A bounded decode is running on this thread.
    active: Cell<bool>,
    /// Armed by the decode buffer; the next allocation is recorded.
    armed: Cell<bool>,
    /// Size of the first allocation while armed (0: none).
    first: Cell<usize>,
    /// Bytes allocated minus bytes freed since the decode started.
    live: Cell<isize>,
}

thread_local! {
    static STATE: State = const {
        State {
            active: Cell::new(false),
            armed: Cell::new(false),
            first: Cell::new(0),
            live: Cell::new(0),
        }
    };
}

fn note(allocated: usize, freed: usize) {
    // `try_with`: allocations during thread teardown are simply not watched.
    let _ = STATE.try_with(|state| {
        if !state.active.get() {
            return;
        }
        if allocated > 0 && state.armed.get() && state.first.get() == 0 {
            state.first.set(allocated);
        }
        let delta = (allocated as isize).wrapping_sub(freed as isize);
        state.live.set(state.live.get().saturating_add(delta));
    });
}

unsafe impl GlobalAlloc for WatchingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            note(layout.size(), 0);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            note(layout.size(), 0);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        note(0, layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            note(new_size, layout.size());
        }
        new
    }
}

/// Watches allocations until dropped (one bounded decode pass).
pub(crate) struct Watch(());

impl Watch {
    pub(crate) fn start() -> Self {
        STATE.with(|state| {
            state.active.set(true);
            state.armed.set(false);
            state.first.set(0);
            state.live.set(0);
        });
        Watch(())
    }

    /// Records the size of the next allocation (see [`Watch::disarm`]).
    pub(crate) fn arm(&self) {
        STATE.with(|state| {
            state.first.set(0);
            state.armed.set(true);
        });
    }

    /// Stops recording; the size of the first allocation since
    /// [`Watch::arm`], if there was one.
    pub(crate) fn disarm(&self) -> Option<usize> {
        STATE.with(|state| {
            state.armed.set(false);
            let first = state.first.replace(0);
            (first > 0).then_some(first)
        })
    }

    /// Bytes allocated and still live since the pass started.
    pub(crate) fn live(&self) -> usize {
        STATE.with(|state| state.live.get().max(0) as usize)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        STATE.with(|state| {
            state.active.set(false);
            state.armed.set(false);
        });
    }
}
