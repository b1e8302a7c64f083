//! A full file system through the mount: a store made by `larder init` on
//! a 256 MiB ext4 image (loop-mounted: needs root, and FUSE for `larder
//! mount`; the test FAILS without them unless `LARDER_SKIP_ROOT=1`) is
//! filled with fsynced 1 MiB files until a write gets ENOSPC; then removes
//! succeed and their space goes back to ext4, writes go on, every fsynced
//! file is there with its bytes, and fsck is clean.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{fsck_clean, larder, Mount};
use loop_mount::LoopMount;

#[path = "../../kv/tests/common/loop_mount.rs"]
mod loop_mount;

const FILE: usize = 1 << 20;

fn content(i: u32) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; FILE];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// Writes and fsyncs 1 MiB files from `next` on until one gets ENOSPC;
/// returns how many were written. The file that failed is removed. With
/// `available` (ext4's free bytes), an ENOSPC is final only once ext4
/// stops gaining space: the store punches freed space back in the
/// background, and a write may run out while a punch is still on its way.
fn fill(dir: &Path, kept: &mut Vec<u32>, next: &mut u32, available: Option<&dyn Fn() -> u64>) -> u32 {
    let mut written = 0;
    loop {
        let path = dir.join(format!("f{:05}", *next));
        let result = std::fs::File::create(&path).and_then(|mut f| {
            f.write_all(&content(*next))?;
            f.sync_all()
        });
        match result {
            Ok(()) => {
                kept.push(*next);
                written += 1;
                *next += 1;
            }
            Err(e) => {
                assert_eq!(
                    e.raw_os_error(),
                    Some(rustix::io::Errno::NOSPC.raw_os_error()),
                    "a write failed for another reason than space: {e}"
                );
                if path.exists() {
                    std::fs::remove_file(&path).unwrap();
                }
                let Some(available) = available else { return written };
                let after_failure = available();
                let deadline = Instant::now() + Duration::from_secs(3);
                while available() <= after_failure {
                    if Instant::now() > deadline {
                        return written;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        assert!(written < 1000, "256 MiB never ran out");
    }
}

/// Each file under `dir` with its length and the bytes ext4 gave it, a
/// line each: where a store's space went.
fn disk_use(dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut lines = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                todo.push(e.path());
            } else {
                lines.push(format!("  {} {} bytes, {} allocated", e.path().display(), m.len(), m.blocks() * 512));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

#[test]
fn a_full_file_system_through_the_mount_refuses_writes_and_gives_space_back_on_remove() {
    if !common::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(ext4) = LoopMount::for_test(256 << 20) else { return };
    let store = ext4.mnt.join("store");
    let out = larder(&["init", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let at_start = ext4.available();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = Mount::start(&store, &mnt, &[]);
    let mut kept = Vec::new();
    let mut next = 0;
    let first = fill(&mnt, &mut kept, &mut next, None);
    let full = ext4.available();
    eprintln!(
        "full: {first} files of 1 MiB, {:.1}% of the {at_start} bytes available after init; {full} left",
        (first as u64 * FILE as u64) as f64 * 100.0 / at_start as f64
    );
    assert!(first as u64 * FILE as u64 >= at_start * 9 / 10, "only {first} MiB fit in {at_start} bytes");
    // Remove every other file: each remove succeeds on the full disk.
    let removed: Vec<u32> = kept.iter().copied().step_by(2).collect();
    for i in &removed {
        std::fs::remove_file(mnt.join(format!("f{i:05}"))).unwrap();
    }
    kept.retain(|i| i % 2 == 1);
    let deleted = removed.len() as u64 * FILE as u64;
    // The store checkpoints for the freed space and punches it back to
    // ext4 in the background (64 MiB/s). While ext4 is full it punches
    // every freed block; once it is not, it keeps up to a quarter of its
    // container space free for reuse (punch_free_threshold) and returns
    // the rest, so how much comes back depends on when the frees are
    // released: at least what lies beyond that quarter must.
    let owed = deleted.saturating_sub(first as u64 * FILE as u64 / 4) * 9 / 10;
    let deadline = Instant::now() + Duration::from_secs(60);
    let returned = loop {
        let returned = ext4.available().saturating_sub(full);
        if returned >= deleted * 8 / 10 || Instant::now() > deadline {
            break returned;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("removed {deleted} bytes of files; {returned} bytes went back to ext4 (at least {owed} owed)");
    assert!(returned >= owed, "removed {deleted} bytes, ext4 got {returned} back, under the {owed} owed");
    let second = fill(&mnt, &mut kept, &mut next, Some(&|| ext4.available()));
    eprintln!("{second} more files fit after the removes");
    if (second as usize) * 10 < removed.len() * 9 {
        let (available, files) = (ext4.available(), disk_use(&store));
        m.stop();
        let stats = larder(&["stats", store.to_str().unwrap()]);
        panic!(
            "after removing {} files only {second} fit; ext4 has {available} bytes free; the store's files:\n{files}\n\
             its stats once unmounted:\n{}{}",
            removed.len(),
            String::from_utf8_lossy(&stats.stdout),
            String::from_utf8_lossy(&stats.stderr)
        );
    }
    for &i in &kept {
        assert!(std::fs::read(mnt.join(format!("f{i:05}"))).unwrap() == content(i), "f{i:05} lost or changed");
    }
    m.stop();
    fsck_clean(&store);
}
