//! The `on_durable` hook sees every record once, in LSN order, before its
//! appender returns; and `append_with` returns only once the dependency
//! files are durable too. How: 8 threads append while the hook records
//! LSNs and checks each appender's record was applied before `append`
//! returned; then a data file written on the simulated storage is named as
//! a dependency and its durable image inspected after the append returns.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{open, small_options};
use larder_io::sim::{SimFault, SimOp};
use larder_io::{write_all_at, FileRef, OpenOptions, SimStorage, Storage};
use larder_log::{Dependency, LogError, Options};

#[test]
fn hook_applies_in_lsn_order_before_acknowledging() {
    let sim = SimStorage::new(61);
    let applied = Arc::new(Mutex::new(Vec::new()));
    let options = Options {
        segment_bytes: 256 << 10,
        max_segments: 32,
        on_durable: Some({
            let applied = applied.clone();
            Arc::new(move |lsn, _payload: &[u8]| {
                applied.lock().unwrap().push(lsn);
                Ok(())
            })
        }),
        ..small_options()
    };
    let (log, _) = open(&sim, options, 0).unwrap();
    let log = Arc::new(log);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (log, applied) = (log.clone(), applied.clone());
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let lsn = log.append(vec![7; 50]).unwrap();
                    assert!(applied.lock().unwrap().contains(&lsn), "LSN {lsn} acknowledged before it was applied");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*applied.lock().unwrap(), (1..=800).collect::<Vec<u64>>());
}

#[test]
fn failing_hook_poisons() {
    let sim = SimStorage::new(62);
    let options = Options {
        on_durable: Some(Arc::new(|lsn, _: &[u8]| if lsn == 2 { Err("index full".into()) } else { Ok(()) })),
        ..small_options()
    };
    let (log, _) = open(&sim, options, 0).unwrap();
    log.append(vec![1]).unwrap();
    assert!(matches!(log.append(vec![2]), Err(LogError::Apply { lsn: 2, .. })));
    assert!(matches!(log.append(vec![3]), Err(LogError::Poisoned(c)) if c.contains("index full")));
}

/// The data file the dependency tests name.
const DATA_FILE: &str = "/data/containers/1.dat";

/// Creates [`DATA_FILE`] holding `bytes` (written, not synced).
fn data_file(storage: &dyn Storage, bytes: &[u8]) -> FileRef {
    storage.create_dir_all(Path::new("/data/containers")).unwrap();
    let data = storage.open(Path::new(DATA_FILE), OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*data, bytes, 0).unwrap();
    data
}

#[test]
fn dependency_files_are_durable_when_append_with_returns() {
    let sim = SimStorage::new(63);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    let data_path = Path::new(DATA_FILE);
    let data = data_file(&sim, &[9u8; 8192]);
    assert_eq!(sim.durable_len(data_path).unwrap(), 0);
    // The same file named twice is synced once.
    log.append_with(
        b"extent 1.dat 0..8192".to_vec(),
        vec![Dependency::Sync(data.clone()), Dependency::Sync(data.clone())],
    )
    .unwrap();
    assert_eq!(sim.read_durable(data_path).unwrap(), vec![9u8; 8192]);
    assert_eq!(log.stats().dependency_syncs, 1);

    // A failed dependency sync fails the append and poisons the log.
    write_all_at(&*data, &[1u8; 10], 0).unwrap();
    sim.fail_path(data_path, SimOp::SyncData, SimFault::Eio);
    assert!(log.append_with(b"extent 2".to_vec(), vec![Dependency::Sync(data.clone())]).is_err());
    assert!(matches!(log.append(vec![0]), Err(LogError::Poisoned(c)) if c.contains("1.dat")));
}

#[test]
fn written_back_ranges_are_durable_when_append_with_returns() {
    let sim = SimStorage::new(64);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    let data_path = Path::new(DATA_FILE);
    let data = data_file(&sim, &[0u8; 16384]);
    data.sync_data().unwrap();
    sim.sync_dir(Path::new("/data/containers")).unwrap();
    write_all_at(&*data, &[9u8; 4096], 4096).unwrap();
    write_all_at(&*data, &[8u8; 4096], 12288).unwrap();
    // Two ranges of one file merge into one write-back; no sync of the file.
    let back = |offset| Dependency::WriteBack { file: data.clone(), offset, len: 4096 };
    log.append_with(b"extents".to_vec(), vec![back(4096), back(12288)]).unwrap();
    let durable = sim.read_durable(data_path).unwrap();
    assert_eq!(&durable[4096..8192], &[9u8; 4096][..]);
    assert_eq!(&durable[12288..], &[8u8; 4096][..]);
    let stats = log.stats();
    assert_eq!((stats.dependency_write_backs, stats.dependency_syncs), (1, 0));

    // A sync of the same file in the group absorbs the write-back.
    write_all_at(&*data, &[7u8; 4096], 0).unwrap();
    log.append_with(b"both".to_vec(), vec![back(0), Dependency::Sync(data.clone())]).unwrap();
    let stats = log.stats();
    assert_eq!((stats.dependency_write_backs, stats.dependency_syncs), (1, 1));

    // A failed write-back fails the append and poisons the log.
    write_all_at(&*data, &[1u8; 4096], 0).unwrap();
    sim.fail_path(data_path, SimOp::WriteBack, SimFault::Eio);
    assert!(log.append_with(b"extent 3".to_vec(), vec![back(0)]).is_err());
    assert!(matches!(log.append(vec![0]), Err(LogError::Poisoned(c)) if c.contains("1.dat")));
}

/// Records write-backs and syncs in the order they happen.
#[derive(Debug, Default)]
struct Events(Mutex<Vec<String>>);

impl common::Hooks for Events {
    fn before_write(&self, path: &Path, _offset: u64) {
        self.0.lock().unwrap().push(format!("write {}", path.display()));
    }
    fn after_sync(&self, path: &Path) {
        self.0.lock().unwrap().push(format!("sync {}", path.display()));
    }
    fn after_write_back(&self, path: &Path) {
        self.0.lock().unwrap().push(format!("write_back {}", path.display()));
    }
}

#[test]
fn a_write_back_is_waited_for_before_the_group_sync_that_flushes_it() {
    let sim = SimStorage::new(65);
    let events = Arc::new(Events::default());
    let hooked = common::Hooked { inner: sim.clone(), hooks: events.clone() };
    let storage = hooked.storage();
    let (log, _) = common::open_on(storage.clone(), small_options(), 0).unwrap();
    let data = data_file(&*storage, &[0u8; 8192]);
    data.sync_data().unwrap();
    write_all_at(&*data, &[9u8; 4096], 0).unwrap();
    let dep = Dependency::WriteBack { file: data.clone(), offset: 0, len: 4096 };
    log.append_with(b"extent".to_vec(), vec![dep]).unwrap();
    events.0.lock().unwrap().push("returned".into());
    let seen = events.0.lock().unwrap().clone();
    let back = seen.iter().position(|e| e.starts_with("write_back /data/containers/1.dat")).unwrap();
    let returned = seen.iter().position(|e| e == "returned").unwrap();
    // The segment the group went to is synced after the write-back.
    let group = seen[..back].iter().rev().find(|e| e.starts_with("write /data/log/")).unwrap();
    let segment = group.trim_start_matches("write ");
    let flushed = seen[back..returned].iter().any(|e| *e == format!("sync {segment}"));
    assert!(flushed, "{segment} not synced between the write-back and the return: {seen:?}");
}
