//! `Storage::map_shared`: the real backend's regions are the file's own
//! pages (another handle reads what was stored, growth keeps the base), the
//! simulation's are copies that reach the file only by `flush` and survive a
//! crash only once synced. Both are stressed from many threads.
#![allow(clippy::unwrap_used, unsafe_code)]

mod common;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use larder_io::sim::CrashMode;
use larder_io::{
    page_size, write_all_at, CheckedStorage, MapAccess, OpenOptions, RealStorage, SharedRegion, SimStorage, Storage,
};

use common::{durable_file, read_all};

/// Stores `bytes` at `offset` through the region.
fn store(region: &SharedRegion, offset: u64, bytes: &[u8]) {
    assert!(offset + bytes.len() as u64 <= region.len());
    // SAFETY: in bounds (asserted) of a read-write region that outlives the call.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), region.as_ptr().add(offset as usize), bytes.len()) }
}

/// Loads `len` bytes at `offset` from the region.
fn load(region: &SharedRegion, offset: u64, len: usize) -> Vec<u8> {
    assert!(offset + len as u64 <= region.len());
    let mut out = vec![0u8; len];
    // SAFETY: in bounds (asserted) of a region that outlives the call.
    unsafe { std::ptr::copy_nonoverlapping(region.as_ptr().add(offset as usize), out.as_mut_ptr(), len) }
    out
}

fn real_file(dir: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path
}

fn read_std(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::fs::File::open(path).unwrap().read_to_end(&mut out).unwrap();
    out
}

#[test]
fn real_region_maps_the_file_and_stores_reach_other_handles() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &[7u8; 10_000]);
    let region = RealStorage::new().map_shared(&path, 1 << 20, MapAccess::ReadWrite).unwrap();
    assert!(!region.is_emulated());
    assert_eq!(region.len(), 10_000);
    assert_eq!(load(&region, 9_990, 10), vec![7u8; 10]);
    store(&region, 100, b"through the mapping");
    region.flush(100, 19).unwrap();
    assert_eq!(&read_std(&path)[100..119], b"through the mapping");
}

#[test]
fn real_region_grows_at_the_same_base() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", b"head");
    let storage = RealStorage::new();
    let region = storage.map_shared(&path, 16 * page_size(), MapAccess::ReadWrite).unwrap();
    let base = region.as_ptr();
    let file = storage.open(&path, OpenOptions::WRITE).unwrap();
    file.set_len(3 * page_size() + 5).unwrap();
    region.grow_to(3 * page_size() + 5).unwrap();
    assert_eq!(region.as_ptr(), base);
    assert_eq!(load(&region, 0, 4), b"head");
    store(&region, 3 * page_size(), b"tail!");
    region.flush(0, region.len()).unwrap();
    let bytes = read_std(&path);
    assert_eq!(bytes.len() as u64, 3 * page_size() + 5);
    assert_eq!(&bytes[bytes.len() - 5..], b"tail!");
    // Past the reservation: refused, nothing changes.
    assert!(region.grow_to(17 * page_size()).is_err());
    assert_eq!(region.len(), 3 * page_size() + 5);
    // Never shrinks.
    assert!(region.grow_to(4).is_err());
    assert_eq!(region.len(), 3 * page_size() + 5);
}

#[test]
fn real_read_only_region_sees_writes_of_other_handles() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &[0u8; 64]);
    let region = RealStorage::new().map_shared(&path, 64, MapAccess::ReadOnly).unwrap();
    assert_eq!(region.access(), MapAccess::ReadOnly);
    let file = RealStorage::new().open(&path, OpenOptions::WRITE).unwrap();
    write_all_at(&*file, b"shared", 10).unwrap();
    assert_eq!(load(&region, 10, 6), b"shared", "MAP_SHARED sees the page cache");
    region.flush(0, 64).unwrap();
}

#[test]
fn file_longer_than_the_reservation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &[1u8; 100]);
    assert!(RealStorage::new().map_shared(&path, 50, MapAccess::ReadWrite).is_err());
    let sim = SimStorage::new(1);
    durable_file(&sim, Path::new("/heap/1"), &[1u8; 100]);
    assert!(sim.map_shared(Path::new("/heap/1"), 50, MapAccess::ReadWrite).is_err());
}

#[test]
fn missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let err = RealStorage::new().map_shared(&dir.path().join("none"), 4096, MapAccess::ReadWrite).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = SimStorage::new(1).map_shared(Path::new("/heap/none"), 4096, MapAccess::ReadWrite).unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[test]
fn sim_region_reaches_the_file_only_by_flush_and_survives_only_synced() {
    let sim = SimStorage::new(9);
    let path = Path::new("/heap/1");
    durable_file(&sim, path, &[0u8; 3000]);
    let region = sim.map_shared(path, 1 << 20, MapAccess::ReadWrite).unwrap();
    assert!(region.is_emulated());
    store(&region, 0, b"flushed and synced");
    store(&region, 2000, b"never flushed");
    assert_eq!(&read_all(&sim, path)[0..18], &[0u8; 18], "no write-back before flush");
    region.flush(0, 18).unwrap();
    assert_eq!(&read_all(&sim, path)[0..18], b"flushed and synced");
    sim.open(path, OpenOptions::WRITE).unwrap().sync_data().unwrap();
    store(&region, 1000, b"flushed, not synced");
    region.flush(1000, 19).unwrap();

    let after = sim.crash_with(CrashMode::DropAllPending);
    let bytes = read_all(&after, path);
    assert_eq!(&bytes[0..18], b"flushed and synced");
    assert_eq!(&bytes[1000..1019], &[0u8; 19]);
    assert_eq!(&bytes[2000..2013], &[0u8; 13]);
}

#[test]
fn sim_region_grows_at_the_same_base_with_the_file_bytes() {
    let sim = SimStorage::new(2);
    let path = Path::new("/heap/2");
    durable_file(&sim, path, b"abc");
    let region = sim.map_shared(path, 8 * page_size(), MapAccess::ReadWrite).unwrap();
    let base = region.as_ptr();
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    file.set_len(2 * page_size() + 1).unwrap();
    write_all_at(&*file, b"Z", 2 * page_size()).unwrap();
    region.grow_to(2 * page_size() + 1).unwrap();
    assert_eq!(region.as_ptr(), base);
    assert_eq!(load(&region, 0, 3), b"abc");
    assert_eq!(load(&region, 2 * page_size(), 1), b"Z");
    assert!(region.grow_to(9 * page_size()).is_err());
    assert!(region.flush(0, 2 * page_size() + 2).is_err(), "flush past the length is refused");
}

#[test]
fn sim_read_only_region_flushes_nothing() {
    let sim = SimStorage::new(3);
    let path = Path::new("/heap/3");
    durable_file(&sim, path, b"read only");
    let region = sim.map_shared(path, 4096, MapAccess::ReadOnly).unwrap();
    assert_eq!(load(&region, 0, 9), b"read only");
    region.flush(0, 9).unwrap();
}

#[test]
fn poisoned_storage_refuses_a_writable_mapping() {
    let sim = SimStorage::new(4);
    let path = Path::new("/heap/4");
    durable_file(&sim, path, b"x");
    let checked = CheckedStorage::new(Arc::new(sim));
    checked.poison("test".to_string());
    assert!(checked.map_shared(path, 4096, MapAccess::ReadWrite).is_err());
    assert!(checked.map_shared(path, 4096, MapAccess::ReadOnly).is_ok());
}

/// Threads store disjoint stripes, flush them and grow the region while
/// others store; at the end the file holds every stripe.
fn stress(storage: &dyn Storage, path: &Path, file_len: impl Fn() -> u64, sync: impl Fn()) {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 64;
    const STRIPE: u64 = 512;
    let region = storage.map_shared(path, 1 << 24, MapAccess::ReadWrite).unwrap();
    let file = storage.open(path, OpenOptions::WRITE).unwrap();
    let start_len = region.len();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let region = &region;
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let offset = (round * THREADS + t) * STRIPE;
                    let pattern = vec![(t * 31 + round) as u8; STRIPE as usize];
                    store(region, offset, &pattern);
                    region.flush(offset, STRIPE).unwrap();
                    assert_eq!(load(region, offset, STRIPE as usize), pattern);
                }
            });
        }
        let region = &region;
        let file = &file;
        scope.spawn(move || {
            for step in 1..=32u64 {
                let len = start_len + step * page_size();
                file.set_len(len).unwrap();
                region.grow_to(len).unwrap();
            }
        });
    });
    sync();
    assert_eq!(file_len(), start_len + 32 * page_size());
    let bytes = read_all(storage, path);
    for t in 0..THREADS {
        for round in 0..ROUNDS {
            let offset = ((round * THREADS + t) * STRIPE) as usize;
            let want = (t * 31 + round) as u8;
            assert!(bytes[offset..offset + STRIPE as usize].iter().all(|b| *b == want), "stripe {t}/{round}");
        }
    }
}

#[test]
fn real_region_stress_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &vec![0u8; 4 * 64 * 512]);
    stress(&RealStorage::new(), &path, || read_std(&path).len() as u64, || {});
}

#[test]
fn sim_region_stress_from_many_threads() {
    let sim = SimStorage::new(5);
    let path = Path::new("/heap/5");
    durable_file(&sim, path, &vec![0u8; 4 * 64 * 512]);
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    stress(&sim, path, || file.len().unwrap(), || file.sync_data().unwrap());
    let after = sim.crash_with(CrashMode::DropAllPending);
    let bytes = read_all(&after, path);
    assert_eq!(bytes[0], 0, "thread 0 round 0 stored 0");
    assert_eq!(bytes[512], 31, "thread 1 round 0 stored 31 and it was flushed and synced");
}

/// `file_status` by path and through a directory handle agree with the
/// mapped region's identity: the same file keeps it through truncation
/// and growth, a file renamed over the name has another, a missing one is
/// NotFound.
#[test]
fn real_file_status_tells_the_mapped_file_and_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let storage = CheckedStorage::new(Arc::new(RealStorage::new()));
    let path = real_file(dir.path(), "object", &[1u8; 5000]);
    let region = storage.map_shared(&path, 1 << 20, MapAccess::ReadOnly).unwrap();
    let identity = region.identity().expect("a real mapping knows its file");
    let handle = storage.open_directory(dir.path()).unwrap().expect("the real backend holds directories");
    let by_path = storage.file_status(&path).unwrap();
    let by_name = handle.file_status("object").unwrap();
    assert_eq!(by_path, by_name);
    assert_eq!((by_path.identity, by_path.len), (Some(identity), 5000));
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
    assert_eq!(handle.file_status("object").unwrap().len, 100);
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(9000).unwrap();
    let grown = handle.file_status("object").unwrap();
    assert_eq!((grown.identity, grown.len), (Some(identity), 9000), "the same file, longer");
    let other = real_file(dir.path(), "other", &[2u8; 9000]);
    std::fs::rename(&other, &path).unwrap();
    let replaced = handle.file_status("object").unwrap();
    assert_ne!(replaced.identity, Some(identity), "another file under the name");
    assert_eq!(storage.file_status(&path).unwrap(), replaced);
    std::fs::remove_file(&path).unwrap();
    assert!(handle.file_status("object").unwrap_err().is_not_found());
    assert!(storage.file_status(&path).unwrap_err().is_not_found());
}

/// The simulation has no directory handles and tells no identity: its
/// regions are copies, never to be reused by identity.
#[test]
fn sim_file_status_has_a_length_and_no_identity() {
    let sim = SimStorage::new(3);
    let path = Path::new("/d/object");
    sim.create_dir_all(Path::new("/d")).unwrap();
    let file = sim.open(path, OpenOptions::CREATE).unwrap();
    write_all_at(&*file, &[7u8; 300], 0).unwrap();
    let status = sim.file_status(path).unwrap();
    assert_eq!((status.identity, status.len), (None, 300));
    assert!(sim.open_directory(Path::new("/d")).unwrap().is_none());
    let region = sim.map_shared(path, 4096, MapAccess::ReadOnly).unwrap();
    assert_eq!(region.identity(), None);
}

#[test]
fn sim_write_back_except_makes_the_other_pages_durable_at_any_later_sync() {
    let sim = SimStorage::new(11);
    let path = Path::new("/heap/11");
    let page = page_size();
    durable_file(&sim, path, &vec![0u8; 3 * page as usize]);
    let region = sim.map_shared(path, 1 << 20, MapAccess::ReadWrite).unwrap();
    store(&region, 0, b"written back");
    store(&region, page, b"skipped");
    store(&region, 2 * page, b"past the end asked");
    let skip = std::collections::BTreeSet::from([page]);
    assert!(region.write_back_except(2 * page, &skip).unwrap());
    // Another file's sync flushes the one device.
    durable_file(&sim, Path::new("/heap/log"), b"record");

    let after = sim.crash_with(CrashMode::DropAllPending);
    let bytes = read_all(&after, path);
    assert_eq!(&bytes[0..12], b"written back");
    assert_eq!(&bytes[page as usize..page as usize + 7], &[0u8; 7], "a skipped page is not written");
    assert_eq!(&bytes[2 * page as usize..2 * page as usize + 18], &[0u8; 18], "nor one past `end`");
}

#[test]
fn real_write_back_except_keeps_its_descriptor_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &vec![0u8; 3 * page_size() as usize]);
    let region = RealStorage::new().map_shared(&path, 1 << 20, MapAccess::ReadWrite).unwrap();
    assert!(!region.holds_descriptor(), "mapping keeps no descriptor");
    store(&region, 0, b"dirty");
    let skip = std::collections::BTreeSet::from([page_size()]);
    assert!(region.write_back_except(region.len(), &skip).unwrap());
    assert!(region.holds_descriptor());
    // Growth is the same file: the kept descriptor covers the new pages.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4 * page_size()).unwrap();
    region.grow_to(4 * page_size()).unwrap();
    store(&region, 3 * page_size(), b"grown");
    assert!(region.write_back_except(region.len(), &skip).unwrap());
    assert_eq!(&read_std(&path)[3 * page_size() as usize..][..5], b"grown");
    region.release_descriptor();
    assert!(!region.holds_descriptor());
}

#[test]
fn real_write_back_except_refuses_a_file_replaced_under_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = real_file(dir.path(), "obj", &[1u8; 5000]);
    let region = RealStorage::new().map_shared(&path, 1 << 20, MapAccess::ReadWrite).unwrap();
    let other = real_file(dir.path(), "other", &[2u8; 5000]);
    std::fs::rename(&other, &path).unwrap();
    store(&region, 0, b"to the old file");
    assert!(!region.write_back_except(region.len(), &std::collections::BTreeSet::new()).unwrap());
    assert!(!region.holds_descriptor(), "no descriptor of another file is kept");
}

/// `Storage::write_file_from` writes a region's current bytes (stores never
/// flushed included) over the start of another file, on both backends, and
/// refuses more bytes than the region exposes, leaving the file alone.
#[test]
fn write_file_from_writes_the_regions_bytes_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimStorage::new(5);
    let (real, sim_ref): (Arc<dyn Storage>, Arc<dyn Storage>) = (Arc::new(RealStorage::new()), Arc::new(sim.clone()));
    for (storage, base) in [(real, dir.path().to_path_buf()), (sim_ref, std::path::PathBuf::from("/w"))] {
        let (source, target) = (base.join("source"), base.join("target"));
        durable_file(&*storage, &source, &[1u8; 9000]);
        durable_file(&*storage, &target, &[2u8; 100]);
        let region = storage.map_shared(&source, 1 << 20, MapAccess::ReadWrite).unwrap();
        store(&region, 8000, b"stored, never flushed");
        assert!(storage.write_file_from(&region, &target, 9001).is_err(), "past the region");
        assert_eq!(read_all(&*storage, &target), vec![2u8; 100], "a refused write changes nothing");
        storage.write_file_from(&region, &target, 9000).unwrap();
        let mut expected = vec![1u8; 9000];
        expected[8000..8021].copy_from_slice(b"stored, never flushed");
        assert!(read_all(&*storage, &target) == expected, "emulated: {}", region.is_emulated());
    }
}

/// `copy_from` copies one region's bytes into another's and refuses a
/// copy past either region or into a read-only one; `expose_none` hides a
/// region's bytes until it grows again, and growth shows the file's.
#[test]
fn copy_from_and_expose_none_on_real_regions() {
    let dir = tempfile::tempdir().unwrap();
    let source_path = real_file(dir.path(), "source", &[3u8; 5000]);
    let target_path = real_file(dir.path(), "target", &[4u8; 8192]);
    let real = RealStorage::new();
    let source = real.map_shared(&source_path, 1 << 20, MapAccess::ReadWrite).unwrap();
    let mut target = real.map_shared(&target_path, 1 << 20, MapAccess::ReadWrite).unwrap();
    assert!(target.populate_for_stores(), "a kernel with MADV_POPULATE_WRITE (5.14 and later)");
    assert!(target.copy_from(&source, 5001).is_err(), "past the source");
    target.copy_from(&source, 5000).unwrap();
    assert_eq!(load(&target, 0, 5000), vec![3u8; 5000]);
    assert_eq!(load(&target, 5000, 3192), vec![4u8; 3192], "bytes past the copy stay");
    let read_only = real.map_shared(&source_path, 1 << 20, MapAccess::ReadOnly).unwrap();
    assert!(read_only.copy_from(&target, 10).is_err(), "into a read-only region");
    target.expose_none();
    assert_eq!(target.len(), 0);
    assert!(target.copy_from(&source, 1).is_err(), "nothing exposed: nothing to copy into");
    real.set_file_len(&target_path, 100).unwrap();
    target.grow_to(100).unwrap();
    assert_eq!(load(&target, 0, 100), vec![3u8; 100], "the file's bytes, shortened");
}
