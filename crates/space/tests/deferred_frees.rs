//! Deferred frees: freed space is reused only once the freeing LSN is
//! durable and no reader registered below it remains; a reader older than
//! a released free is refused; double frees, frees of free space and frees
//! outside any container are refused without changing anything.

#![allow(clippy::unwrap_used)]

mod common;

use common::{ext, open, small_options};
use larder_io::SimStorage;
use larder_space::{Extent, SpaceError};

#[test]
fn reuse_waits_for_durability_and_older_readers() {
    let sim = SimStorage::new(1);
    let m = open(&sim, small_options(), &[]).unwrap();
    let a = m.allocate(4096).unwrap()[0];
    let old = m.register_reader(4).unwrap();
    let new = m.register_reader(5).unwrap();
    m.free(a, 5).unwrap();
    let next = |m: &larder_space::SpaceManager| m.allocate(4096).unwrap()[0];
    assert_ne!(next(&m), a, "reused before the free was durable");
    m.set_durable_lsn(5);
    assert_eq!(m.stats().deferred_frees_pending, 1, "reader at 4 may still read it");
    drop(new);
    assert_eq!(m.stats().deferred_frees_pending, 1);
    assert_eq!(old.lsn(), 4);
    drop(old);
    let s = m.stats();
    assert_eq!((s.deferred_frees_pending, s.frees_released, s.readers), (0, 1, 0));
    assert_eq!(next(&m), a, "released space is reused (lowest address first)");
    // A reader whose snapshot predates a released free could read reused space.
    assert!(matches!(m.register_reader(4), Err(SpaceError::ReaderTooOld { lsn: 4, released: 5 })));
    drop(m.register_reader(5).unwrap());
    // The durable LSN never moves back.
    m.set_durable_lsn(2);
    assert_eq!(m.durable_lsn(), 5);
}

#[test]
fn bad_frees_are_refused_and_change_nothing() {
    let sim = SimStorage::new(2);
    let m = open(&sim, small_options(), &[]).unwrap();
    let a = m.allocate(4 * 4096).unwrap()[0];
    m.free(Extent { len: 4096, ..a }, 1).unwrap();
    let before = m.stats();
    let cases = [
        (Extent { len: 4096, ..a }, "already freed"),
        (a, "already freed"),
        (ext(0, 100, 1), "is free"),
        (ext(7, 0, 1), "does not exist"),
        (Extent { offset: 1, ..a }, "multiple of 4096"),
    ];
    for (e, what) in cases {
        let err = m.free(e, 2).unwrap_err().to_string();
        assert!(err.contains(what) && err.contains(&e.to_string()), "{err}");
        assert_eq!(m.stats(), before);
    }
    m.set_durable_lsn(1);
    let err = m.free(Extent { len: 4096, ..a }, 2).unwrap_err();
    assert!(matches!(err, SpaceError::InvalidFree { .. }), "double free after release: {err}");
    // The rest of the extent is still allocated and can be freed.
    m.free(Extent { offset: a.offset + 4096, len: 3 * 4096, ..a }, 2).unwrap();
    m.check_invariants().unwrap();
}

#[test]
fn readers_on_other_threads() {
    let sim = SimStorage::new(3);
    let m = std::sync::Arc::new(open(&sim, small_options(), &[]).unwrap());
    let extents: Vec<Extent> = (0..64).map(|_| m.allocate(4096).unwrap()[0]).collect();
    let guards: Vec<_> = (0..4).map(|i| m.register_reader(i).unwrap()).collect();
    for (i, e) in extents.iter().enumerate() {
        m.free(*e, i as u64).unwrap();
    }
    m.set_durable_lsn(100);
    let handles: Vec<_> = guards.into_iter().map(|g| std::thread::spawn(move || drop(g))).collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(m.stats().deferred_frees_pending, 0);
    m.check_invariants().unwrap();
}
