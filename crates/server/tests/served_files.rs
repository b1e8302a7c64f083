//! The file API through a running server and `larder-client`: files read
//! and written through every path (inline, zero-copy buffers), positions,
//! directories listed across pages, names made and removed, and errors
//! with the errno ext4 gives.
#![allow(clippy::unwrap_used)]

mod serving;

use std::io::{Read, Seek, SeekFrom, Write};

use larder_client::{Client, ClientError, OpenOptions};
use serving::{pattern, serve};

fn errno<T>(r: Result<T, ClientError>) -> i32 {
    r.map(|_| ()).unwrap_err().errno()
}

fn names(c: &Client, dir: &str) -> Vec<String> {
    let mut names: Vec<String> =
        c.read_dir(dir).unwrap().map(|e| String::from_utf8(e.unwrap().name).unwrap()).collect();
    names.sort();
    names
}

#[test]
fn files_read_write_seek_append_truncate() {
    let t = serve();
    let c = t.client();
    let mut f = c.create("/f").unwrap();
    f.write_all(b"hello world").unwrap();
    assert_eq!(f.stream_position().unwrap(), 11);
    f.seek(SeekFrom::Start(6)).unwrap();
    f.write_all(b"WORLD").unwrap();
    f.sync_all().unwrap();
    assert_eq!(f.metadata().unwrap().len(), 11);
    drop(f);
    assert_eq!(c.read("/f").unwrap(), b"hello WORLD");

    let mut f = c.open("/f").unwrap();
    assert_eq!(f.seek(SeekFrom::End(-5)).unwrap(), 6);
    let mut tail = String::new();
    f.read_to_string(&mut tail).unwrap();
    assert_eq!(tail, "WORLD");
    assert!(f.seek(SeekFrom::Current(-100)).is_err(), "a seek before the start");
    let mut at = [0u8; 5];
    assert_eq!(f.read_at(&mut at, 0).unwrap(), 5);
    assert_eq!(&at, b"hello");
    assert_eq!(f.read_at(&mut at, 11).unwrap(), 0, "at the end");
    assert_eq!(errno(f.write_at(b"x", 0)), libc::EBADF, "written through a read-only handle");

    let mut a = OpenOptions::new().append(true).open(&c, "/f").unwrap();
    a.write_all(b"!!").unwrap();
    assert_eq!(a.stream_position().unwrap(), 13, "the position follows the end");
    a.write_at(b"?", 0).unwrap();
    drop(a);
    assert_eq!(c.read("/f").unwrap(), b"hello WORLD!!?", "appends go to the end");

    let rw = OpenOptions::new().read(true).write(true).open(&c, "/f").unwrap();
    rw.set_len(5).unwrap();
    assert_eq!(rw.metadata().unwrap().len(), 5);
    rw.set_len(8).unwrap();
    let mut all = [9u8; 8];
    assert_eq!(rw.read_at(&mut all, 0).unwrap(), 8);
    assert_eq!(&all, b"hello\0\0\0", "extended with zeros");
    drop(rw);

    // Large files: through buffers (1 MiB) and inline pieces.
    let big = pattern(1 << 20, 1);
    c.write("/big", &big).unwrap();
    assert!(c.read("/big").unwrap() == big);
    let meta = c.metadata("/big").unwrap();
    assert!(meta.is_file() && !meta.is_dir() && meta.len() == 1 << 20);

    // create_new refuses an existing file; truncate needs write.
    assert_eq!(errno(OpenOptions::new().write(true).create_new(true).open(&c, "/f")), libc::EEXIST);
    assert_eq!(errno(OpenOptions::new().read(true).truncate(true).open(&c, "/f")), libc::EINVAL);
    assert_eq!(errno(c.open("/missing")), libc::ENOENT);
    assert_eq!(errno(c.open("/missing/f")), libc::ENOENT);
    assert_eq!(errno(c.open("/f/under")), libc::ENOTDIR);
    let made = OpenOptions::new().write(true).create(true).mode(0o600).open(&c, "/private").unwrap();
    assert_eq!(made.metadata().unwrap().mode() & 0o777, 0o600);
}

#[test]
fn zero_copy_reads_and_writes() {
    let t = serve();
    let c = t.client();
    let f = OpenOptions::new().read(true).write(true).create(true).open(&c, "/z").unwrap();
    let data = pattern(300_000, 2);
    let mut buffer = c.alloc_buffer(data.len()).unwrap();
    buffer.as_mut_slice().copy_from_slice(&data);
    assert_eq!(f.write_buffer(&buffer, 4096).unwrap(), data.len());
    // The server took a copy: the buffer may change at once.
    buffer.as_mut_slice().fill(0);
    let mut out = c.alloc_buffer(400_000).unwrap();
    assert_eq!(f.read_buffer(&mut out, 4096).unwrap(), data.len(), "short at the end");
    assert!(out.as_slice()[..data.len()] == data[..]);
    assert_eq!(f.read_buffer(&mut out, 0).unwrap(), 4096 + data.len());
    assert!(out.as_slice()[..4096].iter().all(|&b| b == 0), "the hole reads as zeros");
    assert_eq!(f.read_buffer(&mut out, 1 << 30).unwrap(), 0);
    f.sync_all().unwrap();
    drop(f);
    let mut expected = vec![0u8; 4096];
    expected.extend_from_slice(&data);
    assert!(c.read("/z").unwrap() == expected);
}

#[test]
fn directories_and_names() {
    let t = serve();
    let c = t.client();
    c.create_dir("/d", 0o755).unwrap();
    c.create_dir("/d/sub", 0o700).unwrap();
    assert_eq!(c.metadata("/d/sub").unwrap().mode() & 0o777, 0o700);
    // 1,200 entries: the client lists pages of 512.
    for i in 0..1200 {
        c.write(format!("/d/f{i:04}"), &[]).unwrap();
    }
    let listed = names(&c, "/d");
    let mut expected: Vec<String> = (0..1200).map(|i| format!("f{i:04}")).collect();
    expected.push("sub".into());
    assert_eq!(listed, expected);

    c.write("/d/f0000", b"first").unwrap();
    c.rename("/d/f0000", "/d/sub/moved").unwrap();
    assert_eq!(c.read("/d/sub/moved").unwrap(), b"first");
    assert_eq!(errno(c.metadata("/d/f0000")), libc::ENOENT);
    c.rename("/d/sub/moved", "/d/f0001").unwrap();
    assert_eq!(c.read("/d/f0001").unwrap(), b"first", "a rename replaces the target");
    c.hard_link("/d/f0001", "/linked").unwrap();
    assert_eq!(c.metadata("/linked").unwrap().attributes.nlink, 2);
    assert_eq!(c.metadata("/linked").unwrap().ino(), c.metadata("/d/f0001").unwrap().ino());
    c.symlink("d/f0001", "/sym").unwrap();
    assert_eq!(c.read_link("/sym").unwrap(), std::path::PathBuf::from("d/f0001"));
    assert!(c.symlink_metadata("/sym").unwrap().is_symlink());
    assert_eq!(c.read("/sym").unwrap(), b"first", "followed");
    c.remove_file("/sym").unwrap();
    c.remove_file("/linked").unwrap();
    assert_eq!(c.metadata("/d/f0001").unwrap().attributes.nlink, 1);

    assert_eq!(errno(c.create_dir("/d", 0o755)), libc::EEXIST);
    assert_eq!(errno(c.remove_dir("/d")), libc::ENOTEMPTY);
    assert_eq!(errno(c.remove_file("/d")), libc::EISDIR);
    assert_eq!(errno(c.remove_dir("/d/f0001")), libc::ENOTDIR);
    assert_eq!(errno(c.rename("/d", "/d/sub/inside")), libc::EINVAL);
    assert_eq!(errno(c.read_link("/d/f0001")), libc::EINVAL);
    assert_eq!(errno(c.read_dir("/d/f0001")), libc::ENOTDIR);
    assert_eq!(errno(c.hard_link("/d", "/dirlink")), libc::EPERM);

    for i in 1..1200 {
        c.remove_file(format!("/d/f{i:04}")).unwrap();
    }
    c.remove_dir("/d/sub").unwrap();
    c.remove_dir("/d").unwrap();
    assert_eq!(names(&c, "/"), Vec::<String>::new());
    c.set_permissions("/", 0o777).unwrap();
    assert_eq!(c.metadata("/").unwrap().mode() & 0o777, 0o777);
    assert!(c.statfs().unwrap().blocks > 0);
    c.sync().unwrap();
}

#[test]
fn an_unlinked_open_file_lives_until_closed() {
    let t = serve();
    let c = t.client();
    c.write("/u", &pattern(50_000, 3)).unwrap();
    let f = c.open("/u").unwrap();
    c.remove_file("/u").unwrap();
    assert_eq!(errno(c.metadata("/u")), libc::ENOENT);
    assert_eq!(t.orphans(), 1, "kept while open");
    let mut out = vec![0u8; 50_000];
    let mut read = 0;
    while read < out.len() {
        read += f.read_at(&mut out[read..], read as u64).unwrap();
    }
    assert_eq!(out, pattern(50_000, 3));
    // A dropped file's release is posted: it has taken effect once the
    // client's next call is answered.
    drop(f);
    c.ping().unwrap();
    assert_eq!(t.orphans(), 0, "freed at its last close");
    let mut t = t;
    t.assert_fsck_clean();
}

#[test]
fn listings_of_long_names_fit_their_pages() {
    let t = serve();
    let c = t.client();
    c.create_dir("/long", 0o755).unwrap();
    // 600 names of 250 bytes: a page of 512 of them is 134 KB, more than
    // a completion ring record (64 KiB).
    let name = |i: usize| format!("{i:04}{}", "n".repeat(246));
    for i in 0..600 {
        c.write(format!("/long/{}", name(i)), &[]).unwrap();
    }
    let listed = names(&c, "/long");
    assert_eq!(listed, (0..600).map(name).collect::<Vec<_>>());
}

#[test]
fn the_smallest_rings_serve_every_call() {
    // Rings of 4 KiB: a record holds 1 KiB, so reads, writes and values
    // go in small pieces or through buffers.
    let t = serving::serve_with(larder_server::Limits { ring_bytes: 4096, ..serving::limits(1..=1) });
    let c = t.client();
    let data = pattern(10_000, 4);
    c.write("/f", &data).unwrap();
    assert!(c.read("/f").unwrap() == data);
    let f = c.open("/f").unwrap();
    let mut some = vec![0u8; 3000];
    let n = f.read_at(&mut some, 100).unwrap();
    assert!(n > 0 && some[..n] == data[100..100 + n]);
    drop(f);
    c.create_bucket("b").unwrap();
    for len in [0, 700, 3000, 20_000] {
        let value = pattern(len, len as u64);
        c.put("b", format!("k{len}"), &value, larder_client::Durability::Buffered).unwrap();
        assert!(c.get("b", format!("k{len}")).unwrap() == Some(value), "a value of {len} bytes");
    }
    let mut w = c.writer("b", "streamed", larder_client::Durability::Buffered).unwrap();
    w.write_all(&data).unwrap();
    w.finish().unwrap();
    assert!(c.get("b", "streamed").unwrap() == Some(data));
    assert_eq!(c.scan("b", b"", None).count(), 5);
    assert_eq!(names(&c, "/"), vec!["b".to_string(), "f".to_string()]);
}
