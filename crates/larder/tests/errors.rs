//! `larder::Error` keeps the failing layer's error: its kind, its errno
//! and its source chain, for failures provoked for real.

use std::io::Read;

use larder::fs::{errno, flags, Cred};
use larder::{Durability, Error, ErrorKind, Options, Store};

fn temporary() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("cannot make a temporary directory: {e}"),
    }
}

fn failure<T: std::fmt::Debug>(result: Result<T, Error>) -> Error {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn opening_no_store_without_create_is_not_found_and_creates_nothing() {
    let tmp = temporary();
    let dir = tmp.path().join("absent");
    let e = failure(Store::open(&dir, Options::new().create_if_missing(false)));
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(matches!(e, Error::Store(larder::object::ObjectError::NotAStore { .. })), "{e:?}");
    assert!(!dir.join("SUPERBLOCK").exists());
}

#[test]
fn creating_over_a_store_is_already_exists() -> Result<(), Error> {
    let tmp = temporary();
    Store::create(tmp.path(), Options::default())?.close()?;
    let e = failure(Store::create(tmp.path(), Options::default()));
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    Ok(())
}

#[test]
fn a_store_open_elsewhere_is_locked() -> Result<(), Error> {
    let tmp = temporary();
    let first = Store::open(tmp.path(), Options::default())?;
    let e = failure(Store::open(tmp.path(), Options::default()));
    assert_eq!(e.kind(), ErrorKind::Locked, "{e}");
    first.close()?;
    Store::open(tmp.path(), Options::default())?.close()
}

#[test]
fn a_store_on_a_regular_file_keeps_the_os_error_in_its_chain() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = temporary();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a directory")?;
    let e = failure(Store::open(file.join("store"), Options::default()));
    assert_eq!(e.errno(), Some(errno::ENOTDIR), "{e}");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let mut chain = Some(&e as &(dyn std::error::Error + 'static));
    let mut found = false;
    while let Some(link) = chain {
        found |= link.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) == Some(errno::ENOTDIR);
        chain = link.source();
    }
    assert!(found, "no std::io::Error in the chain of {e:?}");
    Ok(())
}

#[test]
fn kv_refusals_have_their_kinds_and_change_nothing() -> Result<(), Error> {
    let tmp = temporary();
    let store = Store::open(tmp.path(), Options::default())?;
    let kv = store.kv();
    let e = failure(kv.put("nobucket", "k", b"v", Durability::Durable).map_err(Error::from));
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    kv.create_bucket("b")?;
    let e = failure(kv.create_bucket("b").map_err(Error::from));
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    for bad in ["", "a//b", "/a", "a/", "..", "a/./b"] {
        let e = failure(kv.put("b", bad, b"v", Durability::Durable).map_err(Error::from));
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
    assert_eq!(kv.scan_prefix("b", b"")?.count(), 0);
    store.close()
}

#[test]
fn a_stream_error_is_classified_through_the_kv_error_it_wraps() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = temporary();
    let store = Store::open(tmp.path(), Options::default())?;
    let kv = store.kv();
    kv.create_bucket("b")?;
    kv.put("b", "gone", &[7u8; 10_000], Durability::Durable)?;
    let Some(mut reader) = kv.reader("b", "gone")? else { panic!("the value just put is missing") };
    kv.delete("b", "gone", Durability::Durable)?;
    let mut buf = Vec::new();
    let e = failure(reader.read_to_end(&mut buf).map_err(Error::from));
    assert!(matches!(e, Error::Io(_)), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    store.close()?;
    Ok(())
}

#[test]
fn fs_errors_carry_their_errno() -> Result<(), Error> {
    let tmp = temporary();
    let store = Store::open(tmp.path(), Options::default())?;
    let fs = store.fs();
    let nobody = Cred::new(65534, 65534, vec![]);
    let e = failure(fs.mkdir(&nobody, fs.root(), b"d", 0o755).map_err(Error::from));
    assert_eq!((e.kind(), e.errno()), (ErrorKind::PermissionDenied, Some(errno::EACCES)), "{e}");
    let e = failure(fs.lookup(&nobody, fs.root(), b"missing").map_err(Error::from));
    assert_eq!((e.kind(), e.errno()), (ErrorKind::NotFound, Some(errno::ENOENT)), "{e}");
    let (_, handle) = fs.create_file(&Cred::root(), fs.root(), b"f", 0o644, flags::O_RDONLY)?;
    let e = failure(fs.write(&Cred::root(), handle, 0, b"x").map_err(Error::from));
    assert_eq!(e.errno(), Some(errno::EBADF), "{e}");
    assert_eq!(e.kind(), ErrorKind::Other, "{e}");
    fs.release(handle)?;
    store.close()
}

#[test]
fn a_damaged_index_is_corrupt_and_names_the_file() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = temporary();
    let index = larder::index::open(tmp.path(), Options::default().index_options())?;
    let mut batch = larder::index::WriteBatch::new();
    batch.put(b"k", b"v");
    index.write(1, &batch)?;
    index.close()?;
    std::fs::write(tmp.path().join("CURRENT"), b"garbage")?;
    let e = failure(larder::index::open(tmp.path(), Options::default().index_options()));
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("CURRENT"), "{e}");
    Ok(())
}

#[test]
fn invalid_options_are_invalid_input() {
    let tmp = temporary();
    let e = failure(larder::index::open(tmp.path(), Options::new().memtable_bytes(1).index_options()));
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let creation = larder::CreationOptions { container_bytes: 3 << 20, ..Default::default() };
    let e = failure(Store::create(tmp.path().join("store"), Options::new().creation(creation)));
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
