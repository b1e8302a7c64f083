//! The heap across processes on the real file system: bytes synced, their
//! pages dropped from the page cache, read by a new process (so they come
//! from disk); and a process killed with SIGKILL in the middle of an
//! allocation loop, after which the heap is consistent and holds
//! everything before its last acknowledged sync. Children are this test
//! binary re-run on the ignored `child` test.
#![allow(clippy::unwrap_used, unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use larder_heap::{Heap, ObjectId};

use common::{heap, real_store};

const OBJECTS: u64 = 6;

fn pattern(i: u64, len: u64) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8 | 1).collect()
}

/// Re-runs this binary as a child in `mode` on `dir`.
fn spawn_child(mode: &str, dir: &Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("LARDER_HEAP_CHILD", mode)
        .env("LARDER_HEAP_DIR", dir);
    command
}

/// The child's side; run only by the tests below.
#[test]
#[ignore = "a child process of the tests in this file"]
fn child() {
    let mode = std::env::var("LARDER_HEAP_CHILD").unwrap();
    let dir = std::path::PathBuf::from(std::env::var("LARDER_HEAP_DIR").unwrap());
    let store = real_store(&dir);
    let h = heap(&store);
    let mut out = std::io::stdout().lock();
    match mode.as_str() {
        "read" => {
            for i in 0..OBJECTS {
                let object = h.get_by_name(&format!("o{i}")).unwrap();
                let len = h.size(object).unwrap();
                let mut got = vec![0u8; len as usize];
                h.read_at(object, 0, &mut got).unwrap();
                assert_eq!(got, pattern(i, len), "object {i}");
                // Through the mapping as well.
                let p = h.pointer(object).unwrap();
                let last = unsafe { *p.add(len as usize - 1) };
                assert_eq!(last, pattern(i, len)[len as usize - 1]);
            }
            writeln!(out, "read {OBJECTS}").unwrap();
        }
        "alloc-loop" => {
            for i in 0u64.. {
                let object = h.alloc(1000 + i).unwrap();
                h.write_at(object, 0, &pattern(i, 1000 + i)).unwrap();
                h.add_name(object, &format!("o{i}")).unwrap();
                if i % 5 == 4 {
                    h.sync().unwrap();
                    writeln!(out, "synced {i}").unwrap();
                    out.flush().unwrap();
                }
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// Pages of `path` resident in the page cache.
fn resident_pages(path: &Path) -> usize {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    if len == 0 {
        return 0;
    }
    let page = 4096;
    let pages = len.div_ceil(page);
    // SAFETY: a private read-only mapping of a file this test owns, only
    // inspected with mincore and unmapped before returning.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED);
        let mut vec = vec![0u8; pages];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        vec.iter().filter(|v| *v & 1 != 0).count()
    }
}

fn drop_cache(path: &Path) {
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: fadvise on a descriptor this test owns.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

#[test]
fn synced_bytes_come_from_disk_in_a_new_process() {
    // Under target/, not /tmp, which may be a tmpfs whose pages cannot be dropped.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    {
        let store = real_store(dir.path());
        let h = heap(&store);
        for i in 0..OBJECTS {
            let len = 3000 + 5000 * i;
            let object = h.alloc(len).unwrap();
            // Through the mapping, as a program would.
            let p = h.pointer(object).unwrap();
            let bytes = pattern(i, len);
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
            h.add_name(object, &format!("o{i}")).unwrap();
        }
        h.close().unwrap();
        std::sync::Arc::into_inner(store).unwrap().close().unwrap();
    }
    let heap_dir = dir.path().join(larder_object::HEAP_DIR);
    let mut files = 0;
    for entry in std::fs::read_dir(&heap_dir).unwrap() {
        let path = entry.unwrap().path();
        drop_cache(&path);
        assert_eq!(resident_pages(&path), 0, "{} still cached", path.display());
        files += 1;
    }
    assert_eq!(files, OBJECTS);
    let output = spawn_child("read", dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("read {OBJECTS}")), "{stdout}");
}

#[test]
fn kill_9_mid_alloc_loop_keeps_everything_before_the_last_sync() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let mut process = spawn_child("alloc-loop", dir.path()).stdout(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let mut acknowledged = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(i) = line.strip_prefix("synced ") {
                let i: u64 = i.trim().parse().unwrap();
                acknowledged = Some(i);
                if i >= 24 + 10 * round {
                    break;
                }
            }
        }
        process.kill().unwrap();
        process.wait().unwrap();
        let acknowledged = acknowledged.unwrap();

        let store = real_store(dir.path());
        let h: Heap = heap(&store);
        for i in 0..=acknowledged {
            let object = h.get_by_name(&format!("o{i}")).unwrap_or_else(|e| panic!("round {round}: o{i}: {e}"));
            let mut got = vec![0u8; 1000 + i as usize];
            h.read_at(object, 0, &mut got).unwrap();
            assert_eq!(got, pattern(i, 1000 + i), "round {round}: object o{i}");
        }
        // Files and records agree; every object attaches whole.
        let records: Vec<u64> = h.objects().unwrap().iter().map(|o| o.0).collect();
        assert_eq!(store.list_heap_files().unwrap().0, records, "round {round}");
        for id in &records {
            h.get(ObjectId(*id)).unwrap();
        }
        // The next round starts over on a clean heap.
        for id in records {
            h.free(ObjectId(id)).unwrap();
        }
        h.close().unwrap();
        std::sync::Arc::into_inner(store).unwrap().close().unwrap();
    }
}
