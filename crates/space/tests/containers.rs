//! Container files: created zero-filled, synced and directory-synced
//! before any extent points into them; kept `spare_containers` ahead of
//! need; an interrupted creation (a short file no extent uses) is removed
//! and created again at open; a short file extents point into, or a file of
//! the wrong size, is refused naming the file; other names are ignored.

#![allow(clippy::unwrap_used)]

mod common;

use common::{container_path, ext, open, small_options, CONTAINER, DIR};
use larder_io::sim::CrashMode;
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};
use larder_space::SpaceError;

#[test]
fn open_creates_a_zero_filled_durable_spare() {
    let sim = SimStorage::new(1);
    let m = open(&sim, small_options(), &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    assert_eq!(m.stats().spare_containers, 1);
    // Durable before open returned: a crash dropping everything pending
    // keeps the whole zero-filled file, under its name.
    let after = sim.crash_with(CrashMode::DropAllPending);
    let image = after.read_durable(container_path(0)).unwrap();
    assert_eq!(image.len() as u64, CONTAINER);
    assert!(image.iter().all(|&b| b == 0));
    let c = sim.counters();
    assert!(c.syncs >= 1 && c.dir_syncs >= 1, "{c:?}");
    assert_eq!(c.allocates, 0, "containers are zero-written, not fallocated");
}

#[test]
fn a_spare_made_in_the_background_stops_when_told_and_leaves_nothing() {
    use std::sync::atomic::AtomicBool;
    let sim = SimStorage::new(21);
    // Large enough for the fill to look at the flag between syncs.
    let options = larder_space::Options {
        container_bytes: 32 << 20,
        initial_container_bytes: 32 << 20,
        spares_after_first_use: true,
        ..small_options()
    };
    let m = open(&sim, options, &[]).unwrap();
    m.allocate(4096).unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    let stop = AtomicBool::new(true);
    assert!(matches!(m.ensure_spares_in_background(&stop), Err(SpaceError::Stopped)));
    assert_eq!(m.container_ids(), vec![0], "no container added");
    assert!(!sim.file_names().iter().any(|p| p.ends_with("0000000000000001.ctr")), "the partial file is removed");
    // Not stopped: the spare is made, whole and zero-filled.
    let go = AtomicBool::new(false);
    assert_eq!(m.ensure_spares_in_background(&go).unwrap(), 1);
    assert_eq!(m.container_ids(), vec![0, 2], "the stopped creation's id is not handed out again");
    let image = sim.crash_with(CrashMode::DropAllPending).read_durable(container_path(2)).unwrap();
    assert_eq!(image.len() as u64, 32 << 20);
    assert!(image.iter().all(|&b| b == 0));
}

#[test]
fn spares_are_created_ahead_of_need() {
    let sim = SimStorage::new(2);
    let options = larder_space::Options { spare_containers: 2, ..small_options() };
    let m = open(&sim, options, &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0, 1]);
    m.allocate(4096).unwrap();
    assert_eq!(m.stats().spare_containers, 1);
    assert_eq!(m.ensure_spares().unwrap(), 1);
    assert_eq!(m.container_ids(), vec![0, 1, 2]);
    assert_eq!(m.ensure_spares().unwrap(), 0);
    let s = m.stats();
    assert_eq!((s.containers_created, s.containers_created_inline), (3, 0));
}

#[test]
fn a_container_used_by_an_allocation_survives_any_crash() {
    // Crash after every possible number of writes during an open that
    // creates a container and an allocation that creates another: every
    // extent handed out lies in a container that is whole after the crash.
    let options = larder_space::Options { spare_containers: 0, ..small_options() };
    for k in 0..8 {
        let sim = SimStorage::new(10 + k);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_writes(k);
        let mut handed_out = Vec::new();
        if let Ok(m) = open(&sim, options.clone(), &[]) {
            for _ in 0..2 {
                match m.allocate(CONTAINER) {
                    Ok(e) => handed_out.extend(e),
                    Err(_) => break,
                }
            }
        }
        for mode in [CrashMode::DropAllPending, CrashMode::Random] {
            let after = sim.crash_with(mode);
            for e in &handed_out {
                let image = after.read_durable(container_path(e.container)).unwrap();
                assert_eq!(image.len() as u64, CONTAINER, "k={k}: container of {e} is not whole");
            }
            // Reopening with the extents handed out in use always works:
            // leftovers of an interrupted creation are replaced.
            let m = open(&after, options.clone(), &handed_out).unwrap();
            for id in m.container_ids() {
                assert_eq!(after.read_durable(container_path(id)).unwrap().len() as u64, CONTAINER);
            }
        }
    }
}

#[test]
fn an_interrupted_creation_is_removed_and_recreated() {
    let sim = SimStorage::new(3);
    drop(open(&sim, small_options(), &[]).unwrap());
    // A creation cut short: the name exists, the zeros did not all land.
    let short = container_path(1);
    let f = sim.open(&short, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*f, &[0; 8192], 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(std::path::Path::new(DIR)).unwrap();
    let m = open(&sim, small_options(), &[ext(0, 0, 1)]).unwrap();
    assert_eq!(m.container_ids(), vec![0, 1]);
    assert_eq!(sim.read_durable(&short).unwrap().len() as u64, CONTAINER);
    assert_eq!(m.stats().containers_created, 1);
}

#[test]
fn a_short_container_in_use_is_corruption() {
    let sim = SimStorage::new(4);
    let options = larder_space::Options { spare_containers: 2, ..small_options() };
    drop(open(&sim, options.clone(), &[]).unwrap());
    let path = container_path(1);
    sim.open(&path, OpenOptions::WRITE).unwrap().set_len(12288).unwrap();
    let err = open(&sim, options, &[ext(1, 0, 2)]).unwrap_err();
    assert!(matches!(err, SpaceError::Corrupt { offset: 12288, .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("0000000000000001.ctr") && msg.contains("shorter"), "{msg}");
    // Refused without touching anything.
    assert_eq!(sim.open(&path, OpenOptions::READ).unwrap().len().unwrap(), 12288);
}

#[test]
fn a_container_of_another_size_is_refused() {
    let sim = SimStorage::new(5);
    drop(open(&sim, small_options(), &[]).unwrap());
    let smaller = larder_space::Options {
        container_bytes: CONTAINER / 2,
        initial_container_bytes: CONTAINER / 2,
        ..small_options()
    };
    let err = open(&sim, smaller, &[]).unwrap_err().to_string();
    assert!(err.contains("0000000000000000.ctr") && err.contains("longer than container_bytes"), "{err}");
}

#[test]
fn other_names_are_left_alone() {
    let sim = SimStorage::new(6);
    sim.create_dir_all(std::path::Path::new(DIR)).unwrap();
    for name in ["notes.txt", "000000000000000A.ctr", "0000000000000001.ctr.tmp"] {
        sim.open(&std::path::Path::new(DIR).join(name), OpenOptions::CREATE_NEW).unwrap();
    }
    let m = open(&sim, small_options(), &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0]);
    assert_eq!(sim.file_names().len(), 4);
}

#[test]
fn bad_options_are_refused() {
    let sim = SimStorage::new(8);
    for (o, name) in [
        (larder_space::Options { container_bytes: 3 << 20, ..small_options() }, "container_bytes"),
        (larder_space::Options { container_bytes: 2048, ..small_options() }, "container_bytes"),
        (larder_space::Options { max_containers: 0, ..small_options() }, "max_containers"),
        (larder_space::Options { spare_containers: 5, ..small_options() }, "spare_containers"),
        (larder_space::Options { min_containers: 5, ..small_options() }, "min_containers"),
        (larder_space::Options { punch_free_threshold: 1.5, ..small_options() }, "punch_free_threshold"),
        (larder_space::Options { punch_min_bytes: 100, ..small_options() }, "punch_min_bytes"),
    ] {
        let err = open(&sim, o, &[]).unwrap_err();
        assert!(matches!(err, SpaceError::InvalidOption { name: n, .. } if n == name), "{err}");
    }
}

#[test]
fn with_spares_after_first_use_a_store_gets_containers_only_once_it_needs_one() {
    let sim = SimStorage::new(9);
    let options = larder_space::Options { spares_after_first_use: true, ..small_options() };
    let m = open(&sim, options.clone(), &[]).unwrap();
    assert!(m.container_ids().is_empty(), "no container before any allocation");
    assert_eq!(m.ensure_spares().unwrap(), 0);
    m.allocate(4096).unwrap();
    assert_eq!(m.container_ids().len(), 1);
    assert_eq!(m.ensure_spares().unwrap(), 1, "then a spare is kept ahead of need");
}

#[test]
fn min_containers_are_created_at_open_and_count_as_spares() {
    let sim = SimStorage::new(10);
    let options = larder_space::Options { spares_after_first_use: true, min_containers: 2, ..small_options() };
    let m = open(&sim, options.clone(), &[]).unwrap();
    assert_eq!(m.container_ids(), vec![0, 1], "sized ahead at open, before any allocation");
    // Fill the first: the second is still a spare, so none is created.
    m.allocate(CONTAINER).unwrap();
    assert_eq!(m.ensure_spares().unwrap(), 0, "the second container is the spare");
    m.allocate(4096).unwrap();
    assert_eq!(m.ensure_spares().unwrap(), 1, "once both hold data, a spare is kept ahead as usual");
    drop(m);
    let m = open(&sim, options, &[]).unwrap();
    assert_eq!(m.container_ids().len(), 3, "reopening keeps what exists and adds nothing");
}
