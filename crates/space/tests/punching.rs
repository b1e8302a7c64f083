//! Hole punching: only while free space exceeds the threshold; adjacent
//! frees coalesce into one punch call; the rate limit holds against a fake
//! clock; punched ranges read as zeros; allocation prefers space never
//! punched, and punched space once allocated is no longer counted punched.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{open, small_options, BLOCKS};
use larder_io::sim::{SimFault, SimOp};
use larder_io::{read_exact_at, write_all_at, SimStorage};
use larder_space::{Extent, Options, SpaceManager};

/// One container, no spares, so the free share is easy to reason about.
fn one_container() -> Options {
    Options { spare_containers: 0, max_containers: 1, ..small_options() }
}

/// Allocates `n` single-block extents, each filled with 0xAB.
fn fill(m: &SpaceManager, n: u64) -> Vec<Extent> {
    (0..n)
        .map(|_| {
            let e = m.allocate(4096).unwrap()[0];
            write_all_at(&*m.container_file(e.container).unwrap(), &[0xAB; 4096], e.offset).unwrap();
            e
        })
        .collect()
}

#[test]
fn adjacent_frees_are_punched_in_one_call_and_read_zeros() {
    let sim = SimStorage::new(1);
    let m = open(&sim, one_container(), &[]).unwrap();
    let extents = fill(&m, 200);
    for e in &extents[..100] {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    let before = sim.counters().punch_holes;
    let t0 = Instant::now();
    // 56 + 100 free of 256: above 25%.
    assert_eq!(m.punch_some(t0).unwrap(), 100 * 4096);
    assert_eq!(sim.counters().punch_holes - before, 1, "100 adjacent frees punched as one range");
    assert_eq!(m.punch_some(t0).unwrap(), 0, "nothing left to punch");
    let f = m.container_file(0).unwrap();
    let mut buf = vec![0xFF; 100 * 4096];
    read_exact_at(&*f, &mut buf, extents[0].offset).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "punched range does not read zeros");
    read_exact_at(&*f, &mut buf[..4096], extents[100].offset).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 0xAB), "live data was punched");
    let s = m.stats();
    assert_eq!((s.punches, s.bytes_punched, s.bytes_punched_now), (1, 100 * 4096, 100 * 4096));
}

#[test]
fn no_punching_at_or_below_the_threshold() {
    let sim = SimStorage::new(2);
    let m = open(&sim, one_container(), &[]).unwrap();
    let extents = fill(&m, BLOCKS);
    // 64 of 256 blocks free is exactly 25%: not above the threshold.
    for e in &extents[..64] {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    let t0 = Instant::now();
    assert_eq!(m.punch_some(t0).unwrap(), 0);
    assert_eq!(sim.counters().punch_holes, 0);
    m.free(extents[64], 2).unwrap();
    m.set_durable_lsn(2);
    assert_eq!(m.punch_some(t0).unwrap(), 65 * 4096);
}

#[test]
fn frees_are_punched_only_once_released() {
    let sim = SimStorage::new(3);
    let m = open(&sim, one_container(), &[]).unwrap();
    let extents = fill(&m, 10);
    let reader = m.register_reader(0).unwrap();
    for e in &extents {
        m.free(*e, 1).unwrap();
    }
    let t0 = Instant::now();
    assert_eq!(m.punch_some(t0).unwrap(), 0, "not durable yet");
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(t0).unwrap(), 0, "an older reader remains");
    drop(reader);
    assert_eq!(m.punch_some(t0).unwrap(), 10 * 4096);
}

#[test]
fn punching_is_rate_limited_and_coalesced_above_the_minimum() {
    let sim = SimStorage::new(4);
    let options = Options { punch_bytes_per_sec: 64 << 10, punch_min_bytes: 16 << 10, ..one_container() };
    let m = open(&sim, options, &[]).unwrap();
    let extents = fill(&m, 200);
    // Three 4 KiB holes stay below the 16 KiB minimum; 100 blocks do not.
    for i in [150, 160, 170] {
        m.free(extents[i], 1).unwrap();
    }
    for e in &extents[..100] {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    let t0 = Instant::now();
    // The bucket starts with one second's worth: 64 KiB.
    assert_eq!(m.punch_some(t0).unwrap(), 64 << 10);
    assert_eq!(m.punch_some(t0).unwrap(), 0);
    assert_eq!(m.punch_some(t0 + Duration::from_millis(125)).unwrap(), 0, "8 KiB earned is below the minimum");
    assert_eq!(m.punch_some(t0 + Duration::from_millis(250)).unwrap(), 16 << 10);
    let mut now = t0 + Duration::from_millis(250);
    let mut total = (64 << 10) + (16 << 10);
    while total < 100 * 4096 {
        now += Duration::from_secs(1);
        let n = m.punch_some(now).unwrap();
        assert!(n > 0 && n <= 64 << 10, "{n}");
        total += n;
    }
    assert_eq!(total, 100 * 4096);
    now += Duration::from_secs(10);
    assert_eq!(m.punch_some(now).unwrap(), 0, "single-block holes are never punched alone");
    assert_eq!(m.stats().bytes_punched, 100 * 4096);
}

#[test]
fn allocation_prefers_unpunched_space() {
    let sim = SimStorage::new(5);
    let m = open(&sim, one_container(), &[]).unwrap();
    let extents = fill(&m, 64);
    for e in &extents {
        m.free(*e, 1).unwrap();
    }
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(Instant::now()).unwrap(), 64 * 4096);
    // Blocks 0..64 are punched, 64..256 never were: all of it is one free
    // 256-block chunk, and allocations go around the holes.
    assert_eq!(m.free_extents(), vec![common::ext(0, 0, BLOCKS)]);
    let a = m.allocate(4096).unwrap();
    assert_eq!(a, vec![common::ext(0, 64, 1)]);
    let b = m.allocate(64 * 4096).unwrap();
    assert_eq!(b, vec![common::ext(0, 128, 64)]);
    // When only punched space is left, it is used, and stops counting as punched.
    let rest = m.allocate(m.stats().bytes_free).unwrap();
    assert!(rest.iter().any(|e| e.offset == 0), "{rest:?}");
    assert_eq!(m.stats().bytes_punched_now, 0);
}

/// One container filled block by block, then the two-block chunks at
/// blocks `4i, 4i + 1` for `i < punched` freed and punched (whatever the
/// free share).
fn punched_pairs(seed: u64, punched: usize) -> (SpaceManager, Vec<Extent>) {
    let sim = SimStorage::new(seed);
    let m = open(&sim, Options { punch_free_threshold: 0.0, ..one_container() }, &[]).unwrap();
    let extents = fill(&m, BLOCKS);
    for i in 0..punched {
        m.free(extents[4 * i], 1).unwrap();
        m.free(extents[4 * i + 1], 1).unwrap();
    }
    m.set_durable_lsn(1);
    assert_eq!(m.punch_some(Instant::now()).unwrap(), 2 * punched as u64 * 4096);
    (m, extents)
}

/// Avoiding punched space is bounded: when more punched free chunks come
/// before the first unpunched one than the allocator checks (32), it takes
/// punched space rather than scan on, so an allocation never costs time
/// in the number of free chunks.
#[test]
fn the_search_for_unpunched_space_is_bounded() {
    // 48 punched chunks, then unpunched two-block chunks further on.
    let (m, extents) = punched_pairs(6, 48);
    for i in 48..64 {
        m.free(extents[4 * i + 2], 2).unwrap();
        m.free(extents[4 * i + 3], 2).unwrap();
    }
    m.set_durable_lsn(2);
    let a = m.allocate(2 * 4096).unwrap();
    assert_eq!(a.len(), 1);
    assert!(a[0].offset < 192 * 4096, "searched past the budget: {a:?}");
    // Fewer punched chunks than the budget: the unpunched one is found.
    let (m, extents) = punched_pairs(7, 20);
    m.free(extents[4 * 50 + 2], 2).unwrap();
    m.free(extents[4 * 50 + 3], 2).unwrap();
    m.set_durable_lsn(2);
    let a = m.allocate(2 * 4096).unwrap();
    assert_eq!(a, vec![common::ext(0, 4 * 50 + 2, 2)]);
}

#[test]
fn a_failed_or_partial_punch_leaves_its_range_possibly_punched() {
    for fault in [SimFault::Eio, SimFault::ShortWrite] {
        let sim = SimStorage::new(9);
        let m = open(&sim, one_container(), &[]).unwrap();
        let extents = fill(&m, 200);
        for e in &extents[..100] {
            m.free(*e, 1).unwrap();
        }
        m.set_durable_lsn(1);
        sim.fail_path(common::container_path(0), SimOp::PunchHole, fault);
        assert!(m.punch_some(Instant::now()).is_err(), "{fault:?}: the punch did not fail");
        if fault == SimFault::ShortWrite {
            let holes = m.container_file(0).unwrap().holes().unwrap().unwrap();
            assert!(!holes.is_empty(), "the partial punch freed nothing: the test shows nothing");
        }
        // Take back every free block: the failed range among them.
        let again = m.allocate(156 * 4096).unwrap();
        let failed = Extent { container: 0, offset: extents[0].offset, len: 100 * 4096 };
        let reused: Vec<&Extent> =
            again.iter().filter(|e| e.container == 0 && e.offset < failed.end() && failed.offset < e.end()).collect();
        assert!(!reused.is_empty(), "{fault:?}: the failed range was not reallocated: {again:?}");
        for e in reused {
            assert!(!m.is_written(*e), "{fault:?}: {e} lies where a punch failed, yet is taken as written");
        }
        for e in &extents[100..] {
            assert!(m.is_written(*e), "{fault:?}: live data outside the punch lost its written state");
        }
        m.check_invariants().unwrap();
    }
}
