//! The fs layer's conformance tests (crates/fs/tests/files.rs, names.rs)
//! through a running server and `larder-client`, as far as the client's
//! `std::fs`-like API reaches: the same outcomes and the same errnos.
#![allow(clippy::unwrap_used)]

mod serving;

use std::collections::BTreeMap;

use larder_client::{Client, ClientError, OpenOptions};
use serving::{pattern, serve};

fn errno<T>(r: Result<T, ClientError>) -> i32 {
    r.map(|_| ()).unwrap_err().errno()
}

fn nlink(c: &Client, path: &str) -> u32 {
    c.symlink_metadata(path).unwrap().attributes.nlink
}

#[test]
fn reads_writes_appends_truncates_and_holes() {
    let t = serve();
    let c = t.client();
    let f = OpenOptions::new().read(true).write(true).create_new(true).open(&c, "/a").unwrap();
    assert_eq!(f.write_at(b"hello", 0).unwrap(), 5);
    let mut out = [0u8; 100];
    assert_eq!(f.read_at(&mut out, 0).unwrap(), 5);
    assert_eq!(&out[..5], b"hello");
    assert_eq!(f.read_at(&mut out, 3).unwrap(), 2);
    assert_eq!(f.read_at(&mut out, 10).unwrap(), 0);
    // Sparse: a write far past the end leaves a hole of zeros.
    f.write_at(b"tail", 1 << 20).unwrap();
    assert_eq!(f.metadata().unwrap().len(), (1 << 20) + 4);
    let mut mid = vec![0xEEu8; 8192];
    assert_eq!(f.read_at(&mut mid, 4096).unwrap(), 8192);
    assert!(mid.iter().all(|&b| b == 0));
    // Into a buffer: holes as zeros over what it held, and what is past
    // the end untouched.
    let mut buffer = c.alloc_buffer(12).unwrap();
    buffer.as_mut_slice().fill(0xEE);
    assert_eq!(f.read_buffer(&mut buffer, (1 << 20) - 8).unwrap(), 12);
    assert_eq!(buffer.as_slice(), b"\0\0\0\0\0\0\0\0tail");
    let mut buffer = c.alloc_buffer(6).unwrap();
    buffer.as_mut_slice().fill(0xEE);
    assert_eq!(f.read_buffer(&mut buffer, (1 << 20) + 2).unwrap(), 2);
    assert_eq!(buffer.as_slice(), b"il\xEE\xEE\xEE\xEE");
    drop(f);

    let ap = OpenOptions::new().append(true).open(&c, "/a").unwrap();
    ap.write_at(b"++", 0).unwrap();
    assert_eq!(c.metadata("/a").unwrap().len(), (1 << 20) + 6);
    assert_eq!(errno(ap.read_at(&mut out, 0)), libc::EBADF, "a write-only handle");
    let mut one = c.alloc_buffer(1).unwrap();
    assert_eq!(errno(ap.read_buffer(&mut one, 0)), libc::EBADF, "a write-only handle");
    drop(ap);

    let tr = OpenOptions::new().read(true).write(true).truncate(true).open(&c, "/a").unwrap();
    assert_eq!(c.metadata("/a").unwrap().len(), 0);
    tr.write_at(b"0123456789", 0).unwrap();
    tr.set_len(4).unwrap();
    assert_eq!(tr.read_at(&mut out, 0).unwrap(), 4);
    assert_eq!(&out[..4], b"0123");
    tr.set_len(8).unwrap();
    assert_eq!(tr.read_at(&mut out, 0).unwrap(), 8);
    assert_eq!(&out[..8], b"0123\0\0\0\0");
    tr.sync_all().unwrap();
    drop(tr);
    c.create_dir("/d", 0o755).unwrap();
    assert_eq!(errno(OpenOptions::new().read(true).write(true).open(&c, "/d")), libc::EISDIR);
    let ro = c.open("/a").unwrap();
    assert_eq!(errno(ro.write_at(b"x", 0)), libc::EBADF);
}

#[test]
fn an_unlinked_open_file_lives_until_its_last_close() {
    let t = serve();
    let c = t.client();
    let data = pattern(200_000, 7);
    let writer = OpenOptions::new().read(true).write(true).create(true).open(&c, "/a").unwrap();
    writer.write_at(&data, 0).unwrap();
    let second = c.open("/a").unwrap();
    c.remove_file("/a").unwrap();
    assert_eq!(errno(c.metadata("/a")), libc::ENOENT);
    assert_eq!(second.metadata().unwrap().attributes.nlink, 0);
    let mut back = vec![0u8; 300_000];
    let mut read = 0;
    loop {
        let n = second.read_at(&mut back[read..], read as u64).unwrap();
        if n == 0 {
            break;
        }
        read += n;
    }
    assert!(back[..read] == data[..]);
    writer.write_at(b"still writable", 0).unwrap();
    writer.close().unwrap();
    assert_eq!(second.metadata().unwrap().len(), 200_000, "one handle left");
    assert_eq!(t.orphans(), 1);
    // `close` waits for the release: the file is freed when it returns.
    second.close().unwrap();
    assert_eq!(t.orphans(), 0, "freed at its last close");
}

#[test]
fn renames_replace_move_and_refuse_cycles() {
    let t = serve();
    let c = t.client();
    c.write("/a", b"a").unwrap();
    c.write("/b", b"b").unwrap();
    let a = c.metadata("/a").unwrap().ino();
    c.rename("/a", "/b").unwrap();
    assert_eq!(c.metadata("/b").unwrap().ino(), a);
    assert_eq!(errno(c.metadata("/a")), libc::ENOENT);

    c.create_dir("/d1", 0o755).unwrap();
    c.create_dir("/d1/d2", 0o755).unwrap();
    let d2 = c.metadata("/d1/d2").unwrap().ino();
    assert_eq!(errno(c.rename("/d1", "/d1/d2/x")), libc::EINVAL);
    assert_eq!(errno(c.rename("/d1", "/d1/x")), libc::EINVAL);
    c.rename("/d1/d2", "/d2").unwrap();
    assert_eq!(c.metadata("/d2/..").unwrap().ino(), c.metadata("/").unwrap().ino(), "a moved directory's parent");
    assert_eq!(errno(c.rename("/b", "/d1")), libc::EISDIR);
    assert_eq!(errno(c.rename("/d1", "/b")), libc::ENOTDIR);
    c.write("/d1/inside", b"").unwrap();
    assert_eq!(errno(c.rename("/d2", "/d1")), libc::ENOTEMPTY);
    c.remove_file("/d1/inside").unwrap();
    c.rename("/d2", "/d1").unwrap();
    assert_eq!(c.metadata("/d1").unwrap().ino(), d2, "an empty directory is replaced");
    // Two names of one object: nothing happens.
    c.write("/c", b"c").unwrap();
    c.hard_link("/c", "/c2").unwrap();
    c.rename("/c", "/c2").unwrap();
    assert_eq!(c.metadata("/c").unwrap().ino(), c.metadata("/c2").unwrap().ino());
    assert_eq!(errno(c.rename("/missing", "/x")), libc::ENOENT);
}

#[test]
fn a_listing_returns_each_entry_present_throughout_exactly_once() {
    let t = serve();
    let c = t.client();
    c.create_dir("/d", 0o755).unwrap();
    // Enough for three of the client's pages.
    for i in 0..600 {
        c.write(format!("/d/keep{i:03}"), &[]).unwrap();
        c.write(format!("/d/gone{i:03}"), &[]).unwrap();
    }
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (round, entry) in c.read_dir("/d").unwrap().enumerate() {
        *seen.entry(entry.unwrap().name).or_default() += 1;
        // Meanwhile others come and go.
        if round < 600 {
            c.write(format!("/d/new{round:03}"), &[]).unwrap();
            c.remove_file(format!("/d/gone{round:03}")).unwrap();
        }
    }
    for i in 0..600 {
        assert_eq!(seen.get(format!("keep{i:03}").as_bytes()), Some(&1), "keep{i:03}");
    }
    assert!(seen.values().all(|&n| n == 1), "no entry twice");
    assert!(!seen.contains_key(&b"."[..]) && !seen.contains_key(&b".."[..]));
}

#[test]
fn create_lookup_and_the_errors_of_names() {
    let t = serve();
    let c = t.client();
    let a = OpenOptions::new().write(true).create_new(true).open(&c, "/a").unwrap();
    let meta = a.metadata().unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.mode(), 0o100_644);
    drop(a);
    assert_eq!(errno(OpenOptions::new().write(true).create_new(true).open(&c, "/a")), libc::EEXIST);
    assert_eq!(errno(c.create_dir("/a", 0o755)), libc::EEXIST);
    assert_eq!(errno(c.metadata("/missing")), libc::ENOENT);
    assert_eq!(errno(c.metadata("/a/x")), libc::ENOTDIR);
    assert_eq!(errno(c.create_dir("/a/x", 0o755)), libc::ENOTDIR);
    assert_eq!(errno(c.remove_dir("/a")), libc::ENOTDIR);
    c.create_dir("/d", 0o755).unwrap();
    assert_eq!(errno(c.remove_file("/d")), libc::EISDIR);
    c.write("/d/f", b"").unwrap();
    assert_eq!(errno(c.remove_dir("/d")), libc::ENOTEMPTY);
    let (root, d) = (c.metadata("/").unwrap().ino(), c.metadata("/d").unwrap().ino());
    assert_eq!(c.metadata("/d/..").unwrap().ino(), root);
    assert_eq!(c.metadata("/d/.").unwrap().ino(), d);
    assert_eq!(c.metadata("/..").unwrap().ino(), root, "the root is its own parent");
    assert_eq!(errno(c.remove_dir("/d/.")), libc::EINVAL);
    c.remove_file("/d/f").unwrap();
    c.remove_dir("/d").unwrap();
    assert_eq!(errno(c.metadata("/d")), libc::ENOENT);

    let long = "n".repeat(256);
    assert_eq!(errno(c.create_dir(format!("/{long}"), 0o755)), libc::ENAMETOOLONG);
    c.create_dir(format!("/{}", &long[..255]), 0o755).unwrap();
    assert_eq!(errno(c.metadata("a".repeat(4096))), libc::ENAMETOOLONG);
}

#[test]
fn hard_links_count_names_and_directories_get_none() {
    let t = serve();
    let c = t.client();
    c.write("/f", b"").unwrap();
    assert_eq!(nlink(&c, "/f"), 1);
    c.hard_link("/f", "/g").unwrap();
    assert_eq!(nlink(&c, "/f"), 2);
    assert_eq!(errno(c.hard_link("/f", "/g")), libc::EEXIST);
    c.create_dir("/d", 0o755).unwrap();
    assert_eq!(errno(c.hard_link("/d", "/d2")), libc::EPERM);
    let f = c.open("/f").unwrap();
    c.remove_file("/f").unwrap();
    assert_eq!(nlink(&c, "/g"), 1);
    c.remove_file("/g").unwrap();
    assert_eq!(f.metadata().unwrap().attributes.nlink, 0);
}

#[test]
fn symlinks_and_paths() {
    let t = serve();
    let c = t.client();
    c.create_dir("/d", 0o755).unwrap();
    c.write("/d/f", b"data").unwrap();
    let f = c.metadata("/d/f").unwrap().ino();
    c.symlink("d/f", "/l").unwrap();
    let l = c.symlink_metadata("/l").unwrap();
    assert!(l.is_symlink());
    assert_eq!(l.len(), 3);
    assert_eq!(c.read_link("/l").unwrap(), std::path::PathBuf::from("d/f"));
    assert_eq!(errno(c.read_link("/d/f")), libc::EINVAL);
    assert_eq!(c.metadata("/l").unwrap().ino(), f);
    assert_eq!(c.metadata("d/../d/./f").unwrap().ino(), f);
    assert_eq!(c.metadata("//d//f").unwrap().ino(), f);
    assert_eq!(errno(c.metadata("/d/f/")), libc::ENOTDIR);
    assert_eq!(errno(c.metadata("/d/f/x")), libc::ENOTDIR);
    assert_eq!(errno(c.metadata("/d/new")), libc::ENOENT);
    assert_eq!(errno(c.metadata("/nope/new")), libc::ENOENT);
    c.symlink("/d", "/up").unwrap();
    assert_eq!(c.metadata("up/f").unwrap().ino(), f);
    assert_eq!(c.read("/up/f").unwrap(), b"data");
    c.symlink("loop2", "/loop1").unwrap();
    c.symlink("loop1", "/loop2").unwrap();
    assert_eq!(errno(c.metadata("/loop1")), libc::ELOOP);
    assert!(c.symlink_metadata("/loop1").unwrap().is_symlink());
    assert_eq!(errno(c.open("/loop1")), libc::ELOOP);
    assert_eq!(errno(c.symlink("", "/empty")), libc::ENOENT);
    assert_eq!(errno(c.symlink("x".repeat(4096), "/long")), libc::ENAMETOOLONG);
}

#[test]
fn directory_link_counts_follow_their_subdirectories() {
    let t = serve();
    let c = t.client();
    assert_eq!(nlink(&c, "/"), 2);
    c.create_dir("/d", 0o755).unwrap();
    assert_eq!(nlink(&c, "/d"), 2);
    assert_eq!(nlink(&c, "/"), 3);
    c.create_dir("/d/e", 0o755).unwrap();
    c.write("/d/file", b"").unwrap();
    assert_eq!(nlink(&c, "/d"), 3, "files do not count");
    // Moving e up: d loses its `..` link, the root gains it.
    c.rename("/d/e", "/e").unwrap();
    assert_eq!(nlink(&c, "/d"), 2);
    assert_eq!(nlink(&c, "/"), 4);
    c.remove_dir("/e").unwrap();
    c.remove_file("/d/file").unwrap();
    c.remove_dir("/d").unwrap();
    assert_eq!(nlink(&c, "/"), 2);
}
