//! A full file system through the KV API on a real one: a 256 MiB ext4
//! image, loop-mounted (so the test needs root: it FAILS without it unless
//! `LARDER_SKIP_ROOT=1`). A store created as `larder init` creates it is
//! filled with 1 MiB values until ENOSPC; then deletes succeed, their space
//! goes back to the file system (available bytes measured), puts go on,
//! nothing acknowledged is lost, and fsck is clean.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use larder_kv::{Durability, Kv, KvOptions};
use larder_object::CreationOptions;

#[path = "common/loop_mount.rs"]
mod loop_mount;

use loop_mount::LoopMount;

const IMAGE_BYTES: u64 = 256 << 20;
const VALUE: usize = 1 << 20;

fn value(i: u32) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; VALUE];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// Durable puts from `next` on until one gets ENOSPC; returns how many fit.
fn fill(kv: &Kv, model: &mut BTreeMap<String, u32>, next: &mut u32) -> u32 {
    let mut stored = 0;
    loop {
        let key = format!("k{:05}", *next);
        match kv.put("b", &key, &value(*next), Durability::Durable) {
            Ok(()) => {
                model.insert(key, *next);
                stored += 1;
                *next += 1;
            }
            Err(e) => {
                assert!(e.is_no_space(), "a put failed for another reason than space: {e}");
                assert_eq!(kv.get("b", &key).unwrap(), None, "a refused put left its value");
                return stored;
            }
        }
        assert!(stored < 1000, "256 MiB never ran out");
    }
}

fn check(kv: &Kv, model: &BTreeMap<String, u32>) {
    for (k, &i) in model {
        assert!(kv.get("b", k).unwrap() == Some(value(i)), "{k} lost or changed");
    }
    assert_eq!(kv.scan_prefix("b", b"").unwrap().count(), model.len());
}

#[test]
fn a_full_ext4_file_system_refuses_puts_and_gives_space_back_on_delete() {
    let Some(mount) = LoopMount::for_test(IMAGE_BYTES) else { return };
    let dir = mount.mnt.join("store");
    let (fs_bytes, available_at_start) = (mount.total(), mount.available());
    // As `larder init` makes it: sizes fitted to the file system.
    let options = KvOptions { creation: CreationOptions::fitted_to(available_at_start), ..KvOptions::default() };
    let kv = Kv::create(&dir, options.clone()).unwrap();
    kv.create_bucket("b").unwrap();
    let mut model = BTreeMap::new();
    let mut next = 0;
    let first = fill(&kv, &mut model, &mut next);
    let available_full = mount.available();
    let data = u64::from(first) * VALUE as u64;
    let percent = |n: u64, of: u64| n as f64 * 100.0 / of as f64;
    eprintln!(
        "full: {first} values of 1 MiB = {:.1}% of the file system's {fs_bytes} bytes, {:.1}% of the {available_at_start} available at start; {available_full} left",
        percent(data, fs_bytes),
        percent(data, available_at_start),
    );
    // Within a few percent: the log (two 4 MiB segments) and the reserve
    // (a segment, the index, 2 MiB).
    assert!(percent(data, available_at_start) >= 92.0, "filled only {first} MiB of {available_at_start} bytes");
    // Delete half: every delete succeeds on the full file system.
    let mut deleted = 0u64;
    for i in (0..next).step_by(2) {
        assert!(kv.delete("b", format!("k{i:05}"), Durability::Durable).unwrap());
        model.remove(&format!("k{i:05}"));
        deleted += VALUE as u64;
    }
    // Once the index covers the deletes their space is released and
    // punched back to the file system.
    kv.store().checkpoint().unwrap();
    // Punching is rate-limited; on a machine busy with other work it can
    // take a while to catch up, so the wait is long, and ends as soon as
    // the space is back. While ext4 is full every freed block is punched;
    // once it is not, the store keeps up to a quarter of its container
    // space free for reuse (punch_free_threshold) and returns the rest, so
    // how much comes back depends on when the frees are released: at
    // least what lies beyond that quarter must.
    let owed = deleted.saturating_sub(data / 4) * 9 / 10;
    let deadline = Instant::now() + Duration::from_secs(120);
    let returned = loop {
        kv.store().space().punch_some(Instant::now()).unwrap();
        let available = mount.available();
        let returned = available.saturating_sub(available_full);
        if returned >= deleted * 8 / 10 || Instant::now() > deadline {
            break returned;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!(
        "deleted {deleted} bytes of values; {returned} bytes went back to the file system (at least {owed} owed)"
    );
    assert!(returned >= owed, "deleted {deleted} bytes, the file system got {returned} back, under the {owed} owed");
    // Puts go on into the space the deletes freed.
    let second = fill(&kv, &mut model, &mut next);
    eprintln!("{second} more values fit after the deletes");
    assert!(second * 10 >= first / 2 * 9, "after deleting {} values only {second} fit again", first / 2);
    check(&kv, &model);
    kv.close().unwrap();
    let kv = Kv::open(&dir, options).unwrap();
    check(&kv, &model);
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
    kv.close().unwrap();
}
