//! `larder serve-writer` (hidden): a client of `larder serve` that writes
//! through the server until it is killed or the server goes, for the
//! server's kill tests (`tests/serve_kills.rs`): they kill it with SIGKILL
//! at random moments and check that the server gives back everything it
//! held, or kill the server under it and hold the store to what it printed.
//!
//! Every thread has its own connection (its own session on the server) and
//! works on its own keys (`tTHREAD/kN` in the bucket) and files
//! (`/wTHREAD/fN`). Steps that change the store are durable when they
//! return: KV puts and deletes with `Durability::Durable`, file writes
//! followed by the file's fsync, unlinks by a sync. Before such a step the
//! thread prints `begin THREAD STEP EFFECT` and after it `ack THREAD STEP`,
//! each line flushed, as `larder crash-writer` does. Effects:
//! `put:KEY:LEN:SEED` (a KV value, put whole, from a zero-copy buffer or
//! streamed through a writer), `del:KEY`, `new:PATH:LEN:SEED` (a file
//! created or truncated and written), `append:PATH:LEN:SEED`,
//! `unlink:PATH`; a value of `LEN` and `SEED` is [`pattern`]`(LEN, SEED)`.
//!
//! Between steps a thread also takes things the server must keep for it
//! and give back when it dies: open files (some unlinked while open), KV
//! readers part read, unfinished KV writers, directory listings part read,
//! and zero-copy buffers. It holds up to `HELD` of them, dropping one at
//! random when it has that many, so a kill finds it holding some.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};
use larder_client::{Buffer, Client, DirEntries, Durability, File, KvReader, KvWriter, OpenOptions};

use crate::crash_pattern::{pattern, Rng};

/// Options of `larder serve-writer`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeWriterArgs {
    /// Store directory whose server to use (its socket is STORE/larder.sock).
    store: PathBuf,
    /// Bucket of the KV steps (created if missing).
    #[arg(long, default_value = "b")]
    bucket: String,
    /// Seed of every choice and value.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Writing threads, each with its own connection, keys and files.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=32))]
    threads: u64,
}

/// Most things a thread holds at once.
const HELD: usize = 12;

/// Keys and files per thread.
const NAMES: u64 = 16;

/// Something the server keeps for the client while it is held; never
/// read, only dropped (which gives it back).
#[allow(dead_code)]
enum Held {
    File(File),
    Reader(KvReader),
    Writer(KvWriter),
    Listing(DirEntries),
    Buffer(Buffer),
}

/// `larder serve-writer`: writes until killed or until a step fails (the
/// server gone, say), which ends it with that error.
pub(crate) fn run(args: &ServeWriterArgs) -> Result<()> {
    let out = Mutex::new(io::stdout());
    let setup = connect(args)?;
    match setup.create_bucket(&args.bucket) {
        Ok(()) => {}
        Err(e) if e.errno() == libc::EEXIST => {}
        Err(e) => return Err(e).with_context(|| format!("creating bucket {:?}", args.bucket)),
    }
    drop(setup);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..args.threads)
            .map(|t| {
                let out = &out;
                s.spawn(move || {
                    let rng = Rng(args.seed ^ (t + 1).wrapping_mul(0xd6e8_feb8_6659_fd93));
                    writer_thread(args, t, rng, out).with_context(|| format!("thread {t}"))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a thread panicked"))))
            .collect::<Result<Vec<()>>>()
    })?;
    Ok(())
}

fn connect(args: &ServeWriterArgs) -> Result<Client> {
    Client::connect(&args.store).with_context(|| format!("connecting to the server of {}", args.store.display()))
}

/// Prints one line and flushes it before returning.
fn say(out: &Mutex<io::Stdout>, line: &str) -> Result<()> {
    let out = out.lock().map_err(|_| anyhow::anyhow!("stdout lock poisoned"))?;
    let mut out = out.lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).context("writing stdout")
}

/// One thread's loop (see the module doc).
fn writer_thread(args: &ServeWriterArgs, t: u64, mut rng: Rng, out: &Mutex<io::Stdout>) -> Result<()> {
    let client = connect(args)?;
    let bucket = args.bucket.as_str();
    let dir = format!("/w{t}");
    match client.create_dir(&dir, 0o755) {
        Ok(_) => {}
        Err(e) if e.errno() == libc::EEXIST => {}
        Err(e) => return Err(e).with_context(|| format!("creating {dir}")),
    }
    client.sync().context("syncing the new directory")?;
    // What an earlier writer left: keys and files with their sizes.
    let mut keys: BTreeMap<String, u64> = BTreeMap::new();
    for entry in client.scan_prefix(bucket, format!("t{t}/").as_bytes()) {
        let entry = entry.context("listing keys")?;
        keys.insert(String::from_utf8(entry.key).context("a key that is not UTF-8")?, entry.size);
    }
    let mut files: BTreeMap<String, u64> = BTreeMap::new();
    for entry in client.read_dir(&dir).with_context(|| format!("listing {dir}"))? {
        let name = String::from_utf8(entry.context("listing")?.name).context("a name that is not UTF-8")?;
        let path = format!("{dir}/{name}");
        let size = client.metadata(&path).with_context(|| format!("stat {path}"))?.len();
        files.insert(path, size);
    }
    let mut held: Vec<Held> = Vec::new();
    for step in 0u64.. {
        if held.len() >= HELD {
            drop(held.swap_remove(rng.below(held.len() as u64) as usize));
        }
        let choice = rng.below(100);
        let key = format!("t{t}/k{}", rng.below(NAMES));
        let path = format!("{dir}/f{}", rng.below(NAMES));
        let (len, seed) = (value_len(&mut rng), rng.next());
        let begin = |effect: String| say(out, &format!("begin {t} {step} {effect}"));
        match choice {
            0..=24 => {
                begin(format!("put:{key}:{len}:{seed}"))?;
                let value = pattern(len, seed);
                if rng.below(3) == 0 {
                    let mut writer = client.writer(bucket, &key, Durability::Durable)?;
                    writer.write_all(&value).context("streaming a value")?;
                    writer.finish()?;
                } else {
                    client.put(bucket, &key, &value, Durability::Durable)?;
                }
                keys.insert(key, len as u64);
            }
            25..=31 => {
                // Held buffers stay small, so a thread's never fill the data area.
                let len = len.min(256 << 10);
                begin(format!("put:{key}:{len}:{seed}"))?;
                let mut buffer = client.alloc_buffer(len)?;
                buffer.as_mut_slice().copy_from_slice(&pattern(len, seed));
                client.put_buffer(bucket, &key, &buffer, Durability::Durable)?;
                keys.insert(key, len as u64);
                held.push(Held::Buffer(buffer));
            }
            32..=39 => {
                let Some(key) = nth_key(&keys, &mut rng) else { continue };
                begin(format!("del:{key}"))?;
                client.delete(bucket, &key, Durability::Durable)?;
                keys.remove(&key);
            }
            40..=59 => {
                begin(format!("new:{path}:{len}:{seed}"))?;
                let file = client.create(&path)?;
                write_all_at(&file, &pattern(len, seed), 0)?;
                file.sync_all()?;
                files.insert(path, len as u64);
                held.push(Held::File(file));
            }
            60..=71 => {
                let Some(&size) = files.get(&path) else { continue };
                begin(format!("append:{path}:{len}:{seed}"))?;
                let file = OpenOptions::new().write(true).open(&client, &path)?;
                write_all_at(&file, &pattern(len, seed), size)?;
                file.sync_all()?;
                files.insert(path, size + len as u64);
                if rng.below(2) == 0 {
                    held.push(Held::File(file));
                }
            }
            72..=77 => {
                if !files.contains_key(&path) {
                    continue;
                }
                // Open while unlinked: the server frees it at the last close.
                if rng.below(2) == 0 {
                    held.push(Held::File(client.open(&path)?));
                }
                begin(format!("unlink:{path}"))?;
                client.remove_file(&path)?;
                client.sync()?;
                files.remove(&path);
            }
            78..=85 => {
                let Some(key) = nth_key(&keys, &mut rng) else { continue };
                if let Some(mut reader) = client.reader(bucket, &key)? {
                    let mut some = vec![0; 4096];
                    let _ = reader.read(&mut some).context("reading a value")?;
                    held.push(Held::Reader(reader));
                }
                continue;
            }
            86..=92 => {
                let mut writer = client.writer(bucket, format!("t{t}/unfinished"), Durability::Durable)?;
                writer.write_all(&pattern(len, seed)).context("streaming a value")?;
                held.push(Held::Writer(writer));
                continue;
            }
            _ => {
                let mut listing = client.read_dir(&dir)?;
                if let Some(entry) = listing.next() {
                    entry.context("listing")?;
                }
                held.push(Held::Listing(listing));
                continue;
            }
        }
        say(out, &format!("ack {t} {step}"))?;
    }
    Ok(())
}

/// Writes all of `data` at `offset`.
fn write_all_at(file: &File, data: &[u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < data.len() {
        let n = file.write_at(&data[done..], offset + done as u64)?;
        anyhow::ensure!(n > 0, "a write at {} took no bytes", offset + done as u64);
        done += n;
    }
    Ok(())
}

/// One of `keys` at random, if any.
fn nth_key(keys: &BTreeMap<String, u64>, rng: &mut Rng) -> Option<String> {
    if keys.is_empty() {
        return None;
    }
    keys.keys().nth(rng.below(keys.len() as u64) as usize).cloned()
}

/// A value's or write's length: mostly small, some of hundreds of KiB, a
/// few of megabytes (these take several requests).
fn value_len(rng: &mut Rng) -> usize {
    (match rng.below(100) {
        0..=59 => rng.below(4096),
        60..=92 => 4096 + rng.below(256 << 10),
        _ => (1 << 20) + rng.below(3 << 20),
    }) as usize
}
