//! ENOSPC: once `max_containers` exist and are full, an allocation fails
//! with `NoSpace`, changing nothing; frees still work, and once released
//! their space is allocated again. Requests larger than a container span
//! several; allocations create containers themselves when no spare is
//! ready.

#![allow(clippy::unwrap_used)]

mod common;

use common::{open, small_options, CONTAINER};
use larder_io::SimStorage;
use larder_space::{Options, SpaceError};

#[test]
fn full_store_refuses_then_reuses_freed_space() {
    let sim = SimStorage::new(1);
    let options = Options { max_containers: 2, spare_containers: 0, ..small_options() };
    let m = open(&sim, options, &[]).unwrap();
    assert!(m.container_ids().is_empty());
    let big = m.allocate(CONTAINER + 8192).unwrap();
    assert_eq!(big.len(), 2, "{big:?}");
    assert_eq!(m.stats().containers_created_inline, 2);
    let mut small = Vec::new();
    loop {
        match m.allocate(100 << 10) {
            Ok(e) => small.extend(e),
            Err(SpaceError::NoSpace { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let before = m.stats();
    let files = sim.file_names();
    let err = m.allocate(before.bytes_free + 4096).unwrap_err();
    assert!(matches!(err, SpaceError::NoSpace { containers: 2, max_containers: 2, .. }), "{err}");
    assert_eq!(m.stats(), before, "a refused allocation changed the state");
    assert_eq!(sim.file_names(), files);
    m.check_invariants().unwrap();

    // Frees still work; the space returns once durable.
    m.free(big[0], 3).unwrap();
    assert!(matches!(m.allocate(CONTAINER).unwrap_err(), SpaceError::NoSpace { .. }));
    m.set_durable_lsn(3);
    let again = m.allocate(CONTAINER).unwrap();
    assert_eq!(again, vec![big[0]]);
    assert!(matches!(m.allocate(0).unwrap_err(), SpaceError::InvalidAllocation { .. }));
}

#[test]
fn a_request_beyond_every_container_is_refused_without_creating_any() {
    let sim = SimStorage::new(2);
    let options = Options { max_containers: 3, ..small_options() };
    let m = open(&sim, options, &[]).unwrap();
    let before = m.stats();
    let err = m.allocate(3 * CONTAINER + 1).unwrap_err();
    assert!(matches!(err, SpaceError::NoSpace { containers: 1, .. }), "{err}");
    assert_eq!(m.stats(), before);
    assert_eq!(m.allocate(3 * CONTAINER).unwrap().len(), 3);
}
