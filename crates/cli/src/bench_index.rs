//! `larder bench index`: the main job for now. Loads N random 16-byte keys
//! with 100-byte values into an index store, flushes, then runs point gets
//! (hits, misses) and prefix scans, printing rates and the index counters.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use larder_index::{Index, Options, WriteBatch};
use larder_io::{CheckedStorage, RealStorage, StorageRef};

/// Options of `larder bench index`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Store directory (created; an existing index there is reused only with --keep).
    #[arg(long, default_value_os_t = crate::default_dir())]
    dir: PathBuf,
    /// Entries to load.
    #[arg(long, default_value_t = 2_000_000)]
    n: u64,
    /// Value size in bytes (keys are 16 bytes).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Puts per batch.
    #[arg(long, default_value_t = 1000)]
    batch: u64,
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 64)]
    memtable_mb: usize,
    /// Block cache size in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mb: usize,
    /// Point gets to run (each of hits and misses).
    #[arg(long, default_value_t = 500_000)]
    gets: u64,
    /// Prefix scans to run.
    #[arg(long, default_value_t = 10_000)]
    scans: u64,
    /// Keep the store afterwards (default: remove it).
    #[arg(long)]
    keep: bool,
    /// Query a store kept by an earlier `--keep` run with the same --n
    /// instead of loading (implies --keep).
    #[arg(long)]
    reuse: bool,
    /// Merge every run into one before querying (timed and reported).
    #[arg(long)]
    compact: bool,
}

/// A 64-bit mixer (splitmix64): the i-th key is the same in every run.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(i: u64, salt: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix(i ^ salt).to_be_bytes());
    k[8..].copy_from_slice(&mix(i.wrapping_add(salt).wrapping_add(1)).to_be_bytes());
    k
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_message(what.to_string());
    pb
}

fn rate(n: u64, secs: f64) -> String {
    format!("{:.0} ops/s", n as f64 / secs.max(1e-9))
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let index_dir = args.dir.join("index");
    let keep = args.keep || args.reuse;
    if !keep && args.dir.exists() {
        std::fs::remove_dir_all(&args.dir)
            .with_context(|| format!("removing the old store at {}", args.dir.display()))?;
    }
    // Through a poison latch, as a store's index is: the first failed sync
    // stops every later write.
    let storage: StorageRef = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
    let options = Options {
        memtable_size_bytes: args.memtable_mb << 20,
        block_cache_bytes: args.cache_mb << 20,
        ..Options::default()
    };
    let index = Index::open(storage, &index_dir, options.clone())
        .with_context(|| format!("opening the index at {}", index_dir.display()))?;
    println!(
        "larder bench index: {} entries of 16-byte keys and {}-byte values in {}",
        args.n,
        args.value_bytes,
        index_dir.display()
    );
    println!(
        "options: memtable {} MiB, block cache {} MiB, bloom {} bits/key, fanout {}",
        args.memtable_mb, args.cache_mb, options.bloom_bits_per_key, options.merge_fanout
    );

    if args.reuse {
        anyhow::ensure!(index.last_seq() > 0, "--reuse: no store at {}; run once with --keep", index_dir.display());
        println!("load:       skipped (--reuse)");
    } else {
        load(&index, args)?;
    }
    if args.compact {
        let start = Instant::now();
        index.compact_all().context("merging every run")?;
        println!("compact:    all runs merged into one in {:.2} s", start.elapsed().as_secs_f64());
    }
    query(&index, args)?;
    println!("\ncounters:\n{}", index.stats());
    index.close().context("closing the index")?;
    if !keep {
        std::fs::remove_dir_all(&args.dir).with_context(|| format!("removing {}", args.dir.display()))?;
    }
    Ok(())
}

fn load(index: &Index, args: &Args) -> Result<()> {
    let value = vec![0x5a_u8; args.value_bytes];
    let pb = bar(args.n, "load");
    let start = Instant::now();
    let mut seq = index.last_seq();
    let mut i = 0;
    while i < args.n {
        let mut b = WriteBatch::new();
        let end = (i + args.batch.max(1)).min(args.n);
        for j in i..end {
            b.put(key(j, 0), &value);
        }
        seq += 1;
        index.write(seq, &b).with_context(|| format!("writing batch {seq}"))?;
        pb.inc(end - i);
        i = end;
    }
    index.flush().context("flushing the index")?;
    let load = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let mb = args.n as f64 * (16 + args.value_bytes) as f64 / (1 << 20) as f64;
    println!(
        "load:       {} entries in {load:.2} s = {}, {:.1} MiB/s (includes the final flush)",
        args.n,
        rate(args.n, load),
        mb / load
    );
    Ok(())
}

fn query(index: &Index, args: &Args) -> Result<()> {
    // Gets.
    let gets = args.gets.min(args.n.max(1));
    for (what, salt) in [("get hit", 0u64), ("get miss", 0xdead_beef)] {
        let pb = bar(gets, what);
        let start = Instant::now();
        let mut found = 0u64;
        for g in 0..gets {
            let i = mix(g ^ 0x1234) % args.n.max(1);
            if index.get(&key(i, salt))?.is_some() {
                found += 1;
            }
            if g % 4096 == 0 {
                pb.set_position(g);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        pb.finish_and_clear();
        println!("{what:<10}  {gets} gets in {secs:.2} s = {}, {found} found", rate(gets, secs));
    }

    // Prefix scans: a 2-byte prefix holds about n / 65536 keys.
    let pb = bar(args.scans, "scan");
    let start = Instant::now();
    let mut entries = 0u64;
    for s in 0..args.scans {
        let p = (mix(s) as u16).to_be_bytes();
        for kv in index.prefix(&p, true)? {
            kv?;
            entries += 1;
        }
        if s % 256 == 0 {
            pb.set_position(s);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    println!(
        "scan:       {} prefix scans in {secs:.2} s = {}, {entries} entries ({:.0} entries/s)",
        args.scans,
        rate(args.scans, secs),
        entries as f64 / secs.max(1e-9)
    );
    Ok(())
}
