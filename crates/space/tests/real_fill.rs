//! Containers filled on the real file system with `direct_fill`, where
//! the zero fill goes through a direct (O_DIRECT) descriptor: the files read back as zeros of
//! their filled length, and bytes written through the manager's own
//! (cached) descriptor afterwards read back as written, the direct fill
//! never hiding or overwriting them.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::small_options;

use larder_io::{read_exact_at, write_all_at, OpenOptions, RealStorage, Storage};
use larder_space::{Options, SpaceManager};

const CONTAINER: u64 = 8 << 20;

fn options() -> Options {
    Options {
        container_bytes: CONTAINER,
        // Starts at 1 MiB + 4 KiB, so a fill ends with a chunk shorter
        // than the direct one, and grows from there.
        initial_container_bytes: (1 << 20) + 4096,
        spare_containers: 0,
        direct_fill: true,
        ..small_options()
    }
}

#[test]
fn a_direct_fill_reads_back_as_zeros_and_keeps_later_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let storage = Arc::new(RealStorage::new());
    let m = SpaceManager::open(storage.clone(), dir.path(), options(), std::iter::empty()).unwrap();
    let first = m.allocate(4096).unwrap();
    let path = dir.path().join(larder_space::container_file_name(first[0].container));
    let file = storage.open(&path, OpenOptions::WRITE).unwrap();
    assert_eq!(file.len().unwrap(), (1 << 20) + 4096, "a new container is its initial size");
    let mut bytes = vec![1u8; file.len().unwrap() as usize];
    read_exact_at(&*file, &mut bytes, 0).unwrap();
    assert!(bytes.iter().all(|&b| b == 0), "a filled container holds zeros");

    // Written through a cached descriptor, then the container grows past
    // it by a direct fill: the written block keeps its bytes.
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8 + 1).collect();
    write_all_at(&*file, &pattern, first[0].offset).unwrap();
    let more = m.allocate(3 << 20).unwrap();
    let len = file.len().unwrap();
    assert!(len >= (3 << 20) + 4096, "grew to {len}");
    let mut back = vec![0u8; 4096];
    read_exact_at(&*file, &mut back, first[0].offset).unwrap();
    assert_eq!(back, pattern, "the growth's fill left the written block alone");
    let mut grown = vec![1u8; (len - ((1 << 20) + 4096)) as usize];
    read_exact_at(&*file, &mut grown, (1 << 20) + 4096).unwrap();
    assert!(grown.iter().all(|&b| b == 0), "the grown part holds zeros");
    assert!(more.iter().all(|e| e.end() <= len));
    m.check_invariants().unwrap();
}
