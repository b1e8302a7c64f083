//! Punched space on a file system at its reserve: writing a punched block
//! makes the file system allocate it again, so an allocation takes punched
//! space only for the room the file system has beyond the reserve, and
//! takes unpunched free space first however it lies. Without that, once
//! more punched chunks than the allocator checks lay below the unpunched
//! space, writes went into holes, spent the reserve, and the store then
//! refused new names with unpunched space still free (`mount_full_disk`
//! through the mount, about one run in five).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{open, small_options};
use larder_io::{write_all_at, SimStorage, Storage};
use larder_space::{Extent, Options, SpaceError, SpaceManager};

const PIECE: u64 = 16 << 10;
const RESERVE: u64 = 128 << 10;

/// 4 MiB containers (one at most) growing from 64 KiB, no spares.
fn options() -> Options {
    Options {
        container_bytes: 4 << 20,
        initial_container_bytes: 64 << 10,
        reserve_bytes: RESERVE,
        spare_containers: 0,
        max_containers: 1,
        ..small_options()
    }
}

/// The bytes the simulated file system holds.
fn used(sim: &SimStorage) -> u64 {
    let capacity = 1 << 40;
    sim.set_capacity(capacity);
    capacity - sim.available_bytes(Path::new("/")).unwrap()
}

fn available(sim: &SimStorage) -> u64 {
    sim.available_bytes(Path::new("/")).unwrap()
}

/// Allocates `PIECE` and writes it, as the object layer does.
fn allocate_and_write(m: &SpaceManager, byte: u8) -> Result<Vec<Extent>, SpaceError> {
    let extents = m.allocate(PIECE)?;
    for e in &extents {
        let file = m.container_file(e.container).unwrap();
        write_all_at(&*file, &vec![byte; e.len as usize], e.offset).unwrap();
    }
    Ok(extents)
}

#[test]
fn at_the_reserve_unpunched_space_goes_first_and_punched_space_only_into_the_room_there_is() {
    let sim = SimStorage::new(41);
    let m = open(&sim, options(), &[]).unwrap();
    let pieces: Vec<Extent> = (0..136).flat_map(|_| allocate_and_write(&m, 1).unwrap()).collect();
    assert_eq!(pieces.len(), 136, "a piece came in fragments: {pieces:?}");
    // Every other one of the first 128 freed and punched: 64 punched
    // chunks, more than the allocator checks for unpunched space.
    for e in pieces[..128].iter().step_by(2) {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(std::time::Instant::now()).unwrap(), 64 * PIECE);
    // Every other one of the last eight freed, above them and not punched.
    for e in pieces[128..].iter().step_by(2) {
        m.free(*e, 2).unwrap();
    }
    m.set_durable_lsn(2);
    let s = m.stats();
    let unpunched = s.bytes_free - s.bytes_punched_now;
    assert!(unpunched >= 4 * PIECE, "{s:?}");

    // The file system fills up to the reserve.
    sim.set_capacity(used(&sim) + RESERVE);
    let mut taken = 0;
    let err = loop {
        match allocate_and_write(&m, 2) {
            Ok(_) => taken += PIECE,
            Err(e) => break e,
        }
        let left = available(&sim);
        assert!(left >= RESERVE, "a write into punched space spent the reserve: {left} of {RESERVE} left");
    };
    assert!(matches!(err, SpaceError::FileSystemFull { .. }), "{err}");
    assert_eq!(taken, unpunched / PIECE * PIECE, "the unpunched free space, and only it, was used");

    // Room for two pieces beyond the reserve: two pieces of punched space.
    sim.set_capacity(used(&sim) + RESERVE + 2 * PIECE);
    allocate_and_write(&m, 3).unwrap();
    allocate_and_write(&m, 3).unwrap();
    assert_eq!(available(&sim), RESERVE);
    let err = allocate_and_write(&m, 3).unwrap_err();
    assert!(matches!(err, SpaceError::FileSystemFull { .. }), "{err}");
    m.check_invariants().unwrap();
}

#[test]
fn with_room_for_the_whole_allocation_punched_space_is_taken_as_before() {
    let sim = SimStorage::new(42);
    let m = open(&sim, options(), &[]).unwrap();
    let pieces: Vec<Extent> = (0..8).flat_map(|_| allocate_and_write(&m, 1).unwrap()).collect();
    for e in pieces.iter().step_by(2) {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(std::time::Instant::now()).unwrap(), 4 * PIECE);
    // A piece's worth of room: a punched piece, contiguous, is taken.
    sim.set_capacity(used(&sim) + RESERVE + PIECE);
    let s = m.stats();
    let extents = allocate_and_write(&m, 2).unwrap();
    assert_eq!(extents.len(), 1, "{extents:?}");
    assert_eq!(m.stats().bytes_punched_now, s.bytes_punched_now - PIECE, "it took no punched space");
    assert_eq!(available(&sim), RESERVE);
    m.check_invariants().unwrap();
}

#[test]
fn a_spare_growth_leaves_the_room_that_punched_space_needs() {
    let sim = SimStorage::new(43);
    let options = Options { spare_containers: 1, punch_free_threshold: 0.0, ..options() };
    let m = open(&sim, options, &[]).unwrap();
    let pieces: Vec<Extent> = (0..8).flat_map(|_| allocate_and_write(&m, 1).unwrap()).collect();
    m.ensure_spares().unwrap();
    // Whatever the spare growth made is used up, so the next one is due.
    while m.stats().bytes_free > 0 {
        allocate_and_write(&m, 1).unwrap();
    }
    m.free(pieces[3], 1).unwrap();
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(std::time::Instant::now()).unwrap(), PIECE);
    // Room for half the punched piece: zeros there would only take the
    // room its write needs.
    sim.set_capacity(used(&sim) + RESERVE + PIECE / 2);
    let total = m.stats().bytes_total;
    assert_eq!(m.ensure_spares().unwrap(), 0, "a spare grew into the room punched space needs");
    assert_eq!(m.stats().bytes_total, total);
    // With room for the piece, the piece is written there.
    sim.set_capacity(used(&sim) + RESERVE + PIECE);
    assert_eq!(allocate_and_write(&m, 2).unwrap(), vec![pieces[3]]);
    assert_eq!(available(&sim), RESERVE);
    m.check_invariants().unwrap();
}
