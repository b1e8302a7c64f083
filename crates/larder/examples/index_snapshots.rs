//! The standalone index: atomic batches with sequence numbers, a snapshot
//! that keeps its view, range and prefix scans both ways, a range delete,
//! and durability through flushes.
//!
//! `cargo run -p larder --example index_snapshots [INDEX_DIR]` (a new
//! temporary directory without one).

use std::ops::Bound;
use std::path::Path;

use larder::index::{Index, WriteBatch};
use larder::Options;

/// What the example did, for its test.
#[derive(Debug)]
pub struct Summary {
    /// Keys of `user/` as the snapshot saw them, forward.
    pub snapshot_users: Vec<String>,
    /// Keys of `user/` after the range delete, backward.
    pub users_backward: Vec<String>,
    /// Keys in `[event/0003, event/0006)` after reopening.
    pub events_in_range: Vec<String>,
    /// The durable sequence number after reopening.
    pub durable_seq: u64,
}

fn keys(iter: larder::index::Iter) -> Result<Vec<String>, larder::Error> {
    let mut keys = Vec::new();
    for entry in iter {
        let (key, _value) = entry?;
        keys.push(String::from_utf8_lossy(&key).into_owned());
    }
    Ok(keys)
}

fn next_seq(index: &Index) -> u64 {
    index.last_seq() + 1
}

/// Runs the example on the index in `dir` (created if missing).
pub fn run(dir: &Path) -> Result<Summary, larder::Error> {
    let options = Options::new().memtable_bytes(4 << 20).block_cache_bytes(8 << 20);
    let index = larder::index::open(dir, options.index_options())?;

    // One batch: every put in it is visible at once, or none is.
    let mut batch = WriteBatch::new();
    for name in ["ada", "alan", "barbara", "edsger", "grace"] {
        batch.put(format!("user/{name}"), format!("{{\"name\":\"{name}\"}}"));
    }
    for i in 0..10 {
        batch.put(format!("event/{i:04}"), format!("event number {i}"));
    }
    index.write(next_seq(&index), &batch)?;
    println!("batch {}: {} puts", index.last_seq(), batch.len());

    // A snapshot keeps seeing the index as it is now.
    let snapshot = index.snapshot();

    // Remove every user from "b" on: one range delete, [user/b, user/z).
    let mut removal = WriteBatch::new();
    removal.delete_range("user/b", "user/z").delete("event/0000");
    index.write(next_seq(&index), &removal)?;
    println!("batch {}: range delete [user/b, user/z) and a delete", index.last_seq());

    let snapshot_users = keys(snapshot.prefix(b"user/", true)?)?;
    let users_backward = keys(index.prefix(b"user/", false)?)?;
    println!("snapshot at {} sees users {:?}", snapshot.seq(), snapshot_users);
    println!("the index now has, backward, {:?}", users_backward);
    assert_eq!(snapshot.get(b"user/grace")?, Some(b"{\"name\":\"grace\"}".to_vec()));
    assert_eq!(index.get(b"user/grace")?, None);
    drop(snapshot);

    // Batches are durable once flushed: the index keeps no log of its own.
    println!("before flush: last written {}, durable {}", index.last_seq(), index.durable_seq());
    index.flush()?;
    println!("after flush: durable {}", index.durable_seq());
    assert_eq!(index.durable_seq(), index.last_seq());
    index.close()?;

    let index = larder::index::open(dir, options.index_options())?;
    let events_in_range =
        keys(index.range(Bound::Included(&b"event/0003"[..]), Bound::Excluded(&b"event/0006"[..]), true)?)?;
    println!("reopened at durable {}: events in [0003, 0006): {:?}", index.durable_seq(), events_in_range);
    let durable_seq = index.durable_seq();
    index.close()?;
    Ok(Summary { snapshot_users, users_backward, events_in_range, durable_seq })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temporary;
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().join("index")
        }
    };
    println!("index at {}", dir.display());
    run(&dir)?;
    Ok(())
}
