//! `larder bench` (or `bench store`): the project's main job. An embedded
//! store with its defaults, driven through the KV API: N small objects put
//! with buffered durability then synced, some durable puts, every object
//! read back and verified, a scan, half of them deleted, a reopen; each
//! step timed, then the store's counters.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use larder_kv::{Durability, Kv};

use crate::{progress, stats, store};

/// Options of `larder bench store`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory for the store: new or empty, removed afterwards unless
    /// --keep. Default: a new temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Objects to put with buffered durability.
    #[arg(long, default_value_t = 20_000)]
    n: u64,
    /// Size of each object in bytes (at least 8).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(8..=(64 << 20)))]
    value_bytes: u64,
    /// Objects to put with durable commits (one sync each).
    #[arg(long, default_value_t = 1_000)]
    durable: u64,
    /// Keep the store afterwards and print where it is.
    #[arg(long)]
    keep: bool,
}

/// The bucket the bench fills.
const BUCKET: &str = "bench";

/// The i-th object's key: spread over 256 directory levels as keys that
/// are paths usually are.
fn key(i: u64) -> String {
    format!("{:02x}/{i:08}", i % 256)
}

/// The i-th object's value: its number, then a byte of it repeated, so a
/// value read back under the wrong key or torn is caught.
fn value(i: u64, len: u64) -> Vec<u8> {
    let mut v = vec![i as u8; len as usize];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// Prints one timed step: `count` operations moving `bytes` in `secs`.
fn step(what: &str, count: u64, bytes: u64, secs: f64, note: &str) {
    let secs = secs.max(1e-9);
    println!(
        "{what:<12} {count} {note} in {secs:.2} s = {:.0} ops/s, {}",
        count as f64 / secs,
        stats::per_sec(bytes as f64 / secs)
    );
}

/// `larder bench store`.
pub(crate) fn run(args: &Args) -> Result<()> {
    // The temporary directory is removed on every return, errors included.
    let (tmp, dir) = match &args.dir {
        Some(d) => {
            if d.exists() && d.read_dir().with_context(|| format!("reading {}", d.display()))?.next().is_some() {
                bail!("{} is not empty; give --dir a new or empty directory (the bench removes it)", d.display());
            }
            (None, d.clone())
        }
        None => {
            let t =
                tempfile::Builder::new().prefix("larder-bench-").tempdir().context("creating a temporary directory")?;
            let d = t.path().to_path_buf();
            (Some(t), d)
        }
    };
    let store_dir = dir.join("store");
    println!(
        "larder bench: {} objects of {} bytes (+ {} durable) in bucket {BUCKET:?} of a new store in {}",
        args.n,
        args.value_bytes,
        args.durable,
        store_dir.display()
    );
    let kv = store::create(&store_dir, larder_object::CreationOptions::default())?;
    kv.create_bucket(BUCKET).context("creating the bucket")?;
    work(kv, &store_dir, args)?;
    if args.keep {
        if let Some(t) = tmp {
            let _ = t.keep();
        }
        println!("store kept at {}", store_dir.display());
    } else if tmp.is_none() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(())
}

/// The timed steps, each checking what it did.
fn work(kv: Kv, dir: &Path, args: &Args) -> Result<()> {
    let (n, len) = (args.n, args.value_bytes);
    let pb = progress::items(n, "put");
    let start = Instant::now();
    for i in 0..n {
        kv.put(BUCKET, key(i), &value(i, len), Durability::Buffered).with_context(|| format!("putting {}", key(i)))?;
        pb.inc(1);
    }
    kv.sync().context("syncing the puts")?;
    pb.finish_and_clear();
    step("put", n, n * len, start.elapsed().as_secs_f64(), "buffered puts, then one sync,");

    let pb = progress::items(args.durable, "put durable");
    let start = Instant::now();
    for i in 0..args.durable {
        let k = format!("durable/{i:08}");
        kv.put(BUCKET, &k, &value(i, len), Durability::Durable).with_context(|| format!("putting {k}"))?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    step("put durable", args.durable, args.durable * len, start.elapsed().as_secs_f64(), "durable puts");

    let pb = progress::items(n, "get");
    let start = Instant::now();
    for i in 0..n {
        let got = kv.get(BUCKET, key(i)).with_context(|| format!("getting {}", key(i)))?;
        ensure!(got.as_deref() == Some(&value(i, len)[..]), "{} read back wrong or missing", key(i));
        pb.inc(1);
    }
    pb.finish_and_clear();
    step("get", n, n * len, start.elapsed().as_secs_f64(), "gets, each value verified,");

    let total = n + args.durable;
    let start = Instant::now();
    let scanned = count(&kv, len)?;
    step("scan", scanned, scanned * len, start.elapsed().as_secs_f64(), "keys scanned");
    ensure!(scanned == total, "the scan found {scanned} keys, not {total}");

    let pb = progress::items(n.div_ceil(2), "delete");
    let start = Instant::now();
    for i in (0..n).step_by(2) {
        let found = kv.delete(BUCKET, key(i), Durability::Buffered).with_context(|| format!("deleting {}", key(i)))?;
        ensure!(found, "{} was not there to delete", key(i));
        pb.inc(1);
    }
    kv.sync().context("syncing the deletes")?;
    pb.finish_and_clear();
    step("delete", n.div_ceil(2), 0, start.elapsed().as_secs_f64(), "buffered deletes, then one sync,");

    let start = Instant::now();
    store::close(kv, dir)?;
    let kv = store::open(dir)?;
    let left = count(&kv, len)?;
    println!("{:<12} closed and reopened in {:.2} s, {left} keys", "reopen", start.elapsed().as_secs_f64());
    ensure!(left == total - n.div_ceil(2), "{left} keys after the deletes, not {}", total - n.div_ceil(2));
    ensure!(n < 2 || kv.get(BUCKET, key(0))?.is_none(), "a deleted key came back");

    println!("\ncounters:\n{}", stats::report(&kv)?);
    store::close(kv, dir)
}

/// Keys in the bucket, checking each one's size.
fn count(kv: &Kv, len: u64) -> Result<u64> {
    let mut count = 0u64;
    for e in kv.scan_prefix(BUCKET, b"").context("scanning")? {
        let e = e.context("scanning")?;
        ensure!(e.size == len, "{} has {} bytes, not {len}", store::shown(&e.key), e.size);
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_tell_objects_apart() {
        assert_ne!(value(1, 16), value(257, 16));
        assert_eq!(value(3, 8), 3u64.to_le_bytes());
        assert_eq!(key(257), "01/00000257");
    }
}
