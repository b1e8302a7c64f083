//! Times random point gets and prefix scans on an index built once and
//! reused, with no merge running during the reads: a target for `perf`
//! (the bench suite's reads follow its ingest while merges may still run).
//!
//! `cargo run --release -p larder-index --example read_profile -- DIR [N] [GETS] [SCANS] [PREFIX]`
//! builds an index of N random 16-byte keys with 100-byte values in DIR
//! (unless DIR holds one), then prints gets/s and scans/s; the scans take
//! random prefixes of PREFIX bytes (2: about 71 entries of the default N;
//! 3: about one, to time a scan's positioning alone).

use std::sync::Arc;
use std::time::Instant;

use larder_index::{Index, Options};
use larder_io::{RealStorage, StorageRef};

#[path = "support/c32_load.rs"]
mod c32_load;
#[path = "support/thread_cpu.rs"]
mod thread_cpu;

use c32_load::{key, mix64};
use thread_cpu::cpu_secs;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).ok_or("usage: read_profile DIR [N] [GETS] [SCANS] [PREFIX]")?);
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (n, gets, scans) = (arg(2, 4_628_198), arg(3, 1_000_000), arg(4, 20_000));
    let prefix_bytes = arg(5, 2).clamp(1, 8) as usize;
    let storage: StorageRef = Arc::new(RealStorage::new());
    let fresh = !dir.exists();
    let index = Index::open(storage.clone(), &dir, Options::default())?;
    if fresh {
        c32_load::load(&index, n)?;
    }
    index.close()?;
    let index = Index::open(storage, &dir, Options::default())?;
    println!("{}", index.stats());
    let (start, cpu) = (Instant::now(), cpu_secs());
    let mut found = 0u64;
    for q in 0..gets {
        found += u64::from(index.get(&key(mix64(q) % n))?.is_some());
    }
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_secs() - cpu);
    println!("gets {:.0}/s, {:.0}/s of CPU ({found} found)", gets as f64 / secs, gets as f64 / cpu);
    let (start, cpu) = (Instant::now(), cpu_secs());
    let (mut k, mut v, mut entries) = (Vec::new(), Vec::new(), 0u64);
    for q in 0..scans {
        let prefix = mix64(q ^ 0xabc).to_be_bytes();
        let mut scan = index.prefix(&prefix[..prefix_bytes], true)?;
        while scan.next_into(&mut k, &mut v)? {
            entries += 1;
        }
    }
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_secs() - cpu);
    println!(
        "scans {:.0}/s, {:.0}/s of CPU ({:.1} entries each)",
        scans as f64 / secs,
        scans as f64 / cpu,
        entries as f64 / scans as f64
    );
    index.close()?;
    Ok(())
}
