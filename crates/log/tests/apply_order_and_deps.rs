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
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};
use larder_log::{LogError, Options};

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

#[test]
fn dependency_files_are_durable_when_append_with_returns() {
    let sim = SimStorage::new(63);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    sim.create_dir_all(Path::new("/data/containers")).unwrap();
    let data_path = Path::new("/data/containers/1.dat");
    let data = sim.open(data_path, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*data, &[9u8; 8192], 0).unwrap();
    assert_eq!(sim.durable_len(data_path).unwrap(), 0);
    // The same file named twice is synced once.
    log.append_with(b"extent 1.dat 0..8192".to_vec(), vec![data.clone(), data.clone()]).unwrap();
    assert_eq!(sim.read_durable(data_path).unwrap(), vec![9u8; 8192]);
    assert_eq!(log.stats().dependency_syncs, 1);

    // A failed dependency sync fails the append and poisons the log.
    write_all_at(&*data, &[1u8; 10], 0).unwrap();
    sim.fail_path(data_path, SimOp::SyncData, SimFault::Eio);
    assert!(log.append_with(b"extent 2".to_vec(), vec![data.clone()]).is_err());
    assert!(matches!(log.append(vec![0]), Err(LogError::Poisoned(c)) if c.contains("1.dat")));
}
