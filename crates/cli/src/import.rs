//! `larder import STORE DIRECTORY BUCKET`: a directory tree into a bucket,
//! each regular file under the key of its relative path.
//!
//! Files go in batches of up to `--batch` files or [`BATCH_BYTES`]. Small
//! files go in with the KV API's bulk create ([`Kv::create_many`]: one
//! bulk create per directory level, no lookup per key in a level that was
//! empty, large levels written directly as index runs); the keys it
//! reports as already there are then replaced by one [`KvBatch`] of puts.
//! Files above [`STREAM_ABOVE_BYTES`] each go through a streaming writer.
//! All of it commits buffered; the batch ends with one sync, which makes
//! it and everything before it durable (commits are durable in order), and
//! only then are its keys printed, one `durable KEY` line each: a key
//! printed is in the store intact whatever happens to the process
//! afterwards. Through a server (when one serves the store), small files
//! go in atomic batches of puts as large as one request, larger ones
//! through streamed writers, and the batch ends with the server's sync.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use larder_client::{Client, KvOperation, Payload};
use larder_kv::{Durability, Kv, KvBatch};

use crate::objects::copy;
use crate::store::{self, shown};
use crate::target::{self, Target};
use crate::walk::{walk, Source, Walk};
use crate::{progress, stats};

/// Bytes a batch gathers before it commits, whatever its file count: bounds
/// the memory a batch of small files holds.
const BATCH_BYTES: u64 = 64 << 20;

/// Options of `larder import`.
#[derive(clap::Args, Debug)]
pub(crate) struct ImportArgs {
    /// Store directory.
    store: PathBuf,
    /// Directory tree to import.
    directory: PathBuf,
    /// Bucket to import into (created if missing); existing keys are replaced.
    bucket: String,
    /// Files per durable batch.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
}

/// The batch being gathered.
#[derive(Default)]
struct Batch {
    /// Small files' keys and values.
    small: Vec<(Vec<u8>, Vec<u8>)>,
    /// Every key of the batch, streamed ones included, in import order.
    keys: Vec<Vec<u8>>,
    bytes: u64,
}

/// `larder import`.
pub(crate) fn run(args: &ImportArgs) -> Result<()> {
    let root = &args.directory;
    let meta = fs::metadata(root).with_context(|| format!("reading {}", root.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory; import takes a directory tree (use `larder put` for one file)", root.display());
    }
    let addr = store::Address::parse(&args.bucket)?;
    if !addr.key.is_empty() {
        bail!("{:?}: import takes a bucket name, without '/'", args.bucket);
    }
    let target = Target::open(&args.store)?;
    // The store may lie inside the tree: its own files are not imported.
    let avoid = fs::metadata(&args.store).ok().map(|m| (m.dev(), m.ino()));
    let spinner = progress::spinner("walking: files found");
    let tree = walk(root, avoid, &spinner)?;
    spinner.finish_and_clear();
    target.ensure_bucket(&addr.bucket)?;

    let start = Instant::now();
    let pb = progress::bytes(tree.bytes);
    let (batches, replaced) = import(&target, &addr.bucket, &tree, args.batch, &pb).with_context(|| {
        format!(
            "importing {} into bucket {:?} of the store at {}; keys printed `durable` before this are stored",
            root.display(),
            addr.bucket,
            args.store.display()
        )
    })?;
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "imported {} files ({}) in {batches} durable batches in {secs:.2} s ({}), {} a key there before; \
         skipped {} ({} symbolic links, {} special files, {} names breaking the key rules)",
        tree.files.len(),
        stats::bytes(tree.bytes),
        stats::per_sec(tree.bytes as f64 / secs.max(1e-9)),
        match replaced {
            Some(n) => format!("{n} of them replacing"),
            None => "replacing (through the server, not counted)".into(),
        },
        tree.skipped(),
        tree.symlinks,
        tree.special,
        tree.bad_names
    );
    target.close(&args.store)
}

/// Imports every file of `tree`; returns the number of batches and of
/// small files that replaced a key already there (when it is known).
fn import(target: &Target, bucket: &str, tree: &Walk, per_batch: u64, pb: &ProgressBar) -> Result<(u64, Option<u64>)> {
    let mut batch = Batch::default();
    let (mut number, mut replaced) = (0u64, Some(0u64));
    let mut commit = |batch: Batch, number: u64| -> Result<()> {
        let n = match target {
            Target::Embedded(kv) => Some(commit(kv, bucket, &batch, number)?),
            Target::Served(client) => {
                commit_served(client, bucket, &batch, number)?;
                None
            }
        };
        print_durable(&batch, number)?;
        replaced = replaced.zip(n).map(|(a, b)| a + b);
        Ok(())
    };
    for (i, src) in tree.files.iter().enumerate() {
        let size = add(target, bucket, src, &mut batch)?;
        pb.inc(size);
        pb.set_message(format!("{}/{} files", i + 1, tree.files.len()));
        if batch.keys.len() as u64 >= per_batch || batch.bytes >= BATCH_BYTES {
            number += 1;
            commit(std::mem::take(&mut batch), number)?;
        }
    }
    if !batch.keys.is_empty() {
        number += 1;
        commit(batch, number)?;
    }
    Ok((number, replaced))
}

/// Adds `src` to `batch`: its bytes into the batch, or, when large, streamed
/// into the store now (buffered; the batch's commit makes it durable).
/// Returns the bytes added.
fn add(target: &Target, bucket: &str, src: &Source, batch: &mut Batch) -> Result<u64> {
    let mut file = File::open(&src.path).with_context(|| format!("opening {}", src.path.display()))?;
    let len = file.metadata().with_context(|| format!("reading {}", src.path.display()))?.len();
    let key = shown(&src.key);
    let size = if len > target.stream_above() {
        let mut w =
            target.writer(bucket, &src.key, target::Durability::Buffered).with_context(|| format!("storing {key}"))?;
        let n = copy(&mut file, &mut w).with_context(|| format!("copying {} into {key}", src.path.display()))?;
        w.finish().with_context(|| format!("storing {key}"))?;
        n
    } else {
        let mut value = Vec::with_capacity(len as usize);
        file.read_to_end(&mut value).with_context(|| format!("reading {}", src.path.display()))?;
        let n = value.len() as u64;
        batch.small.push((src.key.clone(), value));
        n
    };
    batch.keys.push(src.key.clone());
    batch.bytes += size;
    Ok(size)
}

/// Commits `batch` durably in the store opened here; returns how many of
/// its small files replaced a key already there.
fn commit(kv: &Kv, bucket: &str, batch: &Batch, number: u64) -> Result<u64> {
    let (first, last) = match (batch.keys.first(), batch.keys.last()) {
        (Some(f), Some(l)) => (shown(f), shown(l)),
        _ => return Ok(0),
    };
    let what = || format!("committing batch {number} ({first} .. {last})");
    let items: Vec<(&[u8], &[u8])> = batch.small.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
    let done = kv.create_many(bucket, &items, Durability::Buffered).with_context(what)?;
    if !done.duplicates.is_empty() {
        // Keys the bucket held already: replaced, as import promises, in
        // batches small enough for one log record each.
        let values: HashMap<&[u8], &[u8]> = items.iter().copied().collect();
        let limit = usize::try_from(kv.batch_budget_bytes()).unwrap_or(usize::MAX);
        let (mut puts, mut bytes) = (KvBatch::new(), 0usize);
        for key in &done.duplicates {
            let value = values.get(key.as_slice()).copied().unwrap_or_default();
            if !puts.is_empty() && bytes + value.len() > limit {
                kv.write_batch(bucket, &std::mem::take(&mut puts), Durability::Buffered).with_context(what)?;
                bytes = 0;
            }
            puts.put(key, value);
            bytes += value.len();
        }
        kv.write_batch(bucket, &puts, Durability::Buffered).with_context(what)?;
    }
    // Everything of the batch (streamed files too) is made durable.
    kv.sync().with_context(what)?;
    Ok(done.duplicates.len() as u64)
}

/// Commits `batch` durably through the store's server: its small files in
/// atomic batches of puts, each as large as one request may be.
fn commit_served(client: &Client, bucket: &str, batch: &Batch, number: u64) -> Result<()> {
    let what = || format!("committing batch {number} through the server");
    let limit = client.max_request_bytes();
    let mut operations: Vec<KvOperation> = Vec::new();
    let mut bytes = 0usize;
    for (key, value) in &batch.small {
        // Room for the key, the value and their lengths and tags.
        let size = key.len() + value.len() + 16;
        if !operations.is_empty() && bytes + size > limit {
            client
                .write_batch(bucket, std::mem::take(&mut operations), larder_client::Durability::Buffered)
                .with_context(what)?;
            bytes = 0;
        }
        operations.push(KvOperation::Put { key: key.clone(), value: Payload::Inline(value.clone()) });
        bytes += size;
    }
    if !operations.is_empty() {
        client.write_batch(bucket, operations, larder_client::Durability::Buffered).with_context(what)?;
    }
    client.sync().with_context(what)
}

/// Prints the keys of a committed batch.
fn print_durable(batch: &Batch, number: u64) -> Result<()> {
    // IMPORTANT: printed only once the commit is durable; a test kills
    // the import at random and holds every printed key to this promise.
    let mut text = format!("batch {number} durable: {} keys, {} bytes\n", batch.keys.len(), batch.bytes);
    for k in &batch.keys {
        text.push_str("durable ");
        text.push_str(&shown(k));
        text.push('\n');
    }
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).context("writing stdout")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn batches_close_at_the_file_count() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dir) = (tmp.path().join("src"), tmp.path().join("store"));
        fs::create_dir_all(&src).unwrap();
        for i in 0..7 {
            fs::write(src.join(format!("f{i}")), vec![i as u8; 100]).unwrap();
        }
        let kv = Kv::create(&dir, larder_kv::KvOptions::default()).unwrap();
        kv.create_bucket("b").unwrap();
        let tree = walk(&src, None, &ProgressBar::hidden()).unwrap();
        let target = Target::Embedded(kv);
        assert_eq!(import(&target, "b", &tree, 3, &ProgressBar::hidden()).unwrap(), (3, Some(0)), "7 files, 3 a batch");
        let Target::Embedded(kv) = target else { unreachable!() };
        assert_eq!(kv.get("b", "f6").unwrap(), Some(vec![6u8; 100]));
        kv.close().unwrap();
    }

    #[test]
    fn a_batch_replacing_more_than_a_log_record_holds_is_split() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dir) = (tmp.path().join("src"), tmp.path().join("store"));
        fs::create_dir_all(&src).unwrap();
        for i in 0..100u8 {
            fs::write(src.join(format!("f{i}")), vec![i; 2000]).unwrap();
        }
        // 64 KiB log segments: 200 KB of inline values is no one record.
        let mut options = larder_kv::KvOptions::default();
        options.creation.log_segment_bytes = 64 << 10;
        let kv = Kv::create(&dir, options).unwrap();
        kv.create_bucket("b").unwrap();
        let tree = walk(&src, None, &ProgressBar::hidden()).unwrap();
        let target = Target::Embedded(kv);
        assert_eq!(import(&target, "b", &tree, 1000, &ProgressBar::hidden()).unwrap(), (1, Some(0)));
        for i in 0..100u8 {
            fs::write(src.join(format!("f{i}")), vec![i ^ 0xFF; 2000]).unwrap();
        }
        assert_eq!(import(&target, "b", &tree, 1000, &ProgressBar::hidden()).unwrap(), (1, Some(100)), "all replaced");
        let Target::Embedded(kv) = target else { unreachable!() };
        assert_eq!(kv.get("b", "f7").unwrap(), Some(vec![7 ^ 0xFF; 2000]));
        kv.close().unwrap();
    }
}
