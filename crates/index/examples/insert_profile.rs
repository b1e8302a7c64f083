//! Times memtable inserts through [`Index::write`] in the shape of a file
//! system's create: a batch of three puts (the new name's entry under its
//! directory, the new object's onode, the directory's onode rewritten),
//! keys sharing a 16-byte prefix then an id or name. Flushes run on the
//! index's background threads; the writer's own CPU time is what is
//! reported: a target for `perf`.
//!
//! `cargo run --release -p larder-index --example insert_profile -- DIR [CREATES] [ROUNDS] [MEMTABLE_MB]`
//! prints creates/s (the writing thread's CPU time) for each round, each
//! into a fresh index in DIR (memtables of 64 MiB, the default, unless
//! MEMTABLE_MB says otherwise).

use std::sync::Arc;
use std::time::Instant;

use larder_index::{Index, Options, WriteBatch};
use larder_io::{RealStorage, StorageRef};

#[path = "support/thread_cpu.rs"]
mod thread_cpu;

use thread_cpu::cpu_secs;

/// A key of `map` (one byte), the tree `tree` (8 bytes), a record kind
/// (one byte), six bytes of padding, then `rest`: 16 bytes shared by every
/// key of one tree, as a store's keys are.
fn tree_key(map: u8, tree: u64, kind: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + rest.len());
    k.push(map);
    k.extend_from_slice(&tree.to_be_bytes());
    k.push(kind);
    k.extend_from_slice(&[0u8; 6]);
    k.extend_from_slice(rest);
    k
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir =
        std::path::PathBuf::from(args.get(1).ok_or("usage: insert_profile DIR [CREATES] [ROUNDS] [MEMTABLE_MB]")?);
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (creates, rounds, memtable_mb) = (arg(2, 300_000), arg(3, 1), arg(4, 64));
    let storage: StorageRef = Arc::new(RealStorage::new());
    let onode = [5u8; 96];
    let dirent = [9u8; 12];
    for round in 0..rounds {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        let options = Options { memtable_size_bytes: (memtable_mb as usize) << 20, ..Options::default() };
        let index = Index::open(storage.clone(), &dir, options)?;
        let directory = 2u64;
        let (cpu, wall) = (cpu_secs(), Instant::now());
        for i in 0..creates {
            let id = 1000 + i;
            let name = format!("file-{i:08}");
            let mut batch = WriteBatch::new();
            batch.put(tree_key(1, directory, 2, name.as_bytes()), dirent);
            batch.put(tree_key(1, id, 1, &[]), onode);
            batch.put(tree_key(1, directory, 1, &[]), onode);
            index.write(i + 1, &batch)?;
        }
        let (cpu, wall) = (cpu_secs() - cpu, wall.elapsed().as_secs_f64());
        println!(
            "round {round}: {creates} creates, {:.0} creates/s by CPU ({:.0} ns each), {:.0}/s by wall",
            creates as f64 / cpu,
            cpu * 1e9 / creates as f64,
            creates as f64 / wall
        );
        drop(index);
    }
    Ok(())
}
