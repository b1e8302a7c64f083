//! Rebuild: free space is derived from the extents in use. After random
//! allocations and frees, reopening with the live extents gives free space
//! equal to container space minus them, and `verify` agrees on both the
//! old and the reopened manager; `verify` reports space leaked or wrongly
//! free; malformed, out-of-range and overlapping extents are refused with
//! an error naming them.

#![allow(clippy::unwrap_used)]

mod common;

use common::{ext, open, small_options, CONTAINER};
use larder_io::SimStorage;
use larder_space::{Extent, SpaceError};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reopen_rebuilds_free_space(ops in prop::collection::vec((any::<bool>(), 1u64..400_000, any::<usize>()), 1..60)) {
        let sim = SimStorage::new(9);
        let m = open(&sim, small_options(), &[]).unwrap();
        let mut live: Vec<Extent> = Vec::new();
        for (lsn, (alloc, len, i)) in ops.into_iter().enumerate() {
            if alloc || live.is_empty() {
                match m.allocate(len) {
                    Ok(e) => live.extend(e),
                    Err(SpaceError::NoSpace { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            } else {
                let e = live.swap_remove(i % live.len());
                m.free(e, lsn as u64).unwrap();
            }
            if lsn % 3 == 0 {
                m.set_durable_lsn(lsn as u64);
            }
        }
        // Frees not yet durable are pending: verify accepts them either way.
        prop_assert!(m.verify(live.iter().copied()).unwrap().is_clean());
        let total = m.stats().bytes_total;
        let used: u64 = live.iter().map(|e| e.len).sum();
        drop(m);

        let again = open(&sim, small_options(), &live).unwrap();
        let s = again.stats();
        // Open may add a spare if the last one was used.
        prop_assert!(s.bytes_total == total || s.bytes_total == total + CONTAINER);
        let total = s.bytes_total;
        prop_assert_eq!(s.bytes_free + used, total);
        prop_assert_eq!(s.bytes_allocated, used);
        let report = again.verify(live.iter().copied()).unwrap();
        prop_assert!(report.is_clean());
        prop_assert_eq!(report.used_bytes, used);
        // The free extents are exactly the complement of the live ones.
        let mut all: Vec<Extent> = again.free_extents().into_iter().chain(live.iter().copied()).collect();
        all.sort();
        for w in all.windows(2) {
            prop_assert!(w[0].container != w[1].container || w[0].end() <= w[1].offset);
        }
        prop_assert_eq!(all.iter().map(|e| e.len).sum::<u64>(), total);
    }
}

#[test]
fn verify_reports_leaks_and_wrongly_free_space() {
    let sim = SimStorage::new(10);
    let m = open(&sim, small_options(), &[]).unwrap();
    let a = m.allocate(8192).unwrap()[0];
    let b = m.allocate(4096).unwrap()[0];
    // `b` forgotten by the caller: leaked. A free block claimed in use.
    let claimed = ext(0, 10, 2);
    let report = m.verify([a, claimed]).unwrap();
    assert_eq!(report.leaked, vec![b]);
    assert_eq!(report.free_but_used, vec![claimed]);
    assert!(!report.is_clean());
    // A pending free is fine whether or not the list still names it.
    m.free(b, 5).unwrap();
    assert!(m.verify([a]).unwrap().is_clean());
    assert!(m.verify([a, b]).unwrap().is_clean());
    assert_eq!(m.verify([a]).unwrap().pending_bytes, 4096);
}

#[test]
fn bad_extents_are_refused_by_name() {
    let sim = SimStorage::new(11);
    drop(open(&sim, small_options(), &[]).unwrap());
    let cases: Vec<(Vec<Extent>, &str)> = vec![
        (vec![ext(0, 0, 4), ext(0, 3, 2)], "overlap"),
        (vec![ext(0, 0, 1), Extent { container: 0, offset: 100, len: 4096 }], "offset is not a multiple"),
        (vec![Extent { container: 0, offset: 0, len: 100 }], "length is not a multiple"),
        (vec![Extent { container: 0, offset: 0, len: 0 }], "zero length"),
        (vec![ext(0, 250, 10)], "past the end"),
        (vec![ext(9, 0, 1)], "does not exist"),
    ];
    for (used, what) in cases {
        let err = open(&sim, small_options(), &used).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(what), "{msg}");
        assert!(msg.contains(&format!("{}", used.last().unwrap())), "{msg} does not name the extent");
        if what == "overlap" {
            assert!(
                matches!(err, SpaceError::Overlap { first, second } if first == used[0] && second == used[1]),
                "{msg}"
            );
        }
    }
    // Nothing was changed by the refusals.
    assert_eq!(sim.file_names().len(), 1);
    let m = open(&sim, small_options(), &[]).unwrap();
    assert_eq!(m.stats().bytes_free, CONTAINER);
    let err = m.verify([ext(0, 0, 4), ext(0, 2, 1)]).unwrap_err();
    assert!(matches!(err, SpaceError::Overlap { .. }), "{err}");
}
