//! Property test: random sequences of allocations, frees (whole and
//! partial, valid and invalid), durable-LSN moves, reader registrations and
//! drops, punches and spare creation, checked after every step against a
//! model of allocated blocks, pending frees and readers: the allocator's
//! invariants hold; allocations never overlap live or not-yet-releasable
//! space; a free is released exactly when its LSN is durable and no older
//! reader remains; punching never touches live data; NoSpace is returned
//! exactly when even `max_containers` could not hold the request, and
//! changes nothing; at the end all freed space is reusable.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{blocks, open, small_options, BLOCKS};
use larder_io::{read_exact_at, write_all_at, SimStorage};
use larder_space::{Extent, ReaderGuard, SpaceError, SpaceManager};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// Allocate this many bytes.
    Alloc(u64),
    /// Free live extent `i % live`, whole or (if `part`) its second half,
    /// at the current LSN minus `back`.
    Free {
        i: usize,
        part: bool,
        back: u64,
    },
    /// Free something that is not allocated: a pending extent again, or a
    /// free block.
    BadFree(usize),
    /// Make the LSN `back` below the current one durable.
    Durable(u64),
    /// Register a reader `back` below the current LSN.
    Register(u64),
    /// Drop reader `i % readers`.
    DropReader(usize),
    /// Advance the clock and punch.
    Punch(u64),
    EnsureSpares,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop_oneof![1u64..20_000, 1u64..300_000, 1u64..1_500_000].prop_map(Step::Alloc),
        5 => (any::<usize>(), any::<bool>(), 0u64..3).prop_map(|(i, part, back)| Step::Free { i, part, back }),
        1 => any::<usize>().prop_map(Step::BadFree),
        3 => (0u64..4).prop_map(Step::Durable),
        2 => (0u64..6).prop_map(Step::Register),
        2 => any::<usize>().prop_map(Step::DropReader),
        2 => (0u64..2000).prop_map(Step::Punch),
        1 => Just(Step::EnsureSpares),
    ]
}

/// What the space manager must show.
#[derive(Default)]
struct Model {
    /// Live extents and the stamp written into each of their blocks.
    live: Vec<(Extent, u64)>,
    pending: Vec<(u64, Extent)>,
    readers: Vec<(u64, ReaderGuard)>,
    lsn: u64,
    durable: u64,
    released: u64,
    stamps: u64,
}

impl Model {
    fn release(&mut self) {
        let bound = self.readers.iter().map(|r| r.0).min().map_or(self.durable, |r| r.min(self.durable));
        let released = &mut self.released;
        self.pending.retain(|&(lsn, _)| {
            if lsn <= bound {
                *released = (*released).max(lsn);
                false
            } else {
                true
            }
        });
    }

    fn busy(&self) -> HashSet<(u64, u64)> {
        self.live.iter().map(|l| &l.0).chain(self.pending.iter().map(|p| &p.1)).flat_map(blocks).collect()
    }

    fn live_blocks(&self) -> u64 {
        self.live.iter().map(|l| l.0.len / 4096).sum()
    }

    fn pending_blocks(&self) -> u64 {
        self.pending.iter().map(|p| p.1.len / 4096).sum()
    }
}

/// Writes `stamp` at the start of every block of `e`.
fn stamp(m: &SpaceManager, e: &Extent, stamp: u64) {
    let f = m.container_file(e.container).unwrap();
    for (_, b) in blocks(e) {
        write_all_at(&*f, &stamp.to_le_bytes(), b * 4096).unwrap();
    }
}

fn check_stamps(m: &SpaceManager, model: &Model) {
    for (e, s) in &model.live {
        let f = m.container_file(e.container).unwrap();
        for (_, b) in blocks(e) {
            let mut buf = [0u8; 8];
            read_exact_at(&*f, &mut buf, b * 4096).unwrap();
            assert_eq!(u64::from_le_bytes(buf), *s, "live block {b} of {e} lost its data");
        }
    }
}

fn run(steps: Vec<Step>) {
    let sim = SimStorage::new(7);
    let options = small_options();
    let max = options.max_containers;
    let m = open(&sim, options, &[]).unwrap();
    let mut model = Model::default();
    let t0 = Instant::now();
    let mut clock = Duration::ZERO;
    for step in steps {
        model.lsn += 1;
        let before = m.stats();
        match step {
            Step::Alloc(len) => {
                let n = len.div_ceil(4096);
                match m.allocate(len) {
                    Ok(extents) => {
                        assert_eq!(extents.iter().map(|e| e.len).sum::<u64>(), n * 4096);
                        let busy = model.busy();
                        let mut seen = HashSet::new();
                        for e in &extents {
                            e.check(1 << 20).unwrap();
                            for b in blocks(e) {
                                assert!(
                                    !busy.contains(&b),
                                    "{e} reuses block {b:?} that is live or not yet releasable"
                                );
                                assert!(seen.insert(b), "{e} overlaps another extent of the same allocation");
                            }
                            model.stamps += 1;
                            stamp(&m, e, model.stamps);
                            model.live.push((*e, model.stamps));
                        }
                        if n <= BLOCKS && before.bytes_free >= n * 4096 {
                            assert_eq!(m.stats().containers, before.containers, "created a container with space free");
                        }
                    }
                    Err(SpaceError::NoSpace { .. }) => {
                        let room = before.bytes_free / 4096 + (max - before.containers) * BLOCKS;
                        assert!(room < n, "NoSpace with room for {room} blocks of {n}");
                        assert_eq!(m.stats(), before, "a refused allocation changed the state");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            Step::Free { i, part, back } => {
                if model.live.is_empty() {
                    continue;
                }
                let i = i % model.live.len();
                let (e, s) = model.live[i];
                let lsn = model.lsn.saturating_sub(back);
                if part && e.len >= 8192 {
                    let half = e.len / 4096 / 2 * 4096;
                    let (keep, gone) =
                        (Extent { len: half, ..e }, Extent { offset: e.offset + half, len: e.len - half, ..e });
                    m.free(gone, lsn).unwrap();
                    model.live[i] = (keep, s);
                    model.pending.push((lsn, gone));
                } else {
                    m.free(e, lsn).unwrap();
                    model.live.swap_remove(i);
                    model.pending.push((lsn, e));
                }
            }
            Step::BadFree(i) => {
                let target = if !model.pending.is_empty() && i % 2 == 0 {
                    model.pending[i % model.pending.len()].1
                } else {
                    let busy = model.busy();
                    let ids = m.container_ids();
                    let Some(b) =
                        ids.iter().flat_map(|&c| (0..BLOCKS).map(move |b| (c, b))).find(|b| !busy.contains(b))
                    else {
                        continue;
                    };
                    common::ext(b.0, b.1, 1)
                };
                let err = m.free(target, model.lsn).unwrap_err();
                assert!(matches!(err, SpaceError::InvalidFree { .. }), "{err}");
                assert_eq!(m.stats(), before, "a refused free changed the state");
            }
            Step::Durable(back) => {
                let d = model.lsn.saturating_sub(back);
                m.set_durable_lsn(d);
                model.durable = model.durable.max(d);
            }
            Step::Register(back) => {
                let lsn = model.lsn.saturating_sub(back);
                match m.register_reader(lsn) {
                    Ok(g) => {
                        assert!(lsn >= model.released);
                        model.readers.push((lsn, g));
                    }
                    Err(SpaceError::ReaderTooOld { .. }) => assert!(lsn < model.released),
                    Err(e) => panic!("{e}"),
                }
            }
            Step::DropReader(i) => {
                if !model.readers.is_empty() {
                    let i = i % model.readers.len();
                    drop(model.readers.swap_remove(i));
                }
            }
            Step::Punch(ms) => {
                clock += Duration::from_millis(ms);
                let punched = m.punch_some(t0 + clock).unwrap();
                assert!(punched <= before.bytes_free);
                if punched > 0 {
                    assert!(before.bytes_free * 4 > before.bytes_total, "punched at or below the free threshold");
                }
            }
            Step::EnsureSpares => {
                m.ensure_spares().unwrap();
                let s = m.stats();
                assert!(s.spare_containers >= 1 || s.containers == max);
            }
        }
        model.release();
        m.check_invariants().unwrap();
        let s = m.stats();
        assert_eq!(s.bytes_allocated, model.live_blocks() * 4096);
        assert_eq!(s.bytes_pending_free, model.pending_blocks() * 4096, "pending frees differ from the model");
        assert_eq!(s.deferred_frees_pending, model.pending.len() as u64);
        assert_eq!(s.bytes_free + s.bytes_allocated + s.bytes_pending_free, s.bytes_total);
    }
    check_stamps(&m, &model);

    // Eventually reusable: once every free is durable and no reader is
    // left, free space is everything not live, and all of it can be had.
    model.readers.clear();
    m.set_durable_lsn(model.lsn);
    let s = m.stats();
    assert_eq!(s.bytes_pending_free, 0);
    assert_eq!(s.bytes_free, s.bytes_total - model.live_blocks() * 4096);
    assert!(m.verify(model.live.iter().map(|l| l.0)).unwrap().is_clean());
    if s.bytes_free > 0 {
        m.allocate(s.bytes_free).unwrap();
        assert_eq!(m.stats().containers, s.containers, "reusing free space created a container");
        assert_eq!(m.stats().bytes_free, 0);
    }
    check_stamps(&m, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn allocator_matches_model(steps in prop::collection::vec(step(), 1..80)) {
        run(steps);
    }
}
