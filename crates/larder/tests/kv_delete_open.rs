//! A key deleted through the store's KV view while its object is open
//! through its fs view: as on ext4, where an unlinked file stays readable
//! through its open descriptors, the open reads the object's bytes, and
//! the last release frees it.
#![allow(clippy::unwrap_used)]

use larder::fs::{flags, Cred};
use larder::{Durability, Options, Store};

#[test]
fn a_key_deleted_through_kv_while_open_through_the_fs_stays_readable_until_released() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let kv = store.kv();
    kv.create_bucket("b").unwrap();
    let value: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();
    kv.put("b", "k", &value, Durability::Buffered).unwrap();
    let fs = store.fs();
    let cred = Cred::root();
    let bucket = fs.lookup(&cred, fs.root(), b"b").unwrap();
    let ino = fs.lookup(&cred, bucket.ino, b"k").unwrap().ino;
    let fh = fs.open_file(&cred, ino, flags::O_RDONLY).unwrap();

    assert!(kv.delete("b", "k", Durability::Buffered).unwrap());
    assert_eq!(kv.get("b", "k").unwrap(), None);
    assert_eq!(fs.read(fh, 0, value.len()).unwrap(), value, "a read through the open after the delete");
    assert_eq!(fs.getattr(ino).unwrap().nlink, 0, "kept, nameless, while open");

    fs.release(fh).unwrap();
    assert!(fs.getattr(ino).is_err(), "freed at its last release");
    store.close().unwrap();
}

/// What a directory removed while open through the fs must look like
/// through that open, as after `rmdir(2)` of an open directory on Linux:
/// its listing is empty (not even `.` and `..`), its attributes read
/// (nameless: 0 links), and nothing can be made in it (ENOENT).
fn errno<T>(r: Result<T, larder::fs::FsError>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

fn assert_removed_but_open(fs: &larder::fs::Fs, dir: u64, dh: u64, how: &str) {
    let cred = Cred::root();
    assert_eq!(fs.readdir(dh, 0, 16).unwrap(), Vec::new(), "{how}: the open's listing from the start");
    assert_eq!(fs.readdir(dh, 2, 16).unwrap(), Vec::new(), "{how}: the open's listing past . and ..");
    let attr = fs.getattr(dir).unwrap_or_else(|e| panic!("{how}: fstat of the open directory: {e}"));
    assert_eq!((attr.kind, attr.nlink), (larder::fs::Kind::Directory, 0), "{how}: attributes");
    assert_eq!(
        errno(fs.create_file(&cred, dir, b"f", 0o644, flags::O_WRONLY)),
        Some(larder::fs::errno::ENOENT),
        "{how}: create"
    );
    assert_eq!(errno(fs.mkdir(&cred, dir, b"d", 0o755)), Some(larder::fs::errno::ENOENT), "{how}: mkdir");
    assert_eq!(errno(fs.symlink(&cred, dir, b"s", b"t")), Some(larder::fs::errno::ENOENT), "{how}: symlink");
    let made = fs.create_batch(&cred, dir, &[b"x"], 0o644, Durability::Buffered);
    assert_eq!(errno(made), Some(larder::fs::errno::ENOENT), "{how}: bulk create");
}

/// A directory level, a bucket, or an empty level that a put replaces by
/// a key, removed through the store's KV view (or by `rmdir` through the
/// fs) while a handle of the fs has it open: the handle sees a removed
/// directory, the KV view goes on as if nothing were open, and the last
/// release frees the directory.
#[test]
fn a_directory_removed_while_open_through_the_fs_reads_as_removed_until_released() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let kv = store.kv();
    let fs = store.fs();
    let cred = Cred::root();
    let ways = ["kv delete", "kv batch delete", "kv delete_bucket", "kv put over an empty level", "fs rmdir"];
    for (n, how) in ways.into_iter().enumerate() {
        let bucket = format!("b{n}");
        kv.create_bucket(&bucket).unwrap();
        let bucket_ino = fs.lookup(&cred, fs.root(), bucket.as_bytes()).unwrap().ino;
        let dir = match how {
            "kv delete_bucket" => bucket_ino,
            "kv put over an empty level" | "fs rmdir" => fs.mkdir(&cred, bucket_ino, b"d", 0o755).unwrap().ino,
            _ => {
                kv.put(&bucket, "d/k", b"v", Durability::Buffered).unwrap();
                fs.lookup(&cred, bucket_ino, b"d").unwrap().ino
            }
        };
        let dh = fs.opendir(&cred, dir).unwrap();
        match how {
            "kv delete" => assert!(kv.delete(&bucket, "d/k", Durability::Buffered).unwrap()),
            "kv batch delete" => {
                let mut batch = larder::kv::KvBatch::new();
                batch.delete("d/k");
                kv.write_batch(&bucket, &batch, Durability::Buffered).unwrap();
            }
            "kv delete_bucket" => kv.delete_bucket(&bucket).unwrap(),
            "kv put over an empty level" => kv.put(&bucket, "d", b"now a key", Durability::Buffered).unwrap(),
            _ => fs.rmdir(&cred, bucket_ino, b"d").unwrap(),
        }
        assert_removed_but_open(fs, dir, dh, how);
        if how != "kv delete_bucket" {
            // The name is free for a new level, another object.
            kv.put(&bucket, "d2/k", b"v", Durability::Buffered).unwrap();
            assert_eq!(kv.get(&bucket, "d2/k").unwrap(), Some(b"v".to_vec()), "{how}");
        }
        fs.releasedir(dh).unwrap();
        assert!(fs.getattr(dir).is_err(), "{how}: freed at its last release");
    }
    let report = larder_fsck::check(store.objects(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "fsck: {report:?}");
    store.close().unwrap();
}

/// A directory removed while open and still open when the store closes
/// (a crash would leave it so too) is freed by the next open, as every
/// orphan is: nothing of it is left, and fsck finds the store clean.
#[test]
fn a_removed_directory_still_open_at_close_is_freed_by_the_next_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = {
        let store = Store::open(tmp.path(), Options::default()).unwrap();
        let (kv, fs, cred) = (store.kv(), store.fs(), Cred::root());
        kv.create_bucket("b").unwrap();
        kv.put("b", "d/k", b"v", Durability::Buffered).unwrap();
        let bucket = fs.lookup(&cred, fs.root(), b"b").unwrap().ino;
        let dir = fs.lookup(&cred, bucket, b"d").unwrap().ino;
        let _dh = fs.opendir(&cred, dir).unwrap();
        assert!(kv.delete("b", "d/k", Durability::Durable).unwrap());
        assert_eq!(fs.getattr(dir).unwrap().nlink, 0, "kept while open");
        store.close().unwrap();
        dir
    };
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    assert!(store.fs().getattr(dir).is_err(), "freed by the open");
    let report = larder_fsck::check(store.objects(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "fsck: {report:?}");
    store.close().unwrap();
}
