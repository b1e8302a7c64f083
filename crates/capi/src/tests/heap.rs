//! The heap's C API from threads: calls on one heap from many threads at
//! once, racing names with one winner, and a close that waits for calls
//! in flight while later calls fail cleanly.

use std::ffi::CString;
use std::sync::Barrier;

use crate::*;

/// A pointer to hand between threads: the API's structs are shared by
/// design (the heap looks every pointer up).
struct Shared<T>(*mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
impl<T> Shared<T> {
    /// The pointer (a method, so closures capture the whole `Shared`).
    fn get(self) -> *mut T {
        self.0
    }
}
#[allow(unsafe_code)]
// SAFETY: the library's structs are only named by address and looked up
// under its locks; moving the address to another thread reads nothing.
unsafe impl<T> Send for Shared<T> {}
#[allow(unsafe_code)]
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A heap on a new store in a temporary directory.
fn open(dir: &tempfile::TempDir, heap_path: &str) -> Shared<LarderHeap> {
    let store = c(dir.path().join("store").to_str().unwrap());
    let heap_path = c(heap_path);
    #[allow(unsafe_code)]
    // SAFETY: both are NUL-terminated strings that outlive the call.
    let heap = unsafe { larder_heap_open(store.as_ptr(), heap_path.as_ptr(), LARDER_HEAP_CREATE) };
    assert!(!heap.is_null(), "larder_heap_open: {}", errno::errno());
    Shared(heap)
}

#[allow(unsafe_code)]
fn add_name(heap: Shared<LarderHeap>, object: *const LarderMfobj, name: &str) -> i32 {
    let name = c(name);
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { larder_heap_addname(heap.get(), object, name.as_ptr()) }
}

#[allow(unsafe_code)]
fn by_name(heap: Shared<LarderHeap>, name: &str) -> *mut LarderMfobj {
    let name = c(name);
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { larder_heap_getobjbyname(heap.get(), name.as_ptr()) }
}

#[test]
fn racing_add_name_has_one_winner_and_the_name_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let heap = open(&dir, "/race");
    let threads = 8;
    for round in 0..5 {
        let name = format!("contested-{round}");
        let barrier = Barrier::new(threads);
        let results: Vec<(u64, i32, i32)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (barrier, name) = (&barrier, &name);
                    s.spawn(move || {
                        let object = larder_heap_alloc(heap.get(), 8);
                        assert!(!object.is_null());
                        let id = larder_heap_nptr(heap.get(), object).object;
                        barrier.wait();
                        let got = add_name(heap, object, name);
                        (id, got, if got == 0 { 0 } else { errno::errno().0 })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<u64> = results.iter().filter(|r| r.1 == 0).map(|r| r.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert!(results.iter().all(|r| r.1 == 0 || (r.1 == -1 && r.2 == libc::EEXIST)), "{results:?}");
        let named = by_name(heap, &name);
        assert!(!named.is_null());
        assert_eq!(larder_heap_nptr(heap.get(), named).object, winners[0]);
    }
    assert_eq!(larder_heap_close(heap.get()), 0);
}

#[test]
fn threads_share_one_heap_and_each_sees_its_own_objects() {
    let dir = tempfile::tempdir().unwrap();
    let heap = open(&dir, "/shared");
    std::thread::scope(|s| {
        for thread in 0..6u8 {
            s.spawn(move || {
                for round in 0..40u32 {
                    let name = format!("t{thread}-r{round}");
                    let object = larder_heap_alloc(heap.get(), 4096);
                    assert!(!object.is_null(), "{name}: {}", errno::errno());
                    let bytes = larder_heap_dreference(heap.get(), object).cast::<u8>();
                    assert!(!bytes.is_null());
                    #[allow(unsafe_code)]
                    // SAFETY: the object has 4096 bytes, mapped while it is
                    // attached, and only this thread knows it.
                    unsafe {
                        std::ptr::write_bytes(bytes, thread ^ round as u8, 4096)
                    };
                    assert_eq!(add_name(heap, object, &name), 0);
                    assert_eq!(larder_heap_closeobj(heap.get(), object), 0);
                    let again = by_name(heap, &name);
                    assert_eq!(again, object, "one mfobj per object");
                    let bytes = larder_heap_dreference(heap.get(), again).cast::<u8>();
                    #[allow(unsafe_code)]
                    // SAFETY: as above; attached again by name.
                    let read = unsafe { std::slice::from_raw_parts(bytes, 4096) };
                    assert!(read.iter().all(|&b| b == thread ^ round as u8), "{name}: another thread's bytes");
                    if round % 2 == 0 {
                        assert_eq!(larder_heap_freeobj(heap.get(), again), 0);
                        assert!(by_name(heap, &name).is_null());
                        assert_eq!(errno::errno().0, libc::ENOENT);
                    }
                }
            });
        }
    });
    assert_eq!(larder_heap_sync(heap.get()), 0);
    // Every odd round's object is still named, with its bytes.
    for thread in 0..6u8 {
        for round in (1..40u32).step_by(2) {
            let object = by_name(heap, &format!("t{thread}-r{round}"));
            assert!(!object.is_null());
            assert_eq!(larder_heap_size(heap.get(), object), 4096);
        }
    }
    assert_eq!(larder_heap_close(heap.get()), 0);
}

#[test]
fn close_waits_for_calls_in_flight_and_later_calls_fail_with_ebadf() {
    let dir = tempfile::tempdir().unwrap();
    let heap = open(&dir, "/closing");
    let barrier = Barrier::new(5);
    let outcomes: Vec<(usize, i32)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let (mut made, mut last_errno) = (0, 0);
                    loop {
                        let object = larder_heap_alloc(heap.get(), 16);
                        if object.is_null() {
                            last_errno = errno::errno().0;
                            break;
                        }
                        made += 1;
                        if made > 100_000 {
                            break;
                        }
                    }
                    (made, last_errno)
                })
            })
            .collect();
        barrier.wait();
        assert_eq!(larder_heap_close(heap.get()), 0);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Each worker's calls succeeded until the close, then failed: EBADF
    // for the handle, never a crash or another error.
    for (made, last) in &outcomes {
        assert!(*made <= 100_000, "{outcomes:?}");
        assert_eq!(*last, libc::EBADF, "{outcomes:?}");
    }
    // The store closed with its last heap: it opens again, from scratch.
    let heap = open(&dir, "/closing");
    assert_eq!(larder_heap_close(heap.get()), 0);
}

#[test]
fn threads_allocate_blocks_in_one_object_without_overlap_or_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let heap = open(&dir, "/blocks");
    let object = Shared(larder_heap_alloc(heap.get(), 64));
    assert!(!object.get().is_null());
    std::thread::scope(|s| {
        for thread in 0..4u8 {
            s.spawn(move || {
                let mut live: Vec<(LarderNptr, usize)> = Vec::new();
                for round in 0..300usize {
                    let size = 16 + (round * 37 + thread as usize * 11) % 500;
                    let block = larder_heap_alloc_in(heap.get(), object.get(), size, 8);
                    assert_ne!(block.object, 0, "larder_heap_alloc_in: {}", errno::errno());
                    let bytes = larder_heap_deref(heap.get(), block).cast::<u8>();
                    assert!(!bytes.is_null());
                    #[allow(unsafe_code)]
                    // SAFETY: the allocator handed this thread `size` bytes
                    // there; the object's mapping keeps its base as it grows.
                    unsafe {
                        std::ptr::write_bytes(bytes, thread + 1, size)
                    };
                    live.push((block, size));
                    if round % 3 == 2 {
                        let (freed, _) = live.remove(round % live.len());
                        assert_eq!(larder_heap_free_in(heap.get(), freed), 0);
                        assert!(larder_heap_deref(heap.get(), freed).is_null());
                        assert_eq!(errno::errno().0, libc::ESTALE, "a freed block's pointer");
                    }
                }
                // Every live block still holds this thread's bytes: no
                // other thread's block overlapped it.
                for (block, size) in live {
                    let bytes = larder_heap_deref(heap.get(), block).cast::<u8>();
                    #[allow(unsafe_code)]
                    // SAFETY: as above, a live block of `size` bytes.
                    let read = unsafe { std::slice::from_raw_parts(bytes, size) };
                    assert!(read.iter().all(|&b| b == thread + 1), "block {block:?} was overwritten");
                }
            });
        }
    });
    assert_eq!(larder_heap_sync(heap.get()), 0);
    assert_eq!(larder_heap_close(heap.get()), 0);
}
