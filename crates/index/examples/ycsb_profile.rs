//! YCSB E's reads on Larder's index, outside the bench: loads `N` records
//! of 1 KiB under YCSB's hashed keys in batches of 1,000 (as `larder-bench
//! ycsb` does), then times rounds of scans of 1-100 entries from random
//! loaded keys and of point gets, by the reading thread's CPU time, with
//! the runs and memtables each round saw (merges of the load go on
//! meanwhile, as in the bench): a target for `perf`.
//!
//! `cargo run --release -p larder-index --example ycsb_profile -- DIR [N] [ROUNDS] [SCANS] [GETS] [COMPACT] [REWRITES] [ORDERED]`
//! (COMPACT 1: merge everything into one run before the reads, the floor
//! of a scan's cost with one source; 2: then rewrite REWRITES random
//! records, default 55,000, into the memtable: one run and a memtable.
//! ORDERED 1: keys in the order of the records' numbers, as YCSB's
//! `insertorder=ordered` with zero padding, so each flush holds a key
//! range of its own: a scan reaches few of the runs).

use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use larder_index::{Index, Options, WriteBatch};
use larder_io::{RealStorage, StorageRef};

#[path = "support/thread_cpu.rs"]
mod thread_cpu;

use thread_cpu::cpu_secs;

/// YCSB's key of record `n`: "user" and the FNV-64 hash of its number.
fn key_name(n: u64) -> String {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    let mut v = n;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(1_099_511_628_211);
        v >>= 8;
    }
    format!("user{hash}")
}

fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir =
        std::path::PathBuf::from(args.get(1).ok_or("usage: ycsb_profile DIR [N] [ROUNDS] [SCANS] [GETS] [COMPACT]")?);
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (n, rounds, scans, gets) = (arg(2, 1_000_000), arg(3, 8), arg(4, 2_000), arg(5, 50_000));
    let storage: StorageRef = Arc::new(RealStorage::new());
    let options = Options { compaction_threads: 1, ..Options::default() };
    let index = Index::open(storage, &dir, options)?;
    let ordered = arg(8, 0) == 1;
    let key_name = |n: u64| if ordered { format!("user{n:019}") } else { key_name(n) };
    let value: Vec<u8> = (0..1024u32).map(|i| mix64(u64::from(i)) as u8).collect();
    let start = Instant::now();
    for (seq, first) in (0..n).step_by(1000).enumerate() {
        let mut batch = WriteBatch::new();
        for i in first..(first + 1000).min(n) {
            batch.put(key_name(i), &value);
        }
        index.write(seq as u64 + 1, &batch)?;
    }
    println!("load {:.2} s", start.elapsed().as_secs_f64());
    if arg(6, 0) >= 1 {
        let start = Instant::now();
        index.compact_all()?;
        println!("compacted into one run in {:.2} s", start.elapsed().as_secs_f64());
    }
    if arg(6, 0) == 2 {
        // Rewrites of loaded records into the now empty memtable: one run
        // and a memtable, the state of an index whose merges are done.
        let rewrites = arg(7, 55_000);
        for (seq, first) in (0..rewrites).step_by(1000).enumerate() {
            let mut batch = WriteBatch::new();
            for i in first..(first + 1000).min(rewrites) {
                batch.put(key_name(mix64(i) % n), &value);
            }
            index.write(1_000_000 + seq as u64, &batch)?;
        }
    }
    let (mut out, mut q) = (Vec::new(), 0u64);
    for round in 0..rounds {
        let stats = index.stats();
        let (wall, cpu) = (Instant::now(), cpu_secs());
        let mut entries = 0u64;
        for _ in 0..scans {
            q += 1;
            let start = key_name(mix64(q) % n);
            let len = (mix64(q ^ 0x77) % 100 + 1) as usize;
            for entry in index.range(Bound::Included(start.as_bytes()), Bound::Unbounded, true)?.take(len) {
                let (_, v) = entry?;
                out.clear();
                out.extend_from_slice(&v);
                entries += 1;
            }
        }
        let (scan_wall, scan_cpu) = (wall.elapsed().as_secs_f64(), cpu_secs() - cpu);
        let (wall, cpu) = (Instant::now(), cpu_secs());
        for _ in 0..gets {
            q += 1;
            let found = index.get(key_name(mix64(q) % n).as_bytes())?;
            std::hint::black_box(found);
        }
        let (get_wall, get_cpu) = (wall.elapsed().as_secs_f64(), cpu_secs() - cpu);
        println!(
            "round {round}: runs {:?}, memtables {} MiB: scan {:.2} us CPU ({:.2} wall, {:.1} entries), get {:.3} us CPU ({:.3} wall)",
            stats.runs_per_level,
            stats.memtable_bytes >> 20,
            scan_cpu * 1e6 / scans as f64,
            scan_wall * 1e6 / scans as f64,
            entries as f64 / scans as f64,
            get_cpu * 1e6 / gets as f64,
            get_wall * 1e6 / gets as f64
        );
    }
    index.close()?;
    Ok(())
}
