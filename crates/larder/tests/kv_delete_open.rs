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
