//! `larder::Options` reaches the layers: creation sizes given or fitted,
//! the KV view's owner, and one store shared by the KV and file system
//! views.

use std::sync::Arc;

use larder::fs::Cred;
use larder::{CreationOptions, Durability, Options, Store};

fn temporary() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("cannot make a temporary directory: {e}"),
    }
}

#[test]
fn given_creation_sizes_are_the_new_stores_and_ignored_by_an_open() -> Result<(), larder::Error> {
    let tmp = temporary();
    let given = CreationOptions { log_segment_bytes: 1 << 20, container_bytes: 8 << 20, ..Default::default() };
    let store = Store::open(tmp.path(), Options::new().creation(given))?;
    assert_eq!(store.objects().superblock().options, given);
    store.close()?;
    let other = CreationOptions { log_segment_bytes: 2 << 20, ..given };
    let store = Store::open(tmp.path(), Options::new().creation(other))?;
    assert_eq!(store.objects().superblock().options, given);
    store.close()
}

#[test]
fn without_creation_sizes_a_store_is_fitted_to_its_file_system() -> Result<(), larder::Error> {
    let tmp = temporary();
    let dir = tmp.path().join("a/b/store");
    let fitted = Options::new().creation_options(&dir)?;
    assert!(fitted.log_segment_bytes >= 4 << 20 && fitted.log_segment_bytes <= 64 << 20, "{fitted:?}");
    assert!(fitted.log_segment_bytes.is_power_of_two(), "{fitted:?}");
    let store = Store::open(&dir, Options::default())?;
    assert_eq!(store.objects().superblock().options, fitted);
    store.close()
}

#[test]
fn kv_objects_belong_to_the_owner_and_show_in_the_file_system() -> Result<(), larder::Error> {
    let tmp = temporary();
    let store = Store::open(tmp.path(), Options::new().owner(4242, 77))?;
    store.kv().create_bucket("b")?;
    store.kv().put("b", "dir/key", b"value", Durability::Buffered)?;
    let fs = store.fs();
    let found = fs.resolve(&Cred::root(), b"/b/dir/key", true)?;
    let Some(attr) = found.attr else { panic!("/b/dir/key is not in the file system view") };
    assert_eq!((attr.uid, attr.gid, attr.size), (4242, 77, 5));
    // The same Fs every time: handles opened through one are seen by the next.
    let handle = fs.open_file(&Cred::root(), attr.ino, larder::fs::flags::O_RDONLY)?;
    assert_eq!(store.fs().read(handle, 0, 16)?, b"value");
    store.fs().release(handle)?;
    store.close()
}

#[test]
fn a_crash_keeps_what_was_durable_and_a_sync_makes_buffered_changes_durable() -> Result<(), larder::Error> {
    use larder::io::sim::CrashMode;
    use larder::io::SimStorage;
    let dir = std::path::Path::new("/store");
    let small = CreationOptions { log_segment_bytes: 1 << 20, container_bytes: 8 << 20, ..Default::default() };
    // No background thread: a buffered change is durable only once synced.
    let options = Options::new().creation(small).buffered_sync_interval(None);
    let machine = SimStorage::new(7);
    let store = Store::open_with(Arc::new(machine.clone()), dir, options.clone())?;
    store.kv().create_bucket("b")?;
    store.kv().put("b", "durable", b"1", Durability::Durable)?;
    store.kv().put("b", "buffered", b"2", Durability::Buffered)?;
    store.kv().put("b", "synced", b"3", Durability::Buffered)?;
    store.sync()?;
    store.kv().put("b", "lost", b"4", Durability::Buffered)?;
    let rebooted = machine.crash_with(CrashMode::DropAllPending);
    drop(store);

    let store = Store::open_with(Arc::new(rebooted), dir, options)?;
    let kv = store.kv();
    assert_eq!(kv.get("b", "durable")?, Some(b"1".to_vec()));
    assert_eq!(kv.get("b", "buffered")?, Some(b"2".to_vec()));
    assert_eq!(kv.get("b", "synced")?, Some(b"3".to_vec()));
    assert_eq!(kv.get("b", "lost")?, None);
    store.close()
}
