//! One poison latch per store: a failed sync of any file kind (log, index
//! run or manifest, container, superblock), in any thread (a caller, the
//! index's flusher, the spare-container thread), or a panic of any
//! background thread (checkpointer, spares, index flusher and merger, log
//! flusher) stops every later write with the first cause, naming the
//! call, the file and the errno or the thread; reads keep working; a
//! reopen after a crash recovers every acknowledged put; fsck is clean.
//! And a commit whose follow-up work fails still returns its LSN.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::panicking::{Call, PanickingStorage};
use common::DIR;
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::{SimStorage, StorageRef};
use larder_kv::{Durability, Kv, KvError, KvOptions};
use larder_object::{CheckpointError, ObjectError, StoreHealth, ThreadState};

const BUCKET: &str = "b";

type Acked = BTreeMap<String, Vec<u8>>;

fn value(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

/// The test options with the chosen background threads on.
fn options(checkpointer: bool, index_workers: bool, log_flusher: bool) -> KvOptions {
    let mut o = common::options();
    o.store.background_checkpoints = checkpointer;
    o.store.index.background_threads = index_workers;
    o.store.log.buffered_sync_interval = log_flusher.then_some(Duration::from_millis(5));
    // Whole containers: the spares thread makes a new container file
    // ([`SPARE`]) rather than growing the first.
    o.store.space.initial_container_bytes = o.creation.container_bytes;
    o
}

/// Creates the store on `storage` with a bucket and a few acknowledged
/// durable puts.
fn start(storage: StorageRef, options: KvOptions) -> (Kv, Acked) {
    let kv = Kv::create_with(storage, Path::new(DIR), options).unwrap();
    kv.create_bucket(BUCKET).unwrap();
    let mut acked = Acked::new();
    for i in 0..5 {
        let key = format!("k{i}");
        kv.put(BUCKET, &key, &value(i, 100), Durability::Durable).unwrap();
        acked.insert(key, value(i, 100));
    }
    (kv, acked)
}

/// Waits until `done` holds of the store's health (bounded: a store that
/// never gets there fails the test).
fn wait_for(kv: &Kv, what: &str, done: impl Fn(&StoreHealth) -> bool) -> StoreHealth {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = kv.store().health();
        if done(&health) {
            return health;
        }
        assert!(Instant::now() < deadline, "never {what}: {health:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a thread whose name starts with `prefix` failed.
fn thread_failed(health: &StoreHealth, prefix: &str) -> bool {
    health.threads.iter().any(|t| t.name.starts_with(prefix) && t.state == ThreadState::Failed)
}

/// What every poisoned store must do. `cause_has` are pieces the first
/// cause must name; `failed` the thread that must show as failed.
fn check_poisoned(kv: Kv, sim: &SimStorage, acked: &Acked, cause_has: &[&str], failed: Option<&str>) {
    let health = wait_for(&kv, "poisoned", |h| h.poisoned.is_some());
    let cause = health.poisoned.clone().unwrap();
    for piece in cause_has {
        assert!(cause.contains(piece), "the first cause names {piece:?}: {cause}");
    }
    if let Some(thread) = failed {
        assert!(thread_failed(&health, thread), "{thread} failed: {health:?}");
    }
    // Every later write is refused with the first cause.
    let refused = |what: &str, r: Result<(), KvError>| match r {
        Err(KvError::Object(ObjectError::Poisoned { cause: c })) => assert_eq!(c, cause, "{what}"),
        other => panic!("{what}: expected the store's first cause, got {other:?}"),
    };
    refused("a durable put", kv.put(BUCKET, "after", b"x", Durability::Durable));
    refused("a buffered put", kv.put(BUCKET, "after", b"x", Durability::Buffered));
    refused("a delete", kv.delete(BUCKET, "k0", Durability::Durable).map(|_| ()));
    refused("a bucket", kv.create_bucket("other"));
    match kv.store().checkpoint() {
        Err(ObjectError::Poisoned { cause: c }) => assert_eq!(c, cause),
        other => panic!("a checkpoint: expected the store's first cause, got {other:?}"),
    }
    // Reads go on.
    for (k, v) in acked {
        assert_eq!(kv.get(BUCKET, k).unwrap().as_deref(), Some(&v[..]), "{k} while poisoned");
    }
    // No background thread of the store runs on.
    wait_for(&kv, "every thread ended", |h| {
        h.threads.iter().all(|t| !matches!(t.state, ThreadState::Running | ThreadState::Retrying))
    });
    let image = sim.crash_with(CrashMode::Random);
    drop(kv);
    let kv = Kv::open_with(Arc::new(image), Path::new(DIR), common::options()).unwrap();
    for (k, v) in acked {
        assert_eq!(kv.get(BUCKET, k).unwrap().as_deref(), Some(&v[..]), "{k} after reopen");
    }
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "fsck: {report}");
    kv.put(BUCKET, "again", b"y", Durability::Durable).unwrap();
    assert!(kv.store().health().poisoned.is_none());
}

fn files_under(sim: &SimStorage, dir: &str) -> Vec<std::path::PathBuf> {
    sim.file_names().into_iter().filter(|p| p.starts_with(dir)).collect()
}

#[test]
fn a_failed_log_sync_poisons_the_store() {
    let sim = SimStorage::new(1);
    let (kv, acked) = start(Arc::new(sim.clone()), options(true, true, false));
    for f in files_under(&sim, "/store/log") {
        sim.fail_path(f, SimOp::SyncData, SimFault::Eio);
    }
    assert!(kv.put(BUCKET, "lost", b"z", Durability::Durable).is_err());
    check_poisoned(kv, &sim, &acked, &["sync_data of /store/log/", "(errno 5)"], None);
}

#[test]
fn a_failed_index_run_sync_in_the_flush_worker_poisons_the_store() {
    let sim = SimStorage::new(2);
    let (kv, acked) = start(Arc::new(sim.clone()), options(false, true, false));
    // The log is durable: the flush's first sync is its run's.
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    match kv.store().checkpoint() {
        Err(ObjectError::Checkpoint { source: CheckpointError::IndexFlush(_), .. }) => {}
        other => panic!("expected a failed index flush, got {other:?}"),
    }
    check_poisoned(kv, &sim, &acked, &["sync_data of /store/index/", ".run", "(errno 5)"], Some("larder-flush"));
}

#[test]
fn a_failed_manifest_directory_sync_poisons_the_store_and_keeps_the_error_type() {
    let sim = SimStorage::new(3);
    let (kv, acked) = start(Arc::new(sim.clone()), options(false, false, false));
    sim.fail_path("/store/index", SimOp::SyncDir, SimFault::Eio);
    let err = kv.store().checkpoint().unwrap_err();
    match &err {
        ObjectError::Checkpoint { during: "a checkpoint", source: CheckpointError::IndexFlush(_) } => {}
        other => panic!("expected a typed checkpoint error, got {other:?}"),
    }
    // The chain reaches the io layer's error, with its errno.
    let mut chain = std::error::Error::source(&err);
    let mut found_io = false;
    while let Some(e) = chain {
        found_io |= e.downcast_ref::<larder_io::IoError>().is_some_and(|io| io.errno() == Some(5))
            || e.downcast_ref::<std::io::Error>().is_some_and(|io| io.raw_os_error() == Some(5));
        chain = e.source();
    }
    assert!(found_io, "source() leads to the failed sync: {err}");
    check_poisoned(kv, &sim, &acked, &["sync_dir of /store/index failed (errno 5)"], None);
}

#[test]
fn a_failed_container_sync_poisons_the_store() {
    let sim = SimStorage::new(4);
    let (kv, acked) = start(Arc::new(sim.clone()), options(false, false, false));
    // The first large value creates the container: its sync (creating it,
    // or of the value's data) fails.
    let container = "/store/data/0000000000000000.ctr";
    sim.fail_path(container, SimOp::SyncData, SimFault::Eio);
    sim.fail_path(container, SimOp::WriteBack, SimFault::Eio);
    assert!(kv.put(BUCKET, "big", &value(9, 64 << 10), Durability::Durable).is_err());
    check_poisoned(kv, &sim, &acked, &[container, "(errno 5)"], None);
}

#[test]
fn a_failed_superblock_sync_fails_the_create_naming_the_file() {
    let sim = SimStorage::new(5);
    sim.fail_path("/store/SUPERBLOCK.new", SimOp::SyncData, SimFault::Eio);
    sim.fail_path("/store/SUPERBLOCK", SimOp::SyncData, SimFault::Eio);
    let err = Kv::create_with(Arc::new(sim.clone()), Path::new(DIR), common::options()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/store/SUPERBLOCK") && text.contains("os error 5"), "{text}");
}

/// The spare container the spares thread makes once the first is used.
const SPARE: &str = "/store/data/0000000000000001.ctr";

/// A large durable put: it creates the first container, after which the
/// spares thread makes [`SPARE`].
fn first_large_put(kv: &Kv, acked: &mut Acked) {
    kv.put(BUCKET, "big", &value(3, 64 << 10), Durability::Durable).unwrap();
    acked.insert("big".into(), value(3, 64 << 10));
}

/// [`first_large_put`] when making [`SPARE`] poisons the store: the spares
/// thread starts on it once the put has allocated, so the poison may come
/// before the put's record commits, and the put is then refused with it
/// (and not acknowledged). Any other outcome fails the test.
fn first_large_put_racing_the_poison(kv: &Kv, acked: &mut Acked) {
    match kv.put(BUCKET, "big", &value(3, 64 << 10), Durability::Durable) {
        Ok(()) => {
            acked.insert("big".into(), value(3, 64 << 10));
        }
        Err(KvError::Object(ObjectError::Poisoned { .. })) => {}
        Err(other) => panic!("the first large put: {other:?}"),
    }
}

#[test]
fn a_failed_sync_in_the_spares_thread_poisons_the_store() {
    let sim = SimStorage::new(6);
    sim.fail_path(SPARE, SimOp::SyncData, SimFault::Eio);
    let (kv, mut acked) = start(Arc::new(sim.clone()), options(true, false, false));
    first_large_put_racing_the_poison(&kv, &mut acked);
    check_poisoned(
        kv,
        &sim,
        &acked,
        &["sync_data of /store/data/0000000000000001.ctr", "(errno 5)"],
        Some("larder-spares"),
    );
}

/// Durable puts of log-filling values until one is refused, adding the
/// acknowledged ones to `acked`. Once the injected panic has fired, the
/// puts stop until the store reports the poison (the panicking thread
/// records it as it unwinds, which a busy machine may delay behind many
/// fast puts), then one more put must be refused.
fn put_until_refused(kv: &Kv, acked: &mut Acked, storage: &PanickingStorage, limit: usize) {
    for i in 0..limit {
        if storage.fired() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while kv.store().health().poisoned.is_none() && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        let key = format!("fill{i}");
        let v = value(i, 1500);
        match kv.put(BUCKET, &key, &v, Durability::Durable) {
            Ok(()) => {
                acked.insert(key, v);
            }
            Err(_) => return,
        }
    }
    panic!("{limit} puts and no refusal: {:?}", kv.store().health());
}

#[test]
fn a_panic_in_the_checkpointer_poisons_the_store() {
    let sim = SimStorage::new(7);
    // Index flushes run inline in the checkpointer's thread.
    let storage = PanickingStorage::new(Arc::new(sim.clone()), "larder-checkpoint", Call::Write, "/store/index/");
    let (kv, mut acked) = start(Arc::new(storage.clone()), options(true, false, false));
    put_until_refused(&kv, &mut acked, &storage, 5000);
    assert!(storage.fired());
    check_poisoned(kv, &sim, &acked, &["larder-checkpoint panicked", "injected panic"], Some("larder-checkpoint"));
}

#[test]
fn a_panic_in_the_spares_thread_poisons_the_store() {
    let sim = SimStorage::new(8);
    let storage = PanickingStorage::new(Arc::new(sim.clone()), "larder-spares", Call::Write, SPARE);
    let (kv, mut acked) = start(Arc::new(storage.clone()), options(true, false, false));
    first_large_put_racing_the_poison(&kv, &mut acked);
    check_poisoned(kv, &sim, &acked, &["larder-spares panicked", "injected panic"], Some("larder-spares"));
}

#[test]
fn a_panic_in_the_index_flush_worker_poisons_the_store() {
    let sim = SimStorage::new(9);
    let storage = PanickingStorage::new(Arc::new(sim.clone()), "larder-flush", Call::Write, "/store/index/");
    let (kv, acked) = start(Arc::new(storage.clone()), options(false, true, false));
    assert!(kv.store().checkpoint().is_err());
    check_poisoned(kv, &sim, &acked, &["larder-flush panicked"], Some("larder-flush"));
}

#[test]
fn a_panic_in_an_index_merge_worker_poisons_the_store() {
    let sim = SimStorage::new(10);
    let storage = PanickingStorage::new(Arc::new(sim.clone()), "larder-merge", Call::Write, "/store/index/");
    let (kv, mut acked) = start(Arc::new(storage.clone()), options(false, true, false));
    // Each checkpoint adds a run; enough of them start a merge.
    for i in 0..64 {
        let key = format!("m{i}");
        if kv.put(BUCKET, &key, &value(i, 64), Durability::Durable).is_err() {
            break;
        }
        acked.insert(key, value(i, 64));
        if kv.store().checkpoint().is_err() || storage.fired() {
            break;
        }
    }
    assert!(storage.fired(), "no merge ran");
    check_poisoned(kv, &sim, &acked, &["larder-merge-", "panicked"], Some("larder-merge-"));
}

#[test]
fn a_panic_in_the_log_flusher_poisons_the_store() {
    let sim = SimStorage::new(11);
    let storage = PanickingStorage::new(Arc::new(sim.clone()), "larder-log-flush", Call::Sync, "/store/log/");
    let (kv, acked) = start(Arc::new(storage.clone()), options(false, false, true));
    // Only the flusher syncs a buffered put.
    kv.put(BUCKET, "buffered", b"b", Durability::Buffered).unwrap();
    check_poisoned(kv, &sim, &acked, &["larder-log-flush panicked"], Some("larder-log-flush"));
}

#[test]
fn a_commit_whose_checkpoint_fails_afterwards_still_returns_its_lsn() {
    let sim = SimStorage::new(12);
    // No checkpointer: the commit that fills the log checkpoints itself,
    // after its record is durable; that checkpoint's flush fails.
    let (kv, mut acked) = start(Arc::new(sim.clone()), options(false, false, false));
    sim.fail_path("/store/index", SimOp::SyncDir, SimFault::Eio);
    let mut puts_after_arming = 0;
    loop {
        let poisoned_before = kv.store().health().poisoned.is_some();
        let key = format!("fill{puts_after_arming}");
        let v = value(puts_after_arming, 1500);
        let r = kv.put(BUCKET, &key, &v, Durability::Durable);
        if poisoned_before {
            assert!(matches!(r, Err(KvError::Object(ObjectError::Poisoned { .. }))), "{r:?}");
            break;
        }
        // The put committed, whatever its checkpoint did after.
        r.unwrap_or_else(|e| panic!("put {puts_after_arming} committed but returned {e}"));
        acked.insert(key, v);
        puts_after_arming += 1;
        assert!(puts_after_arming < 5000, "the log never asked for a checkpoint");
    }
    check_poisoned(kv, &sim, &acked, &["sync_dir of /store/index failed (errno 5)"], None);
}

#[test]
fn a_failed_recovery_checkpoint_keeps_its_type_and_source() {
    let sim = SimStorage::new(13);
    let (kv, acked) = start(Arc::new(sim.clone()), options(false, false, false));
    // Dropped without a close: its records are in the log, not the index,
    // so the next open replays them and checkpoints.
    drop(kv);
    sim.fail_path("/store/index", SimOp::SyncDir, SimFault::Eio);
    let err = Kv::open_with(Arc::new(sim.clone()), Path::new(DIR), common::options()).unwrap_err();
    match &err {
        KvError::Object(ObjectError::Checkpoint { during: "recovery", source: CheckpointError::IndexFlush(_) }) => {}
        other => panic!("expected a typed recovery checkpoint error, got {other:?}"),
    }
    assert!(std::error::Error::source(&err).is_some(), "{err}");
    // Nothing was lost: the next open recovers every acknowledged put.
    let kv = Kv::open_with(Arc::new(sim.clone()), Path::new(DIR), common::options()).unwrap();
    for (k, v) in &acked {
        assert_eq!(kv.get(BUCKET, k).unwrap().as_deref(), Some(&v[..]), "{k}");
    }
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "fsck: {report}");
}

#[test]
fn a_full_disk_makes_the_spares_thread_retry_without_poisoning() {
    let sim = SimStorage::new(14);
    let (kv, mut acked) = start(Arc::new(sim.clone()), options(true, false, false));
    // The file system says it has room, but the spare's first write finds
    // none (another program took it meanwhile).
    sim.fail_path(SPARE, SimOp::Write, SimFault::NoSpace);
    first_large_put(&kv, &mut acked);
    let health = wait_for(&kv, "retrying", |h| h.threads.iter().any(|t| t.name == "larder-spares" && t.retries > 0));
    let spares = health.threads.iter().find(|t| t.name == "larder-spares").unwrap();
    assert!(spares.last_error.as_deref().is_some_and(|e| e.contains("no space")), "{spares:?}");
    assert_eq!(health.poisoned, None, "a full disk does not poison the store");
    kv.put(BUCKET, "small", b"still writable", Durability::Durable).unwrap();
    acked.insert("small".into(), b"still writable".to_vec());
    // Space comes back (the fault fired once): the thread makes its spare
    // and runs on.
    wait_for(&kv, "running again", |h| {
        h.threads.iter().any(|t| t.name == "larder-spares" && t.state == ThreadState::Running)
            && kv.store().space().stats().spare_containers > 0
    });
    for (k, v) in &acked {
        assert_eq!(kv.get(BUCKET, k).unwrap().as_deref(), Some(&v[..]), "{k}");
    }
}
