//! Times the merges at rest of an index left as its load left it: a
//! target for `perf`, and the merge time per byte the bench suite's reads
//! wait on (its reads follow the load while these merges run).
//!
//! `cargo run --release -p larder-index --example merge_profile -- DIR [N] [ROUNDS]`
//! builds an index of N random 16-byte keys with 100-byte values in
//! DIR/base (unless it is there), with no merge at rest, then ROUNDS
//! times copies it to DIR/work and times `Index::merge_levels` there on
//! the calling thread: wall and CPU seconds, and the bytes each merge
//! wrote.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use larder_index::{Index, Options};
use larder_io::{RealStorage, StorageRef};

#[path = "support/c32_load.rs"]
mod c32_load;
#[path = "support/thread_cpu.rs"]
mod thread_cpu;

use thread_cpu::cpu_secs;

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).ok_or("usage: merge_profile DIR [N] [ROUNDS]")?);
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (n, rounds) = (arg(2, 4_628_198), arg(3, 3));
    let storage: StorageRef = Arc::new(RealStorage::new());
    let options = || Options { merge_at_rest: false, ..Options::default() };
    let base = dir.join("base");
    if !base.exists() {
        let index = Index::open(storage.clone(), &base, options())?;
        c32_load::load(&index, n)?;
        index.close()?;
    }
    for round in 0..rounds {
        let work = dir.join("work");
        if work.exists() {
            std::fs::remove_dir_all(&work)?;
        }
        copy_dir(&base, &work)?;
        let index = Index::open(storage.clone(), &work, options())?;
        let before = index.stats();
        let (wall, cpu) = (Instant::now(), cpu_secs());
        index.merge_levels()?;
        let (wall, cpu) = (wall.elapsed().as_secs_f64(), cpu_secs() - cpu);
        let after = index.stats();
        let bytes = after.bytes_compacted - before.bytes_compacted;
        println!(
            "round {round}: merged {bytes} bytes in {wall:.3} s wall, {cpu:.3} s CPU: {:.2} ns CPU per byte ({:.1} MB/s of CPU)",
            cpu * 1e9 / bytes as f64,
            bytes as f64 / cpu / 1e6
        );
        if round + 1 == rounds {
            println!("{after}");
        }
        index.close()?;
    }
    Ok(())
}
