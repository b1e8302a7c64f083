//! By-hand measurement (ignored; not a timed test): durable 4 KiB and
//! 1 MiB object writes through `Store::write` on the real file system,
//! with 1 and 8 writers, beside the ceiling (a write of the same size plus
//! fdatasync of an already-written file). Run:
//! `cargo test --release -p larder-object --test objects_throughput -- --ignored --nocapture`

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_io::{write_all_at, OpenOptions, RealStorage, StorageRef};
use larder_object::meta::Kind;
use larder_object::{CreationOptions, Durability, Store, StoreOptions};

const RUN: Duration = Duration::from_secs(3);

fn storage() -> StorageRef {
    Arc::new(RealStorage::new())
}

/// Writes of `bytes` plus fdatasync per second, overwriting an
/// already-written file.
fn ceiling(dir: &Path, bytes: usize) -> f64 {
    let file = storage().open(&dir.join("ceiling"), OpenOptions::CREATE).unwrap();
    let slots = 16u64;
    write_all_at(&*file, &vec![1u8; bytes * slots as usize], 0).unwrap();
    file.sync_data().unwrap();
    let data = vec![2u8; bytes];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < RUN {
        write_all_at(&*file, &data, (n % slots) * bytes as u64).unwrap();
        file.sync_data().unwrap();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Durable object writes of `bytes` per second with `threads` writers,
/// each overwriting its own object.
fn writes(threads: usize, bytes: usize) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let creation = CreationOptions { container_bytes: 256 << 20, ..CreationOptions::default() };
    let store =
        Arc::new(Store::create(storage(), &tmp.path().join("store"), creation, StoreOptions::default()).unwrap());
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let id = store.create_object(Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
                let data = vec![t as u8; bytes];
                let mut n = 0u64;
                while start.elapsed() < RUN {
                    store.write(id, (n % 4) * bytes as u64, &data, Durability::Durable).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    total as f64 / start.elapsed().as_secs_f64()
}

#[test]
#[ignore = "by-hand measurement on the real disk"]
fn durable_object_writes_beside_the_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    for bytes in [4096, 1 << 20] {
        println!("{bytes} B: ceiling (write + fdatasync) {:.0}/s", ceiling(tmp.path(), bytes));
        for threads in [1, 8] {
            println!("{bytes} B: {threads} writer(s): {:.0} durable writes/s", writes(threads, bytes));
        }
    }
}
