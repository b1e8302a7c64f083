//! The arena's space use under a random alloc/free workload with a steady
//! live set (the bar: file bytes at most 1.25x live bytes), and a
//! hand-run speed measurement.

use std::time::Instant;

use larder_heap::arena::{Arena, Block, GrowError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// An object that grows at its end, as a heap object does.
struct Object {
    size: u64,
    grows: u64,
}

impl Object {
    fn grow(&mut self, bytes: u64) -> Result<u64, GrowError> {
        let start = self.size;
        self.size += bytes;
        self.grows += 1;
        Ok(start)
    }
}

/// The arena after a sync: its first reservation durable (the records are
/// not kept; these tests reload from `all_records`).
fn synced(mut arena: Arena) -> Arena {
    arena.take_dirty_records();
    arena.records_durable();
    arena
}

/// Runs `ops` random operations over a live set of about `target` blocks
/// of 16 B - 4 KiB (reloading the arena from its records halfway), and returns the worst claimed/requested ratio seen
/// once the live set reached its target, and the arena.
fn steady_state(seed: u64, target: usize, ops: usize, verify_every: usize) -> (f64, Arena, Object) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut arena = synced(Arena::new());
    let mut object = Object { size: 4096, grows: 0 };
    let mut live: Vec<(Block, u64)> = Vec::with_capacity(target * 2);
    let mut requested = 0u64;
    let mut worst: f64 = 0.0;
    let mut grow = |n| object.grow(n);
    for op in 0..ops {
        // Fill to the target, then keep the live set steady (a coin flip
        // between alloc and free, pulled back towards the target).
        let alloc = live.len() < target / 2 || rng.gen_bool(if live.len() < target { 0.55 } else { 0.45 });
        if alloc || live.is_empty() {
            let size = rng.gen_range(16..=4096u64);
            let block = arena.alloc(size, 8, &mut grow).unwrap_or_else(|e| panic!("alloc {size}: {e}"));
            assert!(block.len >= size);
            requested += size;
            live.push((block, size));
        } else {
            let (block, size) = live.swap_remove(rng.gen_range(0..live.len()));
            arena.free(block.offset, block.generation).unwrap_or_else(|e| panic!("free {block:?}: {e}"));
            requested -= size;
        }
        if op > ops / 4 {
            worst = worst.max(arena.claimed_bytes() as f64 / requested as f64);
        }
        if op == ops / 2 {
            // Halfway, carry on with an arena loaded from the records.
            let records = arena.all_records();
            let loaded = Arena::load(records.iter().map(|(k, v)| (*k, &v[..]))).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(loaded.live(), arena.live());
            arena = synced(loaded);
        }
        if verify_every != 0 && op % verify_every == 0 {
            arena.verify().unwrap_or_else(|e| panic!("after op {op}: {e}"));
        }
    }
    assert_eq!(arena.live_blocks(), live.len() as u64);
    (worst, arena, object)
}

#[test]
fn claimed_bytes_stay_within_a_quarter_of_live_bytes() {
    for seed in 0..3 {
        let (worst, arena, object) = steady_state(seed, 20_000, 400_000, 50_000);
        arena.verify().unwrap_or_else(|e| panic!("{e}"));
        println!(
            "seed {seed}: worst claimed/requested {worst:.3}, final claimed {} live {}, {} grows",
            arena.claimed_bytes(),
            arena.live_bytes(),
            object.grows
        );
        assert!(worst <= 1.25, "seed {seed}: claimed reached {worst:.3}x the requested live bytes");
        assert_eq!(object.size - 4096, arena.claimed_bytes(), "every grown byte is claimed");
    }
}

/// Run by hand in release mode:
/// `cargo test --release -p larder-heap --test arena_fragmentation -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, run by hand in release mode"]
fn ten_million_random_alloc_free_ops() {
    let ops = 10_000_000;
    let mut rng = StdRng::seed_from_u64(7);
    let sizes: Vec<u64> = (0..ops).map(|_| rng.gen_range(16..=4096)).collect();
    let choices: Vec<u32> = (0..ops).map(|_| rng.gen()).collect();
    let mut arena = synced(Arena::new());
    let mut object = Object { size: 0, grows: 0 };
    let mut grow = |n| object.grow(n);
    let target = 100_000;
    let mut live: Vec<Block> = Vec::with_capacity(target * 2);
    let mut requested = 0u64;
    let mut live_sizes: Vec<u64> = Vec::with_capacity(target * 2);
    let started = Instant::now();
    let cpu_started = thread_cpu_nanos();
    for op in 0..ops {
        let choice = choices[op];
        if live.len() < target / 2 || (choice & 1 == 0 && live.len() < target * 2) || live.is_empty() {
            let block = arena.alloc(sizes[op], 8, &mut grow).unwrap_or_else(|e| panic!("{e}"));
            live.push(block);
            live_sizes.push(sizes[op]);
            requested += sizes[op];
        } else {
            let at = (choice >> 1) as usize % live.len();
            let block = live.swap_remove(at);
            requested -= live_sizes.swap_remove(at);
            arena.free(block.offset, block.generation).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let elapsed = started.elapsed();
    let cpu = thread_cpu_nanos().zip(cpu_started).map(|(end, start)| (end - start) as f64 / ops as f64);
    println!(
        "{ops} ops in {elapsed:?}: {:.1} ns/op ({} on the CPU); live {} blocks, {} requested bytes, {} claimed ({:.3}x), {} grows",
        elapsed.as_nanos() as f64 / ops as f64,
        cpu.map_or("unknown".to_string(), |ns| format!("{ns:.1} ns/op")),
        live.len(),
        requested,
        arena.claimed_bytes(),
        arena.claimed_bytes() as f64 / requested as f64,
        object.grows
    );
}

/// This thread's time on a CPU so far (Linux: /proc/thread-self/schedstat),
/// so the measurement is not inflated by waiting on a busy machine.
fn thread_cpu_nanos() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}
