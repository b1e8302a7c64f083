//! Workers, file migration and the load manager, through a running server
//! and the Rust client: requests are redirected, never lost, reordered or
//! applied twice, whatever moves meanwhile.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use larder_client::{Client, OpenOptions};
use larder_fs::Fs;
use larder_server::{LoadPolicy, Server, ServerOptions};
use rand::{Rng, SeedableRng};

fn served(workers: std::ops::RangeInclusive<u32>, policy: Option<LoadPolicy>) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Fs::create(&store, common::options()).unwrap();
    let mut options = ServerOptions::for_store(&store).workers(workers);
    options.load_policy = policy;
    (Server::start(Arc::new(fs), options).unwrap(), dir)
}

/// One record: who wrote it and its number, fixed width.
/// Client `c`'s own new file in `dir` (read-write) and the directory's
/// shared file, opened for appends.
fn own_and_shared(client: &Client, dir: &str, c: usize) -> (larder_client::File, larder_client::File) {
    let own = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(client, format!("{dir}/own{c}"))
        .unwrap();
    let shared = OpenOptions::new().append(true).open(client, format!("{dir}/shared")).unwrap();
    (own, shared)
}

fn record(client: usize, seq: usize) -> String {
    format!("{client:02}:{seq:06}\n")
}

const RECORD_BYTES: usize = 10;

/// Four clients write numbered records to files of their own (at fixed
/// offsets) and to one shared file (appending), while another thread
/// moves the open files between workers at random and changes the number
/// of active workers. Afterwards every file holds exactly what a model of
/// the writes says: each record once, each client's records in order.
#[test]
fn random_migrations_and_worker_changes_lose_reorder_and_repeat_nothing() {
    let (server, dir) = served(1..=3, None);
    let store = dir.path().join("store");
    let clients = 4;
    let records = 300;
    let setup = Client::connect(&store).unwrap();
    setup.create_dir("/w", 0o777).unwrap();
    setup.write("/w/shared", b"").unwrap();
    drop(setup);

    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(clients + 1));
    let server = Arc::new(server);
    let mover = {
        let (server, stop, start, store) = (server.clone(), stop.clone(), start.clone(), store.clone());
        std::thread::spawn(move || {
            let watcher = Client::connect(&store).unwrap();
            let shared_ino = watcher.metadata("/w/shared").unwrap().ino();
            let mut inos = vec![shared_ino];
            // The clients create their files before the barrier.
            start.wait();
            for c in 0..clients {
                inos.push(watcher.metadata(format!("/w/own{c}")).unwrap().ino());
            }
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let (mut moves, mut resizes) = (0u32, 0u32);
            while !stop.load(Ordering::Relaxed) {
                if rng.gen_bool(0.2) {
                    server.set_active_workers(rng.gen_range(1..=3));
                    resizes += 1;
                } else {
                    let ino = inos[rng.gen_range(0..inos.len())];
                    let to = rng.gen_range(0..server.active_workers());
                    if server.move_file(ino, to) {
                        moves += 1;
                    }
                }
                std::thread::yield_now();
            }
            (moves, resizes)
        })
    };

    let writers: Vec<_> = (0..clients)
        .map(|c| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                let client = Client::connect(&store).unwrap();
                let (own, mut shared) = own_and_shared(&client, "/w", c);
                start.wait();
                for seq in 0..records {
                    let line = record(c, seq);
                    assert_eq!(own.write_at(line.as_bytes(), (seq * RECORD_BYTES) as u64).unwrap(), RECORD_BYTES);
                    shared.write_all(line.as_bytes()).unwrap();
                    if seq % 50 == 49 {
                        own.sync_all().unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let (moves, resizes) = mover.join().unwrap();
    assert!(
        moves > 10 && resizes > 2,
        "the test moved too little to prove anything ({moves} moves, {resizes} resizes)"
    );

    let reader = Client::connect(&store).unwrap();
    for c in 0..clients {
        let expected: String = (0..records).map(|seq| record(c, seq)).collect();
        let got = String::from_utf8(reader.read(format!("/w/own{c}")).unwrap()).unwrap();
        assert_eq!(got, expected, "client {c}'s own file");
    }
    let shared = String::from_utf8(reader.read("/w/shared").unwrap()).unwrap();
    assert_eq!(shared.len(), clients * records * RECORD_BYTES, "every append once");
    let mut next = vec![0usize; clients];
    for line in shared.lines() {
        let (c, seq) = line.split_once(':').unwrap();
        let (c, seq): (usize, usize) = (c.parse().unwrap(), seq.parse().unwrap());
        assert_eq!(seq, next[c], "client {c}'s appends out of order or repeated");
        next[c] += 1;
    }
    assert_eq!(next, vec![records; clients]);
    let redirects: u64 = server.worker_requests().iter().map(|(_, r)| r).sum();
    assert!(redirects > 0, "no request was ever redirected: migration was not exercised");
    drop(reader);
    Arc::into_inner(server).unwrap().shutdown().unwrap();
}

/// Waits until `condition` holds, up to `limit`; whether it did.
fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::yield_now();
    }
    condition()
}

/// Clients that keep a worker busy make the load manager start more
/// workers and spread them; when they stop, it parks workers again down
/// to the minimum.
#[test]
fn the_load_manager_adds_workers_under_load_and_parks_them_when_idle() {
    let policy = LoadPolicy { window: Duration::from_millis(5), agree: 3, cap_at_cpus: false, ..LoadPolicy::default() };
    let (server, dir) = served(1..=3, Some(policy));
    let store = dir.path().join("store");
    assert_eq!(server.active_workers(), 1);
    let setup = Client::connect(&store).unwrap();
    setup.create_bucket("b").unwrap();
    drop(setup);
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|c| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let client = Client::connect(&store).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    client
                        .put("b", format!("c{c}/k{}", n % 64), &[0u8; 512], larder_client::Durability::Buffered)
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    // Grown, and the load spread: requests executed by more than one
    // worker (the load goes on until then: a worker is added before
    // clients move to it).
    let grew = eventually(Duration::from_secs(20), || server.active_workers() > 1);
    let spread = grew
        && eventually(Duration::from_secs(20), || {
            server.worker_requests().iter().filter(|(requests, _)| *requests > 0).count() > 1
        });
    stop.store(true, Ordering::Relaxed);
    let done: u64 = busy.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(grew, "three busy clients never made the manager add a worker ({done} puts)");
    assert!(spread, "a worker was added but nothing moved to it: {:?}", server.worker_requests());
    assert!(
        eventually(Duration::from_secs(20), || server.active_workers() == 1),
        "idle workers were not parked: {} active",
        server.active_workers()
    );
    server.shutdown().unwrap();
}

/// A policy under which the load manager acts after every 1 ms window:
/// any busy worker asks for another, any difference is rebalanced, and
/// a worker is parked whenever nobody is congested. So it keeps adding
/// and parking workers and moving clients and files while they work.
fn restless() -> LoadPolicy {
    LoadPolicy {
        window: Duration::from_millis(1),
        agree: 1,
        high: 0.0,
        low: 1e9,
        imbalance: 0.0,
        congestion: f64::INFINITY,
        cap_at_cpus: false,
        undo_windows: 0,
    }
}

/// Clients run random KV puts, gets and deletes (served at their home
/// worker), writes and reads at random offsets of a file of their own
/// (served by its owner) and appends to one shared file, while the load
/// manager itself adds and parks workers and moves clients and files
/// after every window. Every read is checked at once against a model of
/// that client's writes, and the shared file at the end: nothing lost,
/// reordered or applied twice.
#[test]
fn the_load_manager_moving_clients_and_files_loses_reorders_and_repeats_nothing() {
    let (server, dir) = served(1..=3, Some(restless()));
    let store = dir.path().join("store");
    let setup = Client::connect(&store).unwrap();
    setup.create_dir("/m", 0o777).unwrap();
    setup.write("/m/shared", b"").unwrap();
    setup.create_bucket("b").unwrap();
    drop(setup);
    let clients = 4;
    let steps = 600;
    const FILE_BYTES: usize = 64 << 10;
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let store = store.clone();
            std::thread::spawn(move || {
                let client = Client::connect(&store).unwrap();
                let (own, mut shared) = own_and_shared(&client, "/m", c);
                let mut rng = rand::rngs::StdRng::seed_from_u64(100 + c as u64);
                let mut file_model = vec![0u8; FILE_BYTES];
                own.write_at(&file_model, 0).unwrap();
                let mut kv_model: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
                let mut appended = 0usize;
                for step in 0..steps {
                    match rng.gen_range(0..6) {
                        0 => {
                            let key = format!("c{c}/k{}", rng.gen_range(0..16));
                            let value = format!("{c}:{step}").into_bytes();
                            client.put("b", &key, &value, larder_client::Durability::Buffered).unwrap();
                            kv_model.insert(key, value);
                        }
                        1 => {
                            let key = format!("c{c}/k{}", rng.gen_range(0..16));
                            let existed = client.delete("b", &key, larder_client::Durability::Buffered).unwrap();
                            assert_eq!(
                                existed,
                                kv_model.remove(&key).is_some(),
                                "client {c} step {step}: delete {key}"
                            );
                        }
                        2 => {
                            let key = format!("c{c}/k{}", rng.gen_range(0..16));
                            assert_eq!(
                                client.get("b", &key).unwrap(),
                                kv_model.get(&key).cloned(),
                                "client {c} step {step}: get {key}"
                            );
                        }
                        3 => {
                            let len = rng.gen_range(1..4096);
                            let offset = rng.gen_range(0..FILE_BYTES - len);
                            let byte = (step % 251) as u8 + 1;
                            let bytes = vec![byte; len];
                            assert_eq!(own.write_at(&bytes, offset as u64).unwrap(), len);
                            file_model[offset..offset + len].copy_from_slice(&bytes);
                        }
                        4 => {
                            let len = rng.gen_range(1..8192);
                            let offset = rng.gen_range(0..FILE_BYTES - len);
                            let mut back = vec![0u8; len];
                            let mut read = 0;
                            while read < len {
                                read += own.read_at(&mut back[read..], (offset + read) as u64).unwrap();
                            }
                            assert!(
                                back == file_model[offset..offset + len],
                                "client {c} step {step}: read at {offset}"
                            );
                        }
                        _ => {
                            shared.write_all(record(c, appended).as_bytes()).unwrap();
                            appended += 1;
                        }
                    }
                }
                assert!(client.read(format!("/m/own{c}")).unwrap() == file_model, "client {c}'s file at the end");
                appended
            })
        })
        .collect();
    let appended: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let counters = server.load_counters();
    assert!(
        counters.added > 2 && counters.parked > 2 && counters.clients_moved > 2 && counters.files_moved > 0,
        "the manager moved too little to prove anything: {counters:?}"
    );
    let reader = Client::connect(&store).unwrap();
    let shared = String::from_utf8(reader.read("/m/shared").unwrap()).unwrap();
    let mut next = vec![0usize; clients];
    for line in shared.lines() {
        let (c, seq) = line.split_once(':').unwrap();
        let (c, seq): (usize, usize) = (c.parse().unwrap(), seq.parse().unwrap());
        assert_eq!(seq, next[c], "client {c}'s appends out of order or repeated");
        next[c] += 1;
    }
    assert_eq!(next, appended, "every append once");
    drop(reader);
    server.shutdown().unwrap();
}
