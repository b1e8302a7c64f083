//! Concurrent transactions: writer threads move amounts between accounts
//! (read both, write both, each account's version bumped), some durable,
//! some buffered, some aborted, while reader threads check snapshots.
//! Serializability shows as: the sum never changes (in every read
//! transaction, every writer's own scan, and at the end), and each
//! account's committed versions are exactly 1, 2, ... with none twice (a
//! lost update would write one version twice). Also: concurrent durable
//! transactions share log syncs (the writer lock is released before the
//! durability wait).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use larder_io::SimStorage;
use larder_trees::{Durability, Tree, Trees};
use rand::{Rng, SeedableRng};

const ACCOUNTS: u64 = 16;
const START: u64 = 1000;

fn account(i: u64) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

/// An account's value: balance, version (u64 LE each).
fn encode(balance: u64, version: u64) -> Vec<u8> {
    let mut v = balance.to_le_bytes().to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    v
}

fn decode(v: &[u8]) -> (u64, u64) {
    let b = u64::from_le_bytes(v[..8].try_into().unwrap());
    let n = u64::from_le_bytes(v[8..16].try_into().unwrap());
    (b, n)
}

fn setup(trees: &Trees) -> Tree {
    let t = trees.open_tree("accounts").unwrap();
    let mut tx = trees.write(Durability::Durable).unwrap();
    for i in 0..ACCOUNTS {
        tx.insert(&t, &account(i), &encode(START, 0)).unwrap();
    }
    tx.commit().unwrap();
    t
}

/// One writer: `n` transfers; returns the (account, version) pairs its
/// committed transactions wrote.
fn writer(trees: &Trees, tree: &Tree, seed: u64, n: usize) -> Vec<(u64, u64)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut written = Vec::new();
    for _ in 0..n {
        let a = rng.gen_range(0..ACCOUNTS);
        let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
        let durability = if rng.gen_bool(0.5) { Durability::Durable } else { Durability::Buffered };
        let abort = rng.gen_bool(0.1);
        let scan = rng.gen_bool(0.2);
        let mut tx = trees.write(durability).unwrap();
        let (ba, va) = decode(&tx.get(tree, &account(a)).unwrap().unwrap());
        let (bb, vb) = decode(&tx.get(tree, &account(b)).unwrap().unwrap());
        let amount = rng.gen_range(0..=ba.min(50));
        tx.insert(tree, &account(a), &encode(ba - amount, va + 1)).unwrap();
        tx.insert(tree, &account(b), &encode(bb + amount, vb + 1)).unwrap();
        if scan {
            // The transaction's own view, its writes included, keeps the sum.
            let sum: u64 = tx.iter(tree, rng.gen_bool(0.5)).unwrap().map(|kv| decode(&kv.unwrap().1).0).sum();
            assert_eq!(sum, ACCOUNTS * START, "a write transaction's scan");
        }
        if abort {
            tx.abort();
        } else {
            tx.commit().unwrap();
            written.push((a, va + 1));
            written.push((b, vb + 1));
        }
    }
    written
}

fn reader(trees: &Trees, tree: &Tree, stop: &AtomicBool) -> u64 {
    let mut checks = 0;
    while !stop.load(Ordering::Relaxed) || checks == 0 {
        let read = trees.read();
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> =
            read.iter(tree, checks % 2 == 0).unwrap().map(|kv| kv.unwrap()).collect();
        let sum: u64 = scanned.values().map(|v| decode(v).0).sum();
        assert_eq!(sum, ACCOUNTS * START, "a read transaction's scan");
        for (k, v) in scanned.iter().take(4) {
            assert_eq!(read.get(tree, k).unwrap().as_ref(), Some(v), "a snapshot's get and scan disagree");
        }
        checks += 1;
    }
    checks
}

fn run(trees: &Trees, writers: u64, per_writer: usize) {
    let tree = setup(trees);
    let stop = AtomicBool::new(false);
    let written: Vec<(u64, u64)> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2).map(|_| s.spawn(|| reader(trees, &tree, &stop))).collect();
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                s.spawn({
                    let tree = &tree;
                    move || writer(trees, tree, w, per_writer)
                })
            })
            .collect();
        let written = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        written
    });
    let mut versions: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (a, v) in written {
        versions.entry(a).or_default().push(v);
    }
    let mut sum = 0;
    for i in 0..ACCOUNTS {
        let (balance, version) = decode(&tree.get(&account(i)).unwrap().unwrap());
        sum += balance;
        let mut seen = versions.remove(&i).unwrap_or_default();
        seen.sort_unstable();
        let want: Vec<u64> = (1..=version).collect();
        assert_eq!(seen, want, "account {i}: committed versions are not 1..={version} exactly once each");
    }
    assert_eq!(sum, ACCOUNTS * START);
    assert_eq!(tree.approximate_len().unwrap(), ACCOUNTS);
}

#[test]
fn concurrent_transfers_are_serializable() {
    let sim = SimStorage::new(3);
    let trees = common::create(&sim).unwrap();
    run(&trees, 6, 150);
    common::assert_fsck_clean(&trees);
}

#[test]
fn concurrent_durable_transactions_share_log_syncs() {
    let tmp = tempfile::tempdir().unwrap();
    let trees = Trees::open_dir(&tmp.path().join("store")).unwrap();
    let tree = Arc::new(trees.open_tree("t").unwrap());
    let before = trees.store().log_stats();
    const THREADS: u64 = 8;
    const EACH: u64 = 30;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let tree = tree.clone();
            s.spawn(move || {
                for i in 0..EACH {
                    tree.insert(format!("{t}/{i}").as_bytes(), &[7u8; 100]).unwrap();
                }
            });
        }
    });
    let after = trees.store().log_stats();
    let records = after.records - before.records;
    let syncs = after.syncs - before.syncs;
    assert!(records >= THREADS * EACH, "{records} records");
    assert!(syncs < records, "{syncs} syncs for {records} durable records: no sync was shared");
    assert_eq!(tree.approximate_len().unwrap(), THREADS * EACH);
}
