//! A memtable of 16 MiB or more keeps its large entries (1 KiB to 256
//! KiB) in huge-page regions: gets, scans both ways, a snapshot that
//! outlives the flush, the flushed runs and a reopened index all read
//! every value as written.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::tiny_options;
use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

fn options() -> Options {
    // A budget that takes regions; blocks and caches of a real store.
    Options {
        memtable_size_bytes: 16 << 20,
        block_size_bytes: 4096,
        block_cache_bytes: 4 << 20,
        metadata_cache_bytes: 4 << 20,
        ..tiny_options(false)
    }
}

fn value(i: u64) -> Vec<u8> {
    // 1,000 to 8,000 bytes: every entry goes to a region.
    let len = 1000 + (i * 7919 % 7001) as usize;
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

fn check(read: impl Fn(&[u8]) -> Option<Vec<u8>>, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(read(k).as_deref(), Some(&v[..]), "key {:?}", String::from_utf8_lossy(k));
    }
}

fn scanned(index: &Index, forward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    index.range(Bound::Unbounded, Bound::Unbounded, forward).unwrap().map(|r| r.unwrap()).collect()
}

#[test]
fn large_entries_in_regions_read_back_before_and_after_flush_and_reopen() {
    let storage: StorageRef = std::sync::Arc::new(SimStorage::new(35));
    let dir = std::path::Path::new("/regions");
    let mut model = BTreeMap::new();
    {
        let index = Index::open(storage.clone(), dir, options()).unwrap();
        for seq in 1..=300u64 {
            let mut batch = WriteBatch::new();
            for j in 0..10 {
                // Keys rewritten across batches: newer versions win.
                let i = (seq * 10 + j) % 2500;
                let key = format!("key-{i:05}").into_bytes();
                let v = value(seq * 10 + j);
                batch.put(&key, &v);
                model.insert(key, v);
            }
            index.write(seq, &batch).unwrap();
        }
        check(|k| index.get(k).unwrap(), &model);
        let forward = scanned(&index, true);
        let want: Vec<_> = model.clone().into_iter().collect();
        assert_eq!(forward, want);
        let mut backward = scanned(&index, false);
        backward.reverse();
        assert_eq!(backward, want);
        // A snapshot taken before the flush keeps reading its entries.
        let before = index.snapshot();
        index.flush().unwrap();
        check(|k| before.get(k).unwrap(), &model);
        drop(before);
        check(|k| index.get(k).unwrap(), &model);
        index.close().unwrap();
    }
    let index = Index::open(storage, dir, options()).unwrap();
    check(|k| index.get(k).unwrap(), &model);
    assert_eq!(scanned(&index, true), model.into_iter().collect::<Vec<_>>());
}
