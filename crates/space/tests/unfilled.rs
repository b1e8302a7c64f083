//! Large allocations into never-written space (`unwritten_min_bytes`):
//! they take space past a growing container's filled part, set aside with
//! `fallocate` and never zero-filled, which is not written space until a
//! sync of the container; smaller ones keep the zero-filled space; open
//! finds what a crash left of them as holes.

#![allow(clippy::unwrap_used)]

mod common;

use common::{container_path, open, small_options, CONTAINER};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::{read_exact_at, write_all_at, SimStorage, Storage};
use larder_space::{Extent, Options};

const LARGE: u64 = 128 << 10;

/// 1 MiB containers starting at 64 KiB, no spares, allocations of 128 KiB
/// and more unfilled.
fn options() -> Options {
    Options { initial_container_bytes: 64 << 10, spare_containers: 0, unwritten_min_bytes: LARGE, ..small_options() }
}

fn file_len(sim: &SimStorage, id: u64) -> u64 {
    sim.open(&container_path(id), larder_io::OpenOptions::READ).unwrap().len().unwrap()
}

#[test]
fn a_large_allocation_takes_unwritten_space_without_writing_zeros() {
    let sim = SimStorage::new(1);
    let m = open(&sim, options(), &[]).unwrap();
    let small = m.allocate(4096).unwrap();
    assert_eq!(file_len(&sim, 0), 64 << 10);
    let before = sim.counters();
    let large = m.allocate(LARGE).unwrap();
    let after = sim.counters();
    assert_eq!(large, vec![Extent { container: 0, offset: 64 << 10, len: LARGE }], "past the filled part");
    assert_eq!(after.bytes_written, before.bytes_written, "zeros were written for a large allocation");
    assert_eq!(after.allocates, before.allocates + 1);
    assert_eq!(file_len(&sim, 0), (64 << 10) + LARGE, "the file covers the new extent");
    assert!(!m.is_written(large[0]), "unwritten space counted as written");
    assert!(m.is_written(small[0]), "zero-filled space counted as unwritten");
    let mut buf = vec![1u8; LARGE as usize];
    read_exact_at(&*m.container_file(0).unwrap(), &mut buf, large[0].offset).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "unwritten space does not read as zeros");
    let s = m.stats();
    assert_eq!((s.unfilled_allocations, s.allocations), (1, 2));
    assert_eq!(s.bytes_total, (64 << 10) + LARGE);
    // One byte short of the threshold: zero-filled space, grown as usual.
    let below = m.allocate(LARGE - 1).unwrap();
    assert!(below.iter().all(|e| m.is_written(*e)), "a small allocation got unwritten space: {below:?}");
    assert_eq!(m.stats().unfilled_allocations, 1);
    m.check_invariants().unwrap();
    let used: Vec<Extent> = small.iter().chain(&large).chain(&below).copied().collect();
    assert!(m.verify(used.iter().copied()).unwrap().is_clean());
}

#[test]
fn a_whole_container_or_too_little_room_takes_the_usual_path() {
    let sim = SimStorage::new(2);
    // Whole containers: no part past the filled one.
    let m = open(&sim, Options { initial_container_bytes: CONTAINER, ..options() }, &[]).unwrap();
    let e = m.allocate(LARGE).unwrap();
    assert!(e.iter().all(|e| m.is_written(*e)));
    assert_eq!(m.stats().unfilled_allocations, 0);
    // Larger than what is left past the filled part: grown and zero-filled.
    let sim = SimStorage::new(3);
    let m = open(&sim, options(), &[]).unwrap();
    m.allocate(CONTAINER - (64 << 10)).unwrap();
    let rest = m.allocate(128 << 10).unwrap();
    assert!(rest.iter().all(|e| m.is_written(*e)), "{rest:?}");
    m.check_invariants().unwrap();
}

#[test]
fn a_failed_fallocate_gives_the_blocks_back_and_allocates_as_usual() {
    let sim = SimStorage::new(4);
    let m = open(&sim, options(), &[]).unwrap();
    m.allocate(4096).unwrap();
    sim.fail_nth(SimOp::Allocate, 1, SimFault::Eio);
    let got = m.allocate(LARGE).unwrap();
    assert_eq!(m.stats().unfilled_allocations, 0);
    m.check_invariants().unwrap();
    let total: u64 = got.iter().map(|e| e.len).sum();
    assert_eq!(total, LARGE);
    // The container grew as usual (zero-filled) over the space the failed
    // call was for: written space.
    assert!(got.iter().all(|e| m.is_written(*e)), "{got:?}");
    assert!(got.iter().any(|e| e.end() > 64 << 10), "no growth: {got:?}");
}

#[test]
fn a_crash_before_the_containers_sync_leaves_holes_that_open_finds() {
    let sim = SimStorage::new(5);
    let m = open(&sim, options(), &[]).unwrap();
    m.allocate(4096).unwrap();
    let synced = m.allocate(LARGE).unwrap()[0];
    let file = m.container_file(0).unwrap();
    write_all_at(&*file, &vec![7u8; LARGE as usize], synced.offset).unwrap();
    file.sync_data().unwrap();
    let lost = m.allocate(LARGE).unwrap()[0];
    write_all_at(&*file, &vec![9u8; LARGE as usize], lost.offset).unwrap();
    for mode in [CrashMode::DropAllPending, CrashMode::Random, CrashMode::KeepAllPending] {
        let image = sim.crash_with(mode);
        let len = image.durable_len(container_path(0)).unwrap();
        assert!(len >= synced.end(), "{mode:?}: the synced extent is past the file ({len})");
        let m = open(&image, options(), &[synced]).unwrap();
        assert!(m.is_written(synced), "{mode:?}: a synced write is a hole at open");
        if len > lost.offset {
            let unsynced = Extent { container: 0, offset: lost.offset, len: len.min(lost.end()) - lost.offset };
            assert!(!m.is_written(unsynced), "{mode:?}: unsynced unwritten space taken for written");
        }
        m.check_invariants().unwrap();
        assert!(m.verify([synced]).unwrap().is_clean(), "{mode:?}");
        // Whatever survived past the synced extent is free, and a large
        // allocation there goes on growing the file.
        m.allocate(LARGE).unwrap();
        m.check_invariants().unwrap();
    }
}

#[test]
fn freed_space_is_reused_before_the_file_grows_and_stays_not_written() {
    let sim = SimStorage::new(6);
    let m = open(&sim, options(), &[]).unwrap();
    m.allocate(4096).unwrap();
    let a = m.allocate(LARGE).unwrap()[0];
    let b = m.allocate(LARGE).unwrap()[0];
    assert_eq!(m.stats().unfilled_allocations, 2);
    let len = file_len(&sim, 0);
    m.free(a, 1).unwrap();
    m.free(b, 1).unwrap();
    m.set_durable_lsn(1);
    // Free space is now more than the container's next growth: a large
    // allocation reuses it rather than growing the file, and the space
    // is still not taken for written.
    let again = m.allocate(LARGE).unwrap();
    assert_eq!(file_len(&sim, 0), len, "the file grew while {} bytes were free", 2 * LARGE);
    assert_eq!(m.stats().unfilled_allocations, 2);
    for e in &again {
        assert!(a.offset <= e.offset && e.end() <= b.end(), "{e} is not in the freed space");
        assert!(!m.is_written(*e), "{e}: freed unwritten space counted as written");
    }
    m.check_invariants().unwrap();
}
