//! The key-value API: durable and buffered puts, an atomic batch, a value
//! streamed in pieces, and what a reopen finds.
//!
//! `cargo run -p larder --example kv_batches [STORE_DIR]` (a new temporary
//! directory without one).

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use larder::kv::KvBatch;
use larder::{Durability, Options, Store};

/// What the example did, for its test.
#[derive(Debug)]
pub struct Summary {
    /// Keys in the bucket after the reopen, in order.
    pub keys: Vec<String>,
    /// The streamed value's size as read back after the reopen.
    pub streamed_bytes: u64,
}

/// Runs the example on the store in `dir` (created if missing).
pub fn run(dir: &Path) -> Result<Summary, larder::Error> {
    let store = Store::open(dir, Options::default())?;
    let kv = store.kv();
    kv.create_bucket("orders")?;

    // Durable: each put returns once it (and everything before it) is on
    // disk, one log sync each (shared with concurrent callers).
    let started = Instant::now();
    for i in 0..20 {
        kv.put("orders", format!("2026/11/{i:02}"), format!("order {i}").as_bytes(), Durability::Durable)?;
    }
    println!("20 durable puts in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);

    // Buffered: each put returns at once, visible to every reader, and is
    // on disk within the buffered sync interval (10 ms by default) or at
    // the next durable call or sync.
    let started = Instant::now();
    for i in 0..20 {
        kv.put("orders", format!("2026/12/{i:02}"), format!("order {i}").as_bytes(), Durability::Buffered)?;
    }
    println!("20 buffered puts in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    store.sync()?;
    println!("sync: every buffered put is durable now");

    // A batch: all of its puts and deletes, or none (also after a crash).
    let mut batch = KvBatch::new();
    batch.delete("2026/11/00").delete("2026/12/00").put("2026/summary", b"38 orders".to_vec());
    kv.write_batch("orders", &batch, Durability::Durable)?;
    println!("batch of {} operations applied atomically and durably", batch.len());

    // A large value written in pieces, stored under its key at `finish`.
    let mut writer = kv.writer("orders", "2026/archive.log", Durability::Durable)?;
    for line in 0..1000 {
        writeln!(writer, "line {line:04} of the archive")?;
    }
    writer.finish()?;
    println!("streamed 2026/archive.log");
    store.close()?;

    // Everything acknowledged durable is there after a reopen.
    let store = Store::open(dir, Options::new().create_if_missing(false))?;
    let kv = store.kv();
    let mut keys = Vec::new();
    for entry in kv.scan_prefix("orders", b"2026/")? {
        keys.push(String::from_utf8_lossy(&entry?.key).into_owned());
    }
    println!("after reopening: {} keys, first {:?}, last {:?}", keys.len(), keys.first(), keys.last());
    assert_eq!(kv.get("orders", "2026/summary")?, Some(b"38 orders".to_vec()));
    assert_eq!(kv.get("orders", "2026/11/00")?, None);

    let Some(mut reader) = kv.reader("orders", "2026/archive.log")? else {
        panic!("2026/archive.log was acknowledged durable and is gone after a reopen");
    };
    let mut text = String::new();
    reader.read_to_string(&mut text)?;
    let streamed_bytes = text.len() as u64;
    println!("read back 2026/archive.log: {streamed_bytes} bytes, {} lines", text.lines().count());
    store.close()?;
    Ok(Summary { keys, streamed_bytes })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temporary;
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().join("store")
        }
    };
    println!("store at {}", dir.display());
    run(&dir)?;
    Ok(())
}
