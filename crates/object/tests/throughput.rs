//! By-hand measurement (ignored; not a timed test): durable 4 KiB commits
//! through the store on the real file system, with 1 and 8 writers, beside
//! the physical ceiling (a 4 KiB overwrite plus fdatasync of an
//! already-written file). Run:
//! `cargo test --release -p larder-object --test throughput -- --ignored --nocapture`

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_index::WriteBatch;
use larder_io::{RealStorage, StorageRef};
use larder_object::{CreationOptions, Durability, Store, StoreOptions};

const RUN: Duration = Duration::from_secs(3);

fn ceiling(dir: &std::path::Path) -> f64 {
    let path = dir.join("ceiling");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&vec![1u8; 1 << 20]).unwrap();
    f.sync_all().unwrap();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < RUN {
        f.write_at(&[2u8; 4096], (n % 256) * 4096).unwrap();
        f.sync_data().unwrap();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn commits(threads: usize) -> (f64, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let storage: StorageRef = Arc::new(RealStorage::new());
    let creation = CreationOptions { container_bytes: 1 << 20, ..CreationOptions::default() };
    let store = Arc::new(Store::create(storage, &tmp.path().join("store"), creation, StoreOptions::default()).unwrap());
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while start.elapsed() < RUN {
                    let mut b = WriteBatch::new();
                    b.put(format!("t{t}/{n}"), vec![7u8; 4096]);
                    store.commit(&b, Durability::Durable).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    (total as f64 / start.elapsed().as_secs_f64(), total)
}

#[test]
#[ignore = "a measurement, run by hand"]
fn durable_4k_commits() {
    let tmp = tempfile::tempdir().unwrap();
    println!("ceiling (4 KiB overwrite + fdatasync): {:.0}/s", ceiling(tmp.path()));
    for threads in [1, 8] {
        let (rate, n) = commits(threads);
        println!("store, {threads} writer(s): {rate:.0} durable 4 KiB commits/s ({n} in {RUN:?})");
    }
}
