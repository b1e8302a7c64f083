//! Counts and levels read from disk are checked against the bytes that
//! hold them before they size an allocation, a loop or a table: the
//! `near-*-huge-*` seeds of the fuzz corpus (valid files with one count or
//! level set to its maximum and the checksum recomputed) are refused, and
//! no single allocation made while decoding one is larger than a small
//! multiple of the input. How: a global allocator that records the largest
//! request made on the decoding thread while recording is on.
//!
//! Also, through a whole index: a manifest naming a run at an impossible
//! level is refused at open, naming the manifest (before, open accepted it
//! and `stats` sized a per-level table by it: 32 GiB for `u32::MAX`).
#![allow(clippy::unwrap_used)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use larder_index::{fuzzing, Index, IndexError, WriteBatch};
use larder_io::{read_exact_at, write_all_at, OpenOptions, SimStorage, Storage, StorageRef};

struct Recording;

thread_local! {
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}
static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// wrapper only reads a thread-local flag and updates an atomic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if RECORDING.with(Cell::get) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if RECORDING.with(Cell::get) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// Runs `f` and returns its result and the largest allocation it asked for.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.store(0, Ordering::Relaxed);
    RECORDING.with(|r| r.set(true));
    let out = f();
    RECORDING.with(|r| r.set(false));
    (out, LARGEST.load(Ordering::Relaxed))
}

fn corpus_file(target: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

type Decode = fn(&[u8]) -> bool;

#[test]
fn huge_counts_and_levels_are_refused_without_a_large_allocation() {
    let cases: [(&str, &str, Decode); 5] = [
        ("manifest", "near-run-count-huge-crc-fixed", fuzzing::manifest),
        ("manifest", "near-run-level-huge-crc-fixed", fuzzing::manifest),
        ("manifest", "near-operator-count-huge-crc-fixed", fuzzing::manifest),
        ("run_file", "near-block-count-huge-crc-fixed", fuzzing::run_file),
        ("run_file", "near-tombstone-count-huge-crc-fixed", fuzzing::run_file),
    ];
    let mut failures = Vec::new();
    for (target, name, decode) in cases {
        let input = corpus_file(target, name);
        let (accepted, largest) = largest_allocation(|| decode(&input));
        if accepted {
            failures.push(format!("{target}/{name} was accepted"));
        }
        // The simulated file holding a run, the copies of its sections and
        // the decoded tables are all bounded by the input's size.
        let bound = 8 * input.len() + (64 << 10);
        if largest > bound {
            failures
                .push(format!("{target}/{name}: an allocation of {largest} bytes for {} bytes of input", input.len()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The manifest `CURRENT` names, as (path, bytes).
fn committed_manifest(sim: &SimStorage, dir: &Path) -> (PathBuf, Vec<u8>) {
    let mut names = sim.list_dir(dir).unwrap();
    names.retain(|n| n.starts_with("MANIFEST-"));
    assert_eq!(names.len(), 1, "{names:?}");
    let path = dir.join(&names[0]);
    let file = sim.open(&path, OpenOptions::READ).unwrap();
    let mut bytes = vec![0u8; file.len().unwrap() as usize];
    read_exact_at(&*file, &mut bytes, 0).unwrap();
    (path, bytes)
}

#[test]
fn a_manifest_naming_an_impossible_level_is_refused_at_open() {
    let sim = SimStorage::new(3);
    let dir = Path::new("/db/index");
    let storage: StorageRef = Arc::new(sim.clone());
    let index = Index::open(storage.clone(), dir, common::tiny_options(false)).unwrap();
    index.write(1, WriteBatch::new().put(b"k", b"v")).unwrap();
    index.flush().unwrap();
    index.close().unwrap();

    let (path, mut bytes) = committed_manifest(&sim, dir);
    // Header 16, fixed body fields 40, operator count 2, the names (short:
    // one-byte lengths), run count 4, then the one run: id 8, level 4.
    let mut at = 58;
    for _ in 0..u16::from_le_bytes([bytes[56], bytes[57]]) {
        at += 1 + bytes[at] as usize;
    }
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 1);
    let level = at + 4 + 8;
    bytes[level..level + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let body_end = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body_end]);
    bytes[body_end..].copy_from_slice(&crc.to_le_bytes());
    let file = sim.open(&path, OpenOptions::WRITE).unwrap();
    write_all_at(&*file, &bytes, 0).unwrap();
    file.sync_data().unwrap();

    let e = Index::open(storage, dir, common::tiny_options(false)).map(|_| ()).unwrap_err();
    assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&*path.to_string_lossy()), "{e} does not name {}", path.display());
    assert!(e.to_string().contains("level"), "{e}");
}
