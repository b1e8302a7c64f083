//! Containers that start small and grow: a file holds only the part of its
//! container filled so far, growth is zero-filled and synced before any
//! extent points into it, open takes a file's length as it finds it, and
//! no growth or creation leaves the file system less than the reserve.

#![allow(clippy::unwrap_used)]

mod common;

use common::{container_path, open, small_options, CONTAINER};
use larder_io::sim::CrashMode;
use larder_io::{write_all_at, SimStorage, Storage};
use larder_space::{Extent, Options, SpaceError};

/// 1 MiB containers starting at 64 KiB, no spares.
fn growing() -> Options {
    Options { initial_container_bytes: 64 << 10, spare_containers: 0, ..small_options() }
}

fn file_len(sim: &SimStorage, id: u64) -> u64 {
    sim.open(&container_path(id), larder_io::OpenOptions::READ).unwrap().len().unwrap()
}

#[test]
fn a_container_starts_small_and_grows_as_allocations_need() {
    let sim = SimStorage::new(1);
    let m = open(&sim, growing(), &[]).unwrap();
    let first = m.allocate(4096).unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    assert_eq!(file_len(&sim, 0), 64 << 10, "a new container is its initial size");
    // 300 KiB more than the file holds: it grows by what is short at least.
    let more = m.allocate(360 << 10).unwrap();
    let len = file_len(&sim, 0);
    assert!((364 << 10..=CONTAINER).contains(&len), "grew to {len}");
    assert!(more.iter().all(|e| e.end() <= len), "an extent past the filled part: {more:?}");
    assert_eq!(m.stats().bytes_total, len, "stats count the file, not the address space");
    assert!(m.stats().container_growths >= 1);
    // Until the container is whole, no second one.
    let rest = m.allocate(CONTAINER - 364 * 1024).unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    assert_eq!(file_len(&sim, 0), CONTAINER);
    // Then a second starts small again.
    m.allocate(4096).unwrap();
    assert_eq!(m.container_ids(), vec![0, 1]);
    assert_eq!(file_len(&sim, 1), 64 << 10);
    m.check_invariants().unwrap();
    drop(m);
    // Reopen over what is in use: the lengths are kept, free space is the
    // filled part less the extents.
    let used: Vec<Extent> = first.iter().chain(&more).chain(&rest).copied().collect();
    let m = open(&sim, growing(), &used).unwrap();
    let s = m.stats();
    assert_eq!(s.bytes_total, CONTAINER + (64 << 10));
    assert_eq!(s.bytes_free, 64 << 10);
    assert!(m.verify(used.iter().copied()).unwrap().is_clean());
}

#[test]
fn growth_is_durable_before_anything_lands_in_it() {
    let sim = SimStorage::new(2);
    let m = open(&sim, growing(), &[]).unwrap();
    m.allocate(64 << 10).unwrap();
    let grown = m.allocate(128 << 10).unwrap();
    let file = m.container_file(0).unwrap();
    for e in &grown {
        write_all_at(&*file, &vec![7u8; e.len as usize], e.offset).unwrap();
    }
    // Lose every unsynced write: the growth itself was synced.
    let after = sim.crash_with(CrashMode::DropAllPending);
    let len = after.durable_len(container_path(0)).unwrap();
    assert!(grown.iter().all(|e| e.end() <= len), "growth not durable: {len} bytes, {grown:?}");
    open(&after, growing(), &grown).unwrap().check_invariants().unwrap();
}

#[test]
fn an_extent_past_the_file_is_refused_and_a_torn_growth_is_kept_as_it_is() {
    let sim = SimStorage::new(3);
    open(&sim, growing(), &[]).unwrap().allocate(4096).unwrap();
    // A growth torn part-way: the file ends inside a block.
    let f = sim.open(&container_path(0), larder_io::OpenOptions::WRITE).unwrap();
    f.set_len((64 << 10) + 5000).unwrap();
    f.sync_data().unwrap();
    drop(f);
    let m = open(&sim, growing(), &[]).unwrap();
    assert_eq!(m.stats().bytes_total, (64 << 10) + 4096, "the whole blocks of the file");
    drop(m);
    let past = Extent { container: 0, offset: 64 << 10, len: 8192 };
    let err = open(&sim, growing(), &[past]).unwrap_err();
    assert!(matches!(err, SpaceError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("0000000000000000.ctr"), "{err}");
}

#[test]
fn growth_stops_at_the_reserve_and_fills_the_file_system_up_to_it() {
    let sim = SimStorage::new(4);
    let capacity = 3 << 20;
    let reserve = 256 << 10;
    sim.set_capacity(capacity);
    let options = Options { reserve_bytes: reserve, max_containers: 16, ..growing() };
    let m = open(&sim, options, &[]).unwrap();
    let mut held = Vec::new();
    let err = loop {
        match m.allocate(40 << 10) {
            Ok(extents) => held.extend(extents),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SpaceError::FileSystemFull { .. }), "{err}");
    assert!(err.is_no_space());
    let available = sim.available_bytes(std::path::Path::new("/")).unwrap();
    assert!(available >= reserve, "the reserve was eaten: {available} left");
    let used: u64 = held.iter().map(|e| e.len).sum();
    assert!(used + reserve + (40 << 10) >= capacity, "filled {used} of {capacity} with {reserve} reserved");
    // Freed space is reused without growing.
    let lsn = 1;
    for e in held.drain(..4) {
        m.free(e, lsn).unwrap();
    }
    m.set_durable_lsn(lsn);
    m.allocate(40 << 10).unwrap();
    // A lower reserve lets it grow again.
    m.set_reserve_bytes(0);
    m.allocate(40 << 10).unwrap();
    m.check_invariants().unwrap();
}

#[test]
fn no_spare_is_made_that_the_file_system_cannot_hold() {
    let sim = SimStorage::new(5);
    sim.set_capacity(100 << 10);
    let options = Options { spare_containers: 1, spares_after_first_use: false, ..growing() };
    let m = open(&sim, options, &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0], "one 64 KiB spare fits");
    assert_eq!(m.ensure_spares().unwrap(), 0);
    // Filled, it grows ahead only into the room there is, and then makes
    // nothing, without an error.
    m.allocate(64 << 10).unwrap();
    m.ensure_spares().unwrap();
    assert_eq!(m.ensure_spares().unwrap(), 0);
    assert_eq!(m.container_ids(), vec![0]);
    assert!(m.stats().bytes_total <= 100 << 10);
}

#[test]
fn the_spare_of_growing_containers_is_the_next_growth_not_a_new_file() {
    let sim = SimStorage::new(6);
    let options = Options { spare_containers: 1, spares_after_first_use: true, ..growing() };
    let m = open(&sim, options.clone(), &[]).unwrap();
    assert!(m.container_ids().is_empty(), "no container before the first allocation");
    let mut held = Vec::new();
    // Fill well past the first container's initial size, making spares
    // after every allocation as the background thread would.
    for _ in 0..40 {
        held.extend(m.allocate(16 << 10).unwrap());
        m.ensure_spares().unwrap();
    }
    assert_eq!(m.container_ids(), vec![0], "spares made new files instead of growing the one there is");
    let s = m.stats();
    assert!(s.bytes_free > 0, "the spare growth left no free space ahead");
    // Ahead by at most one and a half growth steps (an eighth of the
    // file, at least the 64 KiB initial size).
    assert!(s.bytes_total <= (640 << 10) + 3 * (128 << 10) / 2, "grew far beyond need: {s:?}");
    // Reopened (as each CLI command does), still one file.
    drop(m);
    let m = open(&sim, options, &held).unwrap();
    m.allocate(16 << 10).unwrap();
    m.ensure_spares().unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    m.check_invariants().unwrap();
}

#[test]
fn on_a_full_file_system_freed_space_is_punched_below_the_threshold() {
    let sim = SimStorage::new(7);
    let options = Options { reserve_bytes: 64 << 10, ..growing() };
    let m = open(&sim, options, &[]).unwrap();
    let held: Vec<Extent> = (0..16).flat_map(|_| m.allocate(64 << 10).unwrap()).collect();
    let file = m.container_file(0).unwrap();
    for e in &held {
        write_all_at(&*file, &vec![1u8; e.len as usize], e.offset).unwrap();
    }
    // One extent of sixteen freed: far below the 25% threshold.
    m.free(held[0], 1).unwrap();
    m.set_durable_lsn(1);
    let now = std::time::Instant::now();
    assert_eq!(m.punch_some(now).unwrap(), 0, "punched with room to spare");
    // The file system fills up to the reserve: now it is punched.
    sim.set_capacity(m.stats().bytes_total + (64 << 10));
    assert_eq!(m.punch_some(now).unwrap(), 64 << 10);
}

#[test]
fn a_failed_growth_is_made_durable_at_open_before_it_is_used() {
    use larder_io::sim::{SimFault, SimOp};
    let sim = SimStorage::new(8);
    let m = open(&sim, growing(), &[]).unwrap();
    let first = m.allocate(64 << 10).unwrap();
    // The growth's second 64 KiB write fails: the file is 64 KiB longer
    // than its synced length.
    sim.fail_nth(SimOp::Write, 2, SimFault::NoSpace);
    assert!(m.allocate(128 << 10).is_err());
    assert_eq!(file_len(&sim, 0), 128 << 10);
    drop(m);
    let m = open(&sim, growing(), &first).unwrap();
    let next = m.allocate(64 << 10).unwrap();
    assert_eq!(next, vec![Extent { container: 0, offset: 64 << 10, len: 64 << 10 }]);
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert!(
        after.durable_len(container_path(0)).unwrap() >= next[0].end(),
        "space handed out after open lies past the container's durable end"
    );
}

#[test]
fn containers_made_for_min_containers_are_whole() {
    let sim = SimStorage::new(9);
    let options = Options { min_containers: 2, ..growing() };
    let m = open(&sim, options, &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0, 1]);
    assert_eq!((file_len(&sim, 0), file_len(&sim, 1)), (CONTAINER, CONTAINER));
    assert_eq!(m.stats().bytes_free, 2 * CONTAINER);
}

#[test]
fn the_reserve_can_be_read_and_changed() {
    let sim = SimStorage::new(10);
    let m = open(&sim, Options { reserve_bytes: 1 << 20, ..growing() }, &[]).unwrap();
    assert_eq!(m.reserve_bytes(), 1 << 20);
    m.set_reserve_bytes(2 << 20);
    assert_eq!(m.reserve_bytes(), 2 << 20);
    // check_room raises it to what the owner computes, never below the option.
    m.check_room(|| 0, 0).unwrap();
    assert_eq!(m.reserve_bytes(), 1 << 20);
    m.set_reserve_bytes(0);
    m.check_room(|| 3 << 20, 0).unwrap();
    assert_eq!(m.reserve_bytes(), 3 << 20);
}

#[test]
fn near_the_reserve_a_full_file_system_is_seen_at_once() {
    let sim = SimStorage::new(11);
    let reserve = 1 << 20;
    let m = open(&sim, Options { reserve_bytes: reserve, ..growing() }, &[]).unwrap();
    // Room within ROOM_CHECK_NEAR of the reserve: the room seen is not
    // trusted, so filling the file system shows in the next call.
    sim.set_capacity(reserve + larder_space::ROOM_CHECK_NEAR / 2);
    m.check_room(|| 0, 0).unwrap();
    sim.set_capacity(reserve / 2);
    let err = m.check_room(|| 0, 0).unwrap_err();
    assert!(matches!(err, SpaceError::FileSystemFull { .. }), "{err}");
    // Room grows back: seen at once too.
    sim.set_capacity(u64::MAX);
    m.check_room(|| 0, 0).unwrap();
}
