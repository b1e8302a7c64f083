//! The leased client keeps its own writes in its cached pages; whatever it
//! then reads back must be the store's bytes (as another, uncached client
//! reads them) and what ext4 would give: after truncates, appends,
//! zero-copy writes, renames and unlinks of the file, writes refused or
//! failed, and writes of two threads at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{read_through, write_both};
use larder_client::{Client, File, OpenOptions};
use larder_server::Limits;

fn long_term() -> Limits {
    Limits { lease_term: Duration::from_secs(30), ..Limits::default() }
}

fn bytes(length: usize, seed: usize) -> Vec<u8> {
    (0..length).map(|b| (b * 7 + seed) as u8).collect()
}

/// A served store, a leased client and an uncached one.
fn clients() -> (larder_server::Server, tempfile::TempDir, Client, Client) {
    let (server, dir, store) = common::served(long_term());
    let leased = Client::connect(&store).unwrap();
    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    (server, dir, leased, plain)
}

/// Creates `path` read-write through `client` and writes `data` by waited
/// writes; returns the open file.
fn created(client: &Client, path: &str, data: &[u8]) -> File {
    let file = OpenOptions::new().read(true).write(true).create(true).open(client, path).unwrap();
    assert_eq!(file.write_at(data, 0).unwrap(), data.len());
    file
}

/// A write posted through a read-only open is refused (EBADF, as ext4
/// refuses it at once); a read meanwhile gives the file's bytes, not the
/// refused write's.
#[test]
fn a_refused_posted_write_is_never_read_back() {
    let (_server, _dir, client, plain) = clients();
    let data = bytes(10_000, 1);
    // Written and closed: not kept open (a truncating create), so the
    // read-only open below has a read-only handle of its own.
    client.write("/f", &data).unwrap();
    let file = client.open("/f").unwrap();
    assert_eq!(read_through(&file), data);
    let refused = file.write_posted(b"zz", 0);
    assert!(read_through(&file) == data, "a read after a refused posted write returned other bytes");
    let later = refused.and_then(|()| file.sync_all());
    assert_eq!(later.unwrap_err().errno(), libc::EBADF);
    assert_eq!(plain.read("/f").unwrap(), data);
    assert_eq!(client.read("/f").unwrap(), data);
}

/// Truncates and extensions through the creating client: what it reads
/// back is the store's.
#[test]
fn truncates_and_extensions_keep_the_cache_equal_to_the_store() {
    let (_server, _dir, client, plain) = clients();
    let mut model = bytes(20_000, 2);
    let file = created(&client, "/f", &model);
    // (new length, then a write at, its length)
    let steps: [(u64, u64, usize); 5] = [(100, 5000, 10), (4096, 4096, 1), (0, 3, 4096), (9000, 0, 1), (8192, 8191, 2)];
    for (n, (length, at, count)) in steps.into_iter().enumerate() {
        file.set_len(length).unwrap();
        model.resize(length as usize, 0);
        assert_eq!(read_through(&file), model, "step {n}, after the truncate");
        write_both(&file, &mut model, at, &vec![n as u8 + 1; count], n % 2 == 0);
        assert_eq!(read_through(&file), model, "step {n}, after the write");
        assert_eq!(plain.read("/f").unwrap(), model, "step {n}: the store");
        assert_eq!(client.read("/f").unwrap(), model, "step {n}: by path");
    }
}

/// Writes through an O_APPEND open and from a zero-copy buffer: the
/// creator reads back the store's bytes through its other open.
#[test]
fn appends_and_buffer_writes_are_read_back_as_stored() {
    let (_server, _dir, client, plain) = clients();
    let mut model = bytes(5000, 3);
    let file = created(&client, "/f", &model);
    assert_eq!(read_through(&file), model);
    let append = OpenOptions::new().append(true).open(&client, "/f").unwrap();
    for n in 0..3 {
        let data = vec![0x40 + n as u8; 3000];
        // The offset is ignored: O_APPEND writes at the end.
        if n % 2 == 0 {
            append.write_posted(&data, 0).unwrap();
        } else {
            append.write_at(&data, 0).unwrap();
        }
        model.extend_from_slice(&data);
        assert_eq!(read_through(&file), model, "append {n}");
    }
    let mut buffer = client.alloc_buffer(6000).unwrap();
    buffer.as_mut_slice().fill(0x77);
    assert_eq!(file.write_buffer(&buffer, 1000).unwrap(), 6000);
    model[1000..7000].fill(0x77);
    assert_eq!(read_through(&file), model, "after the buffer write");
    assert_eq!(plain.read("/f").unwrap(), model);
}

/// The created file renamed, then unlinked, while open: the creator's
/// writes and reads through its open still agree with the store.
#[test]
fn a_renamed_then_unlinked_file_reads_back_its_writes() {
    let (_server, _dir, client, plain) = clients();
    let mut model = bytes(9000, 4);
    let file = created(&client, "/f", &model);
    client.rename("/f", "/g").unwrap();
    file.write_posted(&[1; 100], 50).unwrap();
    model[50..150].fill(1);
    assert_eq!(read_through(&file), model);
    assert_eq!(plain.read("/g").unwrap(), model);
    assert_eq!(client.read("/g").unwrap(), model);
    // Replaced by another file of the same name, then unlinked.
    client.write("/h", b"other").unwrap();
    client.rename("/h", "/g").unwrap();
    file.write_at(&[2; 5000], 8000).unwrap();
    model.resize(13_000, 0);
    model[8000..13_000].fill(2);
    assert_eq!(read_through(&file), model);
    assert_eq!(client.read("/g").unwrap(), b"other");
    assert_eq!(plain.read("/g").unwrap(), b"other");
}

/// Another client's truncate and write of the creator's file: the creator
/// reads the new bytes.
#[test]
fn another_clients_truncate_is_read_by_the_creator() {
    let (_server, _dir, client, plain) = clients();
    let model = bytes(12_000, 5);
    let file = created(&client, "/f", &model);
    assert_eq!(read_through(&file), model);
    let other = OpenOptions::new().write(true).open(&plain, "/f").unwrap();
    other.set_len(10).unwrap();
    assert_eq!(read_through(&file), model[..10]);
    other.write_at(b"abc", 20).unwrap();
    let mut expected = model[..10].to_vec();
    expected.resize(23, 0);
    expected[20..].copy_from_slice(b"abc");
    assert_eq!(read_through(&file), expected);
    assert_eq!(client.read("/f").unwrap(), expected);
}

/// Two threads of the creating client write one file at once, one by
/// waited writes, the other by posted ones, over the same pages; after
/// both, the creator reads the store's bytes.
#[test]
fn two_threads_writing_one_file_leave_the_cache_equal_to_the_store() {
    let (_server, _dir, client, plain) = clients();
    for round in 0..20 {
        let path = format!("/f{round}");
        let file = created(&client, &path, &bytes(16 << 10, round));
        drop(file);
        std::thread::scope(|s| {
            for thread in 0..2 {
                let client = client.clone();
                let path = path.clone();
                s.spawn(move || {
                    let file = OpenOptions::new().read(true).write(true).open(&client, &path).unwrap();
                    for n in 0..50usize {
                        let offset = ((n * 1237 + thread * 3001) % (20 << 10)) as u64;
                        let data = vec![(thread * 100 + n) as u8; 1 + (n * 331) % 5000];
                        if thread == 0 {
                            file.write_at(&data, offset).unwrap();
                        } else {
                            file.write_posted(&data, offset).unwrap();
                        }
                        let mut probe = [0u8; 1];
                        file.read_at(&mut probe, offset).unwrap();
                    }
                    file.sync_all().unwrap();
                });
            }
        });
        client.ping().unwrap();
        let stored = plain.read(&path).unwrap();
        assert_eq!(client.read(&path).unwrap(), stored, "round {round}");
    }
}

/// The creator's lease runs out, another client rewrites the file, and the
/// creator writes through its open and takes a lease again (by opening
/// and reading): it reads the store's bytes, not its pages from before.
#[test]
fn a_lease_run_out_and_taken_again_keeps_no_stale_pages() {
    let term = Duration::from_millis(200);
    let (_server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let client = Client::connect(&store).unwrap();
    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    let model = bytes(12_000, 6);
    let file = created(&client, "/f", &model);
    assert!(read_through(&file) == model);
    // The term passes: the lease runs out without a revocation.
    std::thread::sleep(term + term / 2);
    let other = OpenOptions::new().write(true).open(&plain, "/f").unwrap();
    other.write_at(&[9; 6000], 3000).unwrap();
    file.write_posted(&[8; 10], 0).unwrap();
    client.ping().unwrap();
    let stored = plain.read("/f").unwrap();
    let mut expected = model.clone();
    expected[3000..9000].fill(9);
    expected[..10].fill(8);
    assert!(stored == expected, "the store");
    assert!(client.read("/f").unwrap() == expected, "read by path after the lease ran out");
    assert!(read_through(&file) == expected, "read through the open");
    let again = client.open("/f").unwrap();
    assert!(read_through(&again) == expected, "read through a new open");
}

/// A posted write past the largest file size fails (EFBIG, as ext4's
/// write does at once): a read meanwhile gives the file's bytes and end,
/// not the failed write's.
#[test]
fn a_posted_write_past_the_largest_size_is_never_read_back() {
    let (_server, _dir, client, plain) = clients();
    let model = bytes(5000, 7);
    let file = created(&client, "/f", &model);
    assert!(read_through(&file) == model);
    // Its end, 2 bytes past i64::MAX, the largest size.
    let far = i64::MAX as u64 - 1;
    let posted = file.write_posted(b"far", far);
    let mut probe = [0u8; 3];
    let at_far = file.read_at(&mut probe, far).unwrap();
    let whole = read_through(&file);
    let later = posted.and_then(|()| file.sync_all());
    assert_eq!(later.unwrap_err().errno(), libc::EFBIG);
    assert_eq!(at_far, 0, "a read at the failed write's offset");
    assert!(whole == model, "a read after the failed write returned {} bytes", whole.len());
    assert!(plain.read("/f").unwrap() == model);
}

/// A read whose range ends past u64::MAX reads nothing (ext4's pread gives
/// 0 or EINVAL there; it must not overflow).
#[test]
fn a_read_at_the_end_of_the_offsets_reads_nothing() {
    let (_server, _dir, client, _plain) = clients();
    let file = created(&client, "/f", &bytes(100, 8));
    let mut out = [0u8; 64];
    let read = file.read_at(&mut out, u64::MAX - 10).map_err(|e| e.errno());
    assert!(matches!(read, Ok(0) | Err(libc::EINVAL)), "{read:?}");
}

/// A read past the end of the creator's file caches the empty page that
/// says the file ends there; a write further on grows the file past it:
/// the hole before the write reads as zeros, not as the end (found by
/// `leases::two_caching_clients_always_read_the_latest_bytes`).
#[test]
fn a_read_past_the_end_then_a_write_beyond_reads_the_hole_as_zeros() {
    let (_server, _dir, client, plain) = clients();
    let file = created(&client, "/f", b"");
    let mut out = vec![0u8; 2633];
    assert_eq!(file.read_at(&mut out, 7586).unwrap(), 0);
    assert_eq!(file.write_at(&[186; 5756], 10_779).unwrap(), 5756);
    let mut model = vec![0u8; 10_779];
    model.extend_from_slice(&[186; 5756]);
    assert!(read_through(&file) == model, "the creator's read of the grown file");
    assert!(plain.read("/f").unwrap() == model);
}
