//! Many clients over several workers: files spread over the workers, so
//! requests on open files are redirected to their owners; everything each
//! client wrote is there afterwards, and the store is clean.
#![allow(clippy::unwrap_used)]

mod serving;

use std::io::Write;

use larder_client::{Durability, OpenOptions};
use serving::{limits, pattern, serve_with};

const THREADS: usize = 4;
const FILES: usize = 24;

fn size(thread: usize, file: usize) -> usize {
    // From empty to past one ring record (64 KiB), so writes go inline
    // and through buffers.
    [0, 1, 4095, 20_000, 70_000, 200_000][(thread + file) % 6]
}

fn seed(thread: usize, file: usize) -> u64 {
    (thread * 1000 + file) as u64
}

#[test]
fn four_clients_over_three_workers_see_correct_data() {
    let mut t = serve_with(limits(3..=3));
    let setup = t.client();
    setup.create_bucket("b").unwrap();
    drop(setup);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let c = t.client();
            scope.spawn(move || {
                let dir = format!("/t{thread}");
                c.create_dir(&dir, 0o755).unwrap();
                // Several files open at once, written in pieces
                // interleaved, so handles of every worker are in use.
                let mut open: Vec<_> = (0..FILES)
                    .map(|file| {
                        OpenOptions::new()
                            .read(true)
                            .write(true)
                            .create(true)
                            .open(&c, format!("{dir}/f{file}"))
                            .unwrap()
                    })
                    .collect();
                let data: Vec<Vec<u8>> =
                    (0..FILES).map(|file| pattern(size(thread, file), seed(thread, file))).collect();
                for piece in 0..4 {
                    for (file, handle) in open.iter_mut().enumerate() {
                        let bytes = &data[file];
                        let quarter = bytes.len().div_ceil(4);
                        let start = (piece * quarter).min(bytes.len());
                        let end = ((piece + 1) * quarter).min(bytes.len());
                        handle.write_all(&bytes[start..end]).unwrap();
                    }
                }
                for (file, handle) in open.iter().enumerate() {
                    handle.sync_all().unwrap();
                    assert_eq!(handle.metadata().unwrap().len(), data[file].len() as u64);
                    let mut back = vec![0u8; data[file].len()];
                    let mut read = 0;
                    while read < back.len() {
                        read += handle.read_at(&mut back[read..], read as u64).unwrap();
                    }
                    assert!(back == data[file], "thread {thread} file {file} read through its handle");
                }
                drop(open);
                for (file, bytes) in data.iter().enumerate() {
                    let key = format!("t{thread}/k{file}");
                    c.put("b", &key, bytes, Durability::Buffered).unwrap();
                }
            });
        }
    });
    let counters = t.server().worker_counters();
    assert_eq!(counters.len(), 3);
    assert!(counters.iter().all(|w| w.requests > 0), "every worker executed requests: {counters:?}");
    assert!(counters.iter().map(|w| w.redirects).sum::<u64>() > 0, "requests were redirected: {counters:?}");

    // A fresh client sees everything every client wrote.
    let check = t.client();
    for thread in 0..THREADS {
        let mut names: Vec<String> = check
            .read_dir(format!("/t{thread}"))
            .unwrap()
            .map(|e| String::from_utf8(e.unwrap().name).unwrap())
            .collect();
        names.sort();
        let mut expected: Vec<String> = (0..FILES).map(|f| format!("f{f}")).collect();
        expected.sort();
        assert_eq!(names, expected);
        for file in 0..FILES {
            let want = pattern(size(thread, file), seed(thread, file));
            assert!(check.read(format!("/t{thread}/f{file}")).unwrap() == want, "thread {thread} file {file}");
            let key = format!("t{thread}/k{file}");
            assert!(check.get("b", &key).unwrap() == Some(want), "{key}");
        }
    }
    drop(check);
    t.wait_for_clients(0);
    t.assert_fsck_clean();
}

#[test]
fn one_client_shared_by_threads_over_two_workers() {
    let mut t = serve_with(limits(2..=2));
    let c = t.client();
    c.create_bucket("b").unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let c = c.clone();
            scope.spawn(move || {
                let file =
                    OpenOptions::new().read(true).write(true).create(true).open(&c, format!("/s{thread}")).unwrap();
                for round in 0..50usize {
                    let value = pattern(round * 97 % 30_000, (thread * 100 + round) as u64);
                    c.put("b", format!("t{thread}/{round}"), &value, Durability::Buffered).unwrap();
                    file.write_at(&value, 0).unwrap();
                    assert!(c.get("b", format!("t{thread}/{round}")).unwrap() == Some(value.clone()));
                    let mut back = vec![0u8; value.len()];
                    let mut read = 0;
                    while read < back.len() {
                        read += file.read_at(&mut back[read..], read as u64).unwrap();
                    }
                    assert!(back == value, "thread {thread} round {round}");
                }
            });
        }
    });
    assert_eq!(c.scan("b", b"", None).count(), 200);
    drop(c);
    t.wait_for_clients(0);
    t.assert_fsck_clean();
}

/// A dropped file's release is posted on its owner's ring without waiting;
/// a later call of the client on another worker waits for it first, and a
/// posted release redirected (its file moved) is sent again where the
/// file went. Either way the file, unlinked while open, is freed once
/// that later call is answered.
#[test]
fn posted_releases_land_before_the_next_call_on_any_worker() {
    let t = serve_with(limits(2..=2));
    let server = t.server();
    let first = t.client();
    let second = t.client();
    for (round, move_it) in [(0, false), (1, true)] {
        let path = format!("/posted{round}");
        first.write(&path, &pattern(10_000, round)).unwrap();
        // The file's owner is the home of the client that opened it first.
        let held = first.open(&path).unwrap();
        let ino = held.ino();
        let owner = server.file_owner(ino).unwrap();
        let other = second.open(&path).unwrap();
        // `second` reads, so its requests reach the owner (redirected).
        let mut out = vec![0u8; 10_000];
        assert_eq!(other.read_at(&mut out, 0).unwrap(), 10_000);
        second.remove_file(&path).unwrap();
        held.close().unwrap();
        assert_eq!(t.orphans(), 1, "kept while second has it open");
        if move_it {
            assert!(server.move_file(ino, 1 - owner));
        }
        drop(other);
        // A call that goes to the primary or second's home, whichever ring
        // the release went to.
        second.metadata("/").unwrap();
        assert_eq!(t.orphans(), 0, "round {round}: freed at the last close");
    }
    let counters = server.worker_counters();
    assert!(counters.iter().all(|c| c.requests > 0), "both workers served: {counters:?}");
}
