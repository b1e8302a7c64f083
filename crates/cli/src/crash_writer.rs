//! `larder crash-writer` (hidden): a writer that runs until it is killed,
//! for the crash-loop test (`tests/crash_loop.rs`), which kills it with
//! SIGKILL at a random moment and then holds the store to what it printed.
//!
//! `kv` puts, deletes and batches keys through the KV API, every call
//! durable; `files` creates, replaces, appends to, truncates, renames and
//! unlinks files under a directory (a mount), each step followed by the
//! fsync of the file and of its directory. Every thread works on its own
//! keys or files. Before a step it prints `begin THREAD STEP EFFECT...`
//! and after the step returns `ack THREAD STEP`, each line flushed, so a
//! step without its `ack` line may or may not have happened (atomically,
//! except that an interrupted append may keep any prefix of what it added)
//! and a step never begun has not. Effects:
//!
//! - `put:KEY:LEN:SEED`, `del:KEY` (kv; a batch prints several);
//! - `new:NAME:LEN:SEED`, `replace:NAME:LEN:SEED` (through `NAME.tmp`),
//!   `append:NAME:LEN:SEED`, `truncate:NAME:LEN`, `rename:FROM:TO`,
//!   `unlink:NAME` (files, names relative to the directory).
//!
//! A value of `LEN` and `SEED` is [`pattern`]`(LEN, SEED)`; the test holds
//! its own copy of that function.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use larder_kv::{Durability, Kv, KvBatch};

use crate::crash_pattern::{pattern, Rng};
use crate::objects::STREAM_ABOVE_BYTES;
use crate::store;

/// Options of `larder crash-writer`.
#[derive(clap::Args, Debug)]
pub(crate) struct CrashWriterArgs {
    #[command(subcommand)]
    target: Target,
    /// Seed of every choice and value.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Writing threads, each on its own keys or files.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    threads: u64,
}

#[derive(clap::Subcommand, Debug)]
enum Target {
    /// Keys of BUCKET (created if missing), through the KV API.
    Kv { store: PathBuf, bucket: String },
    /// Files under DIRECTORY (created if missing), through the file system.
    Files { directory: PathBuf },
}

/// `larder crash-writer`: writes until killed (or until a step fails).
pub(crate) fn run(args: &CrashWriterArgs) -> Result<()> {
    let out = Mutex::new(io::stdout());
    match &args.target {
        Target::Kv { store: dir, bucket } => {
            let kv = store::open(dir)?;
            store::ensure_bucket(&kv, bucket)?;
            on_threads(args, |t, rng| kv_thread(&kv, bucket, t, rng, &out))
        }
        Target::Files { directory } => on_threads(args, |t, rng| {
            let dir = directory.join(format!("t{t}"));
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            sync_dir(directory)?;
            files_thread(&dir, t, rng, &out)
        }),
    }
}

/// Runs `work` on every thread with its own random sequence; returns the
/// first error.
fn on_threads(args: &CrashWriterArgs, work: impl Fn(u64, Rng) -> Result<()> + Sync) -> Result<()> {
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let work = &work;
                s.spawn(move || work(t, Rng(args.seed ^ (t + 1).wrapping_mul(0xd6e8_feb8_6659_fd93))))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a thread panicked")))).collect()
    });
    results.into_iter().collect()
}

/// Prints one line and flushes it before returning.
fn say(out: &Mutex<io::Stdout>, line: &str) -> Result<()> {
    let out = out.lock().map_err(|_| anyhow::anyhow!("stdout lock poisoned"))?;
    let mut out = out.lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).context("writing stdout")
}

/// One KV thread: puts (streamed above the streaming size), deletes and
/// batches of small puts and deletes, durable, on 48 keys under `tTHREAD/`
/// (some left by an earlier writer).
fn kv_thread(kv: &Kv, bucket: &str, t: u64, mut rng: Rng, out: &Mutex<io::Stdout>) -> Result<()> {
    let prefix = format!("t{t}/");
    let mut present = BTreeSet::new();
    for entry in kv.scan_prefix(bucket, prefix.as_bytes())? {
        present.insert(String::from_utf8(entry?.key).context("a key that is not UTF-8")?);
    }
    let key = |n: u64| format!("{prefix}d{}/k{n}", n % 4);
    for step in 0u64.. {
        let choice = rng.below(100);
        if choice < 65 || present.is_empty() {
            let (k, len, seed) = (key(rng.below(48)), value_len(&mut rng), rng.next());
            say(out, &format!("begin {t} {step} put:{k}:{len}:{seed}"))?;
            let value = pattern(len, seed);
            if len as u64 > STREAM_ABOVE_BYTES {
                let mut w = kv.writer(bucket, &k, Durability::Durable)?;
                w.write_all(&value)?;
                w.finish()?;
            } else {
                kv.put(bucket, &k, &value, Durability::Durable)?;
            }
            present.insert(k);
        } else if choice < 80 {
            let k = nth(&present, rng.below(present.len() as u64)).clone();
            say(out, &format!("begin {t} {step} del:{k}"))?;
            if !kv.delete(bucket, &k, Durability::Durable)? {
                bail!("{k} was put and not deleted, yet the delete found nothing");
            }
            present.remove(&k);
        } else {
            // A batch on distinct keys, so its effect does not depend on order.
            let mut batch = KvBatch::new();
            let mut effects = Vec::new();
            let mut touched = BTreeMap::new();
            for _ in 0..2 + rng.below(4) {
                let k = key(rng.below(48));
                if touched.contains_key(&k) {
                    continue;
                }
                if present.contains(&k) && rng.below(3) == 0 {
                    batch.delete(&k);
                    effects.push(format!("del:{k}"));
                    touched.insert(k, false);
                } else {
                    let (len, seed) = (rng.below(6000) as usize, rng.next());
                    batch.put(&k, pattern(len, seed));
                    effects.push(format!("put:{k}:{len}:{seed}"));
                    touched.insert(k, true);
                }
            }
            say(out, &format!("begin {t} {step} {}", effects.join(" ")))?;
            kv.write_batch(bucket, &batch, Durability::Durable)?;
            for (k, put) in touched {
                if put {
                    present.insert(k);
                } else {
                    present.remove(&k);
                }
            }
        }
        say(out, &format!("ack {t} {step}"))?;
    }
    Ok(())
}

/// One files thread in `dir`: each step a file operation on one of 24
/// names (some left by an earlier writer), made durable by fsyncs of the
/// file and the directory.
fn files_thread(dir: &Path, t: u64, mut rng: Rng, out: &Mutex<io::Stdout>) -> Result<()> {
    // Names present, with their sizes; a `.tmp` left by a killed replace
    // is not one of them.
    let mut present: BTreeMap<String, u64> = BTreeMap::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.context("listing")?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".tmp") {
            present.insert(name, entry.metadata().context("stat")?.len());
        }
    }
    let path = |name: &str| dir.join(name);
    for step in 0u64.. {
        let name = format!("f{}", rng.below(24));
        let exists = present.contains_key(&name);
        let choice = rng.below(100);
        let (len, seed) = (file_len(&mut rng), rng.next());
        if !exists && choice < 70 {
            say(out, &format!("begin {t} {step} new:{name}:{len}:{seed}"))?;
            let mut f = OpenOptions::new().write(true).create_new(true).open(path(&name)).context("create")?;
            f.write_all(&pattern(len, seed)).context("write")?;
            f.sync_all().context("fsync")?;
            present.insert(name, len as u64);
        } else if !exists {
            continue;
        } else if choice < 30 {
            let tmp = format!("{name}.tmp");
            say(out, &format!("begin {t} {step} replace:{name}:{len}:{seed}"))?;
            let mut f = File::create(path(&tmp)).context("create")?;
            f.write_all(&pattern(len, seed)).context("write")?;
            f.sync_all().context("fsync")?;
            fs::rename(path(&tmp), path(&name)).context("rename")?;
            present.insert(name, len as u64);
        } else if choice < 50 {
            let len = len.min(300_000);
            say(out, &format!("begin {t} {step} append:{name}:{len}:{seed}"))?;
            let mut f = OpenOptions::new().append(true).open(path(&name)).context("open")?;
            f.write_all(&pattern(len, seed)).context("append")?;
            f.sync_all().context("fsync")?;
            *present.entry(name).or_default() += len as u64;
        } else if choice < 62 {
            let size = present[&name];
            let to = rng.below(size + 1);
            say(out, &format!("begin {t} {step} truncate:{name}:{to}"))?;
            let f = OpenOptions::new().write(true).open(path(&name)).context("open")?;
            f.set_len(to).context("truncate")?;
            f.sync_all().context("fsync")?;
            present.insert(name, to);
        } else if choice < 80 {
            let to = format!("f{}", rng.below(24));
            if to == name {
                continue;
            }
            say(out, &format!("begin {t} {step} rename:{name}:{to}"))?;
            fs::rename(path(&name), path(&to)).context("rename")?;
            let size = present.remove(&name).unwrap_or_default();
            present.insert(to, size);
        } else {
            say(out, &format!("begin {t} {step} unlink:{name}"))?;
            fs::remove_file(path(&name)).context("unlink")?;
            present.remove(&name);
        }
        sync_dir(dir)?;
        say(out, &format!("ack {t} {step}"))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("fsync of directory {}", dir.display()))
}

fn nth(set: &BTreeSet<String>, n: u64) -> &String {
    set.iter().nth(n as usize).unwrap_or_else(|| unreachable!("n is below the set's length"))
}

/// A KV value's length: mostly inline-sized and small-extent values, some
/// of megabytes, a few above the streaming size.
fn value_len(rng: &mut Rng) -> usize {
    (match rng.below(100) {
        0..=49 => rng.below(2048),
        50..=84 => 2048 + rng.below(64 << 10),
        85..=98 => (64 << 10) + rng.below(1 << 20),
        _ => STREAM_ABOVE_BYTES + rng.below(1 << 20),
    }) as usize
}

/// A file's length: mostly below 64 KiB, some up to 2 MiB.
fn file_len(rng: &mut Rng) -> usize {
    (match rng.below(100) {
        0..=69 => rng.below(65_536),
        _ => rng.below(2 << 20),
    }) as usize
}
