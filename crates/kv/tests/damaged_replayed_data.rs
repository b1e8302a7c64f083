//! A large value damaged on disk while its log record still waits for a
//! checkpoint (the store crashed after acknowledging it): the store opens,
//! a get of that value reports corruption naming the container, the other
//! values read back, and the key can be written again (what a replicated
//! user such as Garage's block store does to repair it). Before, open
//! refused the whole store over the one damaged value.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_kv::Kv;
use larder_object::Durability;

/// Bytes unique to `seed` and the position.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Flips one byte in every copy of `needle` under `dir`; returns how many.
fn damage_every_copy(dir: &Path, needle: &[u8]) -> usize {
    let mut damaged = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let mut bytes = std::fs::read(&path).unwrap();
            let mut changed = false;
            let mut at = 0;
            while let Some(found) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
                bytes[at + found + 7] ^= 0x5a;
                at += found + needle.len();
                changed = true;
                damaged += 1;
            }
            if changed {
                std::fs::write(&path, &bytes).unwrap();
            }
        }
    }
    damaged
}

#[test]
fn damaged_data_of_an_acknowledged_record_reads_as_corrupt_and_can_be_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let damaged = pattern(1, 300_000);
    let kept = pattern(2, 300_000);
    {
        let kv = Kv::create(&dir, common::options()).unwrap();
        kv.create_bucket("blocks").unwrap();
        kv.put("blocks", "kept", &kept, Durability::Durable).unwrap();
        kv.store().checkpoint().unwrap();
        kv.put("blocks", "damaged", &damaged, Durability::Durable).unwrap();
        kv.put("blocks", "small", b"inline", Durability::Durable).unwrap();
        let store = kv.store();
        assert!(store.index().durable_seq() < store.durable_lsn(), "records left to replay");
        // Dropped without a close: the records above are replayed at open.
    }
    assert_eq!(damage_every_copy(&dir, &damaged[150_000..150_064]), 1);

    let kv = Kv::open(&dir, common::options()).unwrap();
    let e = kv.get("blocks", "damaged").unwrap_err();
    assert!(e.is_corrupt(), "{e}");
    assert!(e.to_string().contains(".ctr"), "names the container: {e}");
    assert_eq!(kv.get("blocks", "kept").unwrap().unwrap(), kept);
    assert_eq!(kv.get("blocks", "small").unwrap().unwrap(), b"inline".to_vec());
    assert!(kv.head("blocks", "damaged").unwrap().is_some());

    // A good copy from elsewhere replaces it, and survives a reopen.
    kv.put("blocks", "damaged", &damaged, Durability::Durable).unwrap();
    assert_eq!(kv.get("blocks", "damaged").unwrap().unwrap(), damaged);
    kv.close().unwrap();
    let kv = Kv::open(&dir, common::options()).unwrap();
    assert_eq!(kv.get("blocks", "damaged").unwrap().unwrap(), damaged);
    assert_eq!(kv.get("blocks", "kept").unwrap().unwrap(), kept);
}

#[test]
fn a_record_above_the_acknowledged_one_with_damaged_data_still_ends_the_log() {
    // The newest record, which no later header may prove acknowledged:
    // its damaged data is either a torn write (the log ends before it and
    // the key is absent) or, if proven acknowledged, replayed and read as
    // corrupt. Never a refused store, never the damaged bytes.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let first = pattern(3, 200_000);
    let last = pattern(4, 200_000);
    {
        let kv = Kv::create(&dir, common::options()).unwrap();
        kv.create_bucket("blocks").unwrap();
        kv.put("blocks", "first", &first, Durability::Durable).unwrap();
        kv.put("blocks", "last", &last, Durability::Durable).unwrap();
    }
    assert_eq!(damage_every_copy(&dir, &last[100_000..100_064]), 1);
    let kv = Kv::open(&dir, common::options()).unwrap();
    assert_eq!(kv.get("blocks", "first").unwrap().unwrap(), first);
    match kv.get("blocks", "last") {
        Ok(None) => (),
        Err(e) => assert!(e.is_corrupt(), "{e}"),
        Ok(Some(v)) => panic!("the damaged value read back as {} bytes", v.len()),
    }
}
