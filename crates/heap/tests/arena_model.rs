//! The arena against a simple model (a map of live blocks and the list of
//! every block ever freed), with reloads from the records the arena hands
//! out between steps.

use std::collections::{BTreeMap, HashSet};

use larder_heap::arena::{Arena, ArenaError, Block, GrowError, MAX_ALIGN, PAGE_BYTES};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// `align` is `1 << align_shift`; 13 is above the limit.
    Alloc { size: u64, align_shift: u32 },
    /// Frees the `pick`-th live block.
    Free { pick: usize },
    /// Frees a block freed before (possibly reused since): stale.
    FreeAgain { pick: usize },
    /// Frees a live block with a wrong generation or not at its start.
    FreeWrong { pick: usize, generation_delta: u64, offset_delta: u64 },
    /// Checks a range at `at` (a fraction of the block, in 1/256) of `len`.
    Check { pick: usize, at: u64, len: u64 },
    /// Checks a block freed before: stale.
    CheckFreed { pick: usize },
    /// The owner grows the object's user bytes, so the next claim is not
    /// adjacent to the previous ones.
    UserGrow { bytes: u64 },
    /// An alloc whose grow callback fails, or returns a bad offset.
    AllocGrowFails { size: u64, misaligned: bool },
    /// Persists the dirty records and reloads the arena from all of them.
    Reload,
    /// Reloads the arena from the records of the last sync, as after a
    /// crash: later allocations are lost (and their generations must never
    /// come back), later frees undone.
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1..=4096u64, 0..=4u32).prop_map(|(size, align_shift)| Op::Alloc { size, align_shift }),
        2 => (1..=8192u64, 0..=13u32).prop_map(|(size, align_shift)| Op::Alloc { size, align_shift }),
        1 => (4097..=40_000u64).prop_map(|size| Op::Alloc { size, align_shift: 3 }),
        7 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => any::<usize>().prop_map(|pick| Op::FreeAgain { pick }),
        1 => (any::<usize>(), 0..3u64, 0..3u64).prop_map(|(pick, generation_delta, offset_delta)| Op::FreeWrong {
            pick,
            generation_delta,
            offset_delta
        }),
        2 => (any::<usize>(), 0..300u64, 0..5000u64).prop_map(|(pick, at, len)| Op::Check { pick, at, len }),
        1 => any::<usize>().prop_map(|pick| Op::CheckFreed { pick }),
        1 => (1..20_000u64).prop_map(|bytes| Op::UserGrow { bytes }),
        1 => (1..=20_000u64, any::<bool>()).prop_map(|(size, misaligned)| Op::AllocGrowFails { size, misaligned }),
        1 => Just(Op::Reload),
        1 => Just(Op::Crash),
    ]
}

struct Harness {
    arena: Arena,
    /// The object's size; the arena's claims start at its next page.
    object_size: u64,
    live: BTreeMap<u64, Block>,
    freed: Vec<Block>,
    /// Every (offset, generation) ever handed out.
    issued: HashSet<(u64, u64)>,
    /// What the owner persisted from `take_dirty_records`.
    records: BTreeMap<u64, Vec<u8>>,
    /// The live blocks as of the last sync.
    synced_live: BTreeMap<u64, Block>,
}

fn stale(result: &Result<Block, ArenaError>) -> bool {
    matches!(result, Err(ArenaError::Stale { .. }))
}

impl Harness {
    fn new() -> Harness {
        Harness {
            arena: Arena::new(),
            object_size: 100,
            live: BTreeMap::new(),
            freed: Vec::new(),
            issued: HashSet::new(),
            records: BTreeMap::new(),
            synced_live: BTreeMap::new(),
        }
    }

    /// Persists the dirty records durably, as the heap's `sync` does.
    fn sync(&mut self) {
        for (key, bytes) in self.arena.take_dirty_records() {
            match bytes {
                Some(bytes) => self.records.insert(key, bytes),
                None => self.records.remove(&key),
            };
        }
        self.arena.records_durable();
        self.synced_live = self.live.clone();
    }

    /// `arena.alloc`, syncing and retrying once if the arena needs it.
    fn alloc_or_sync(
        &mut self,
        size: u64,
        align: u64,
        grow: &mut dyn FnMut(u64) -> Result<u64, GrowError>,
    ) -> Result<Block, ArenaError> {
        match self.arena.alloc(size, align, grow) {
            Err(ArenaError::NeedsSync) => {
                self.sync();
                self.arena.alloc(size, align, grow)
            }
            other => other,
        }
    }

    fn pick_live(&self, pick: usize) -> Option<Block> {
        (!self.live.is_empty())
            .then(|| *self.live.values().nth(pick % self.live.len()).unwrap_or_else(|| unreachable!()))
    }

    fn alloc(&mut self, size: u64, align: u64) {
        let before = self.arena.claimed_bytes();
        let mut object_size = self.object_size;
        let result = self.alloc_or_sync(size, align, &mut |n: u64| -> Result<u64, GrowError> {
            assert!(n.is_multiple_of(PAGE_BYTES) && n >= size.min(4096));
            let start = object_size.next_multiple_of(PAGE_BYTES);
            object_size = start + n;
            Ok(start)
        });
        self.object_size = object_size;
        if align > MAX_ALIGN || !align.is_power_of_two() {
            assert!(matches!(result, Err(ArenaError::BadAlignment { .. })), "{result:?}");
            assert_eq!(self.arena.claimed_bytes(), before);
            return;
        }
        let block = result.unwrap_or_else(|e| panic!("alloc({size}, {align}): {e}"));
        assert!(block.len >= size && block.offset.is_multiple_of(align.max(16)), "{block:?} for {size}/{align}");
        assert!(block.generation != 0);
        assert!(self
            .arena
            .claimed_ranges()
            .iter()
            .any(|&(s, l)| s <= block.offset && block.offset + block.len <= s + l));
        if let Some((_, below)) = self.live.range(..block.offset).next_back() {
            assert!(below.offset + below.len <= block.offset, "{block:?} overlaps {below:?}");
        }
        if let Some((_, above)) = self.live.range(block.offset..).next() {
            assert!(block.offset + block.len <= above.offset, "{block:?} overlaps {above:?}");
        }
        assert!(self.issued.insert((block.offset, block.generation)), "{block:?} was issued before");
        self.live.insert(block.offset, block);
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Alloc { size, align_shift } => self.alloc(size, 1 << align_shift),
            Op::Free { pick } => {
                if let Some(block) = self.pick_live(pick) {
                    let freed = self.arena.free(block.offset, block.generation).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(freed, block);
                    self.live.remove(&block.offset);
                    self.freed.push(block);
                }
            }
            Op::FreeAgain { pick } => {
                if !self.freed.is_empty() {
                    let block = self.freed[pick % self.freed.len()];
                    assert!(stale(&self.arena.free(block.offset, block.generation)), "freed {block:?} again");
                }
            }
            Op::FreeWrong { pick, generation_delta, offset_delta } => {
                if let Some(block) = self.pick_live(pick) {
                    if generation_delta + offset_delta != 0 {
                        let offset = block.offset + offset_delta.min(block.len - 1);
                        let result = self.arena.free(offset, block.generation.wrapping_add(generation_delta));
                        assert!(stale(&result), "wrong free of {block:?} at {offset}: {result:?}");
                    }
                }
            }
            Op::Check { pick, at, len } => {
                if let Some(block) = self.pick_live(pick) {
                    let offset = block.offset + block.len * at / 256;
                    let result = self.arena.check(offset, len, block.generation);
                    if offset < block.offset + block.len && offset + len <= block.offset + block.len {
                        assert_eq!(result.unwrap_or_else(|e| panic!("check of {block:?}: {e}")), block);
                    } else {
                        assert!(stale(&result), "check {offset}+{len} outside {block:?}: {result:?}");
                    }
                    assert!(stale(&self.arena.check(block.offset, 1, block.generation + 1)));
                }
            }
            Op::CheckFreed { pick } => {
                if !self.freed.is_empty() {
                    let block = self.freed[pick % self.freed.len()];
                    assert!(stale(&self.arena.check(block.offset, 1, block.generation)), "freed {block:?} checks");
                    assert!(stale(&self.arena.check(block.offset, 0, block.generation)));
                }
            }
            Op::UserGrow { bytes } => self.object_size += bytes,
            Op::AllocGrowFails { size, misaligned } => self.alloc_grow_fails(size, misaligned),
            Op::Reload => self.reload(),
            Op::Crash => self.crash(),
        }
    }

    fn alloc_grow_fails(&mut self, size: u64, misaligned: bool) {
        let (claimed, live_blocks, ranges) =
            (self.arena.claimed_bytes(), self.arena.live_blocks(), self.arena.claimed_ranges().to_vec());
        let object_size = self.object_size;
        let result = self.alloc_or_sync(size, 16, &mut |n: u64| -> Result<u64, GrowError> {
            if misaligned {
                Ok(object_size.next_multiple_of(PAGE_BYTES) + 512)
            } else {
                Err(format!("no room for {n} bytes").into())
            }
        });
        match result {
            Ok(block) => {
                assert_eq!(self.arena.claimed_bytes(), claimed, "grew without the callback");
                assert!(self.issued.insert((block.offset, block.generation)));
                self.live.insert(block.offset, block);
            }
            Err(e) => {
                assert!(
                    matches!((&e, misaligned), (ArenaError::Grow(_), false) | (ArenaError::BadGrow { .. }, true)),
                    "{e:?}"
                );
                assert_eq!(
                    (self.arena.claimed_bytes(), self.arena.live_blocks(), self.arena.claimed_ranges()),
                    (claimed, live_blocks, &ranges[..])
                );
            }
        }
    }

    fn reload(&mut self) {
        self.sync();
        assert!(self.arena.take_dirty_records().is_empty(), "records stay dirty after they were taken");
        let all: BTreeMap<u64, Vec<u8>> = self.arena.all_records().into_iter().collect();
        assert_eq!(all, self.records, "the persisted records differ from the arena's");
        let loaded = self.load();
        assert_eq!(loaded.live(), self.arena.live());
        assert_eq!(loaded.claimed_ranges(), self.arena.claimed_ranges());
        assert_eq!(loaded.free_run_bytes(), self.arena.free_run_bytes());
        assert_eq!(loaded.next_generation(), self.arena.reserved_generation());
        let reloaded: BTreeMap<u64, Vec<u8>> = loaded.all_records().into_iter().collect();
        assert_eq!(reloaded, self.records, "a loaded arena re-encodes differently");
        self.arena = loaded;
    }

    fn load(&self) -> Arena {
        Arena::load(self.records.iter().map(|(&k, v)| (k, &v[..]))).unwrap_or_else(|e| panic!("load: {e}"))
    }

    fn crash(&mut self) {
        self.arena = self.load();
        // Allocations since the last sync are gone: their pointers are
        // stale from now on. Frees since then are undone: those blocks live
        // again (generations are unique, so a block is its (offset, generation)).
        let lost: Vec<Block> =
            self.live.values().filter(|b| self.synced_live.get(&b.offset) != Some(b)).copied().collect();
        self.freed.retain(|b| self.synced_live.get(&b.offset) != Some(b));
        self.freed.extend(lost);
        self.live = self.synced_live.clone();
    }

    fn check_invariants(&self) {
        self.arena.verify().unwrap_or_else(|e| panic!("{e}"));
        let live: Vec<Block> = self.live.values().copied().collect();
        assert_eq!(self.arena.live(), live);
        assert_eq!(self.arena.live_blocks(), live.len() as u64);
        assert_eq!(self.arena.live_bytes(), live.iter().map(|b| b.len).sum::<u64>());
        for block in &self.freed {
            if self.live.get(&block.offset).is_some_and(|b| b.generation == block.generation) {
                panic!("freed {block:?} is live again with the same generation");
            }
        }
        for block in self.freed.iter().rev().take(40) {
            assert!(stale(&self.arena.check(block.offset, 1, block.generation)));
        }
        for &(start, len) in self.arena.claimed_ranges() {
            assert!(self.arena.is_claimed(start, 1) && self.arena.is_claimed(start + len - 1, 1));
            assert!(self.arena.is_claimed(start.saturating_sub(10), 20));
            assert!(start == 0 || !self.arena.is_claimed(start - 1, 1) || self.arena.is_claimed(start - 1, 0));
            assert!(
                !self.arena.is_claimed(start + len, 1)
                    || self.arena.claimed_ranges().iter().any(|&(s, _)| s == start + len)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arena_matches_the_model(ops in proptest::collection::vec(op(), 1..400)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op);
            harness.check_invariants();
        }
        harness.reload();
        harness.check_invariants();
        // Freeing everything leaves at most the one spare empty span.
        for block in harness.live.values().copied().collect::<Vec<_>>() {
            harness.arena.free(block.offset, block.generation).unwrap_or_else(|e| panic!("{e}"));
        }
        prop_assert_eq!(harness.arena.live_blocks(), 0);
        prop_assert!(harness.arena.free_run_bytes() + 65_536 >= harness.arena.claimed_bytes());
    }
}

/// Many allocations and frees of one size at one place: every reuse of an
/// offset gets a new generation, across span dissolution and reuse of the
/// pages by another class and by large blocks.
#[test]
fn reused_offsets_never_repeat_a_generation() {
    let mut harness = Harness::new();
    for round in 0..200u64 {
        let size = [16, 48, 4096, 5000, 700][round as usize % 5];
        for _ in 0..(1 + round % 7) {
            harness.alloc(size, 16);
        }
        while !harness.live.is_empty() {
            harness.step(&Op::Free { pick: round as usize });
        }
        if round % 10 == 0 {
            harness.reload();
        }
        harness.check_invariants();
    }
    assert!(harness.issued.len() > 500);
    // The same offsets were handed out again and again (by spans of other
    // classes and by large blocks), each time with a new generation.
    let mut uses: BTreeMap<u64, usize> = BTreeMap::new();
    for &(offset, _) in &harness.issued {
        *uses.entry(offset).or_default() += 1;
    }
    assert!(uses.values().filter(|&&n| n >= 10).count() >= 3, "offsets were rarely reused: {uses:?}");
}
