//! Groups written and synced at the same time are acknowledged in order,
//! and a crash that keeps a later group but not an earlier one replays
//! neither. How: (1) a storage hook holds the write of one group while a
//! second appender's group is written and synced past it; the machine then
//! crashes, and reopening must replay only what came before the held group
//! although the later group is on disk (and the log must go on after it);
//! (2) 8 threads append concurrently on small segments and the machine
//! crashes after a sampled write, in every crash mode: replay must be a
//! gap-free prefix holding every acknowledged record, each thread's records
//! in its own order, with groups overlapping during the campaign; (3) a
//! replay that stops before a record whose group was followed by an
//! overlapping one ends the log there, and the later group never returns.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{check_prefix, open, open_on, payload, Hooked, Hooks, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::{Log, Lsn, Options, Replay, ReplayRecord};

/// Long enough for any thread of this test to get the CPU; a wait that
/// passes it means the log did not do what the test waits for.
const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Debug, Default)]
struct GateState {
    /// The next segment write is held.
    armed: bool,
    /// A write is being held.
    holding: bool,
    released: bool,
    /// Segment syncs that finished while a write was held.
    syncs_past: u64,
}

/// Holds the first segment write after arming until released, counting the
/// segment syncs that finish meanwhile.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    cond: Condvar,
}

fn is_segment(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "seg")
}

impl Hooks for Gate {
    fn before_write(&self, path: &Path, _offset: u64) {
        let mut st = self.state.lock().unwrap();
        if !is_segment(path) || !st.armed {
            return;
        }
        st.armed = false;
        st.holding = true;
        self.cond.notify_all();
        while !st.released {
            st = self.cond.wait(st).unwrap();
        }
    }

    fn after_sync(&self, path: &Path) {
        let mut st = self.state.lock().unwrap();
        if is_segment(path) && st.holding {
            st.syncs_past += 1;
            self.cond.notify_all();
        }
    }
}

impl Gate {
    /// Waits until `done` holds, failing the test after [`PATIENCE`].
    fn wait_for(&self, what: &str, done: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        let mut st = self.state.lock().unwrap();
        while !done(&st) {
            let left = deadline.checked_duration_since(Instant::now()).unwrap_or_else(|| panic!("never: {what}"));
            st = self.cond.wait_timeout(st, left).unwrap().0;
        }
    }
}

fn options(in_flight: usize) -> Options {
    Options { segment_bytes: 256 << 10, max_groups_in_flight: in_flight, ..common::small_options() }
}

/// Whether some durable file of the log holds `needle`.
fn on_disk(image: &SimStorage, needle: &[u8]) -> bool {
    image.durable_file_names().iter().filter(|p| p.starts_with(DIR)).any(|p| {
        let bytes = image.read_durable(p).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle)
    })
}

type Appending = std::thread::JoinHandle<larder_log::Result<Lsn>>;

/// A log on `sim` holding LSNs 1-3, then LSN 4's group held at its write
/// while LSN 5's group is written and synced past it. Returns the log, the
/// gate, and the two appending threads (4's, then 5's).
fn overtaken(sim: &SimStorage) -> (Arc<Log>, Arc<Gate>, Appending, Appending) {
    let gate = Arc::new(Gate::default());
    let storage = Hooked { inner: sim.clone(), hooks: gate.clone() }.storage();
    let (log, _) = open_on(storage, options(2), 0).unwrap();
    for l in 1..=3 {
        assert_eq!(log.append(payload(l)).unwrap(), l);
    }
    let log = Arc::new(log);
    gate.state.lock().unwrap().armed = true;
    let append = |l: Lsn| {
        let log = log.clone();
        std::thread::spawn(move || log.append(payload(l)))
    };
    let first = append(4);
    gate.wait_for("the group of LSN 4 reaches its write", |st| st.holding);
    let second = append(5);
    // With one group at a time this never happens: LSN 5 would wait.
    gate.wait_for("the group of LSN 5 is written and synced past it", |st| st.syncs_past >= 1);
    (log, gate, first, second)
}

#[test]
fn a_later_group_on_disk_without_the_one_before_is_never_replayed() {
    let sim = SimStorage::new(71);
    let (log, gate, first, second) = overtaken(&sim);
    assert_eq!(log.durable_lsn(), 3, "LSN 5 must not be acknowledged before LSN 4");
    assert_eq!(log.stats().overlapped_groups, 1);

    let image = sim.crash_with(CrashMode::DropAllPending);
    {
        let mut st = gate.state.lock().unwrap();
        st.released = true;
        gate.cond.notify_all();
    }
    assert!(first.join().unwrap().is_err(), "the held write ran on a crashed machine");
    assert!(second.join().unwrap().is_err(), "LSN 5 acknowledged without LSN 4");
    assert!(on_disk(&image, &payload(5)), "the later group should be on disk for this test to mean anything");
    assert!(!on_disk(&image, &payload(4)));

    let (log, replayed) = open(&image, options(2), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 3, "only the records before the gap come back");
    for l in 4..=6 {
        assert_eq!(log.append(payload(l)).unwrap(), l);
    }
    log.close().unwrap();
    let (_, replayed) = open(&image, options(2), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 6, "the log goes on after the gap, and the stale group stays dead");
}

const THREADS: u64 = 8;
const PER_THREAD: u64 = 40;

/// `(thread, i)` and filler of a size derived from them.
fn record(t: u64, i: u64) -> Vec<u8> {
    let mut p = t.to_le_bytes().to_vec();
    p.extend(i.to_le_bytes());
    p.resize(16 + ((t * 37 + i * 91) % 700) as usize, (t * 7 + i) as u8);
    p
}

fn decode(p: &[u8]) -> (u64, u64) {
    let word = |r: std::ops::Range<usize>| u64::from_le_bytes(p[r].try_into().unwrap());
    (word(0..8), word(8..16))
}

fn campaign_options() -> Options {
    Options { segment_bytes: 32 << 10, max_segments: 64, max_groups_in_flight: 4, ..common::small_options() }
}

/// Runs the threads until they finish or the machine crashes; returns
/// every acknowledged (LSN, payload) and the log's overlapped groups.
fn concurrent_workload(sim: &SimStorage) -> (BTreeMap<Lsn, Vec<u8>>, u64) {
    let Ok((log, _)) = open(sim, campaign_options(), 0) else { return (BTreeMap::new(), 0) };
    let log = Arc::new(log);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..PER_THREAD {
                    match log.append(record(t, i)) {
                        Ok(lsn) => acked.push((lsn, record(t, i))),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    let acked = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let overlapped = log.stats().overlapped_groups;
    (acked, overlapped)
}

fn check_image(image: &SimStorage, acked: &BTreeMap<Lsn, Vec<u8>>, what: &str) {
    let storage: larder_io::StorageRef = Arc::new(image.clone());
    let (_, replayed) = open_on(storage, campaign_options(), 0).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    let mut last_of: HashMap<u64, u64> = HashMap::new();
    for (n, (lsn, p)) in replayed.iter().enumerate() {
        assert_eq!(*lsn, n as u64 + 1, "{what}: replay is not gap-free");
        let (t, i) = decode(p);
        assert_eq!(p, &record(t, i), "{what}: payload of LSN {lsn} damaged");
        if let Some(prev) = last_of.insert(t, i) {
            assert!(i > prev, "{what}: thread {t}'s record {i} replayed after its record {prev}");
        }
        if let Some(want) = acked.get(lsn) {
            assert_eq!(p, want, "{what}: LSN {lsn} is not the record acknowledged for it");
        }
    }
    let end = replayed.len() as u64;
    if let Some((&max, _)) = acked.last_key_value() {
        assert!(end >= max, "{what}: acknowledged {max} but replay ends at {end}");
    }
}

#[test]
fn concurrent_appends_survive_a_crash_at_sampled_writes() {
    let probe = SimStorage::new(7);
    let (acked, _) = concurrent_workload(&probe);
    assert_eq!(acked.len() as u64, THREADS * PER_THREAD);
    let writes = probe.counters().writes;
    let mut overlapped = 0;
    for (n, k) in (1..writes).step_by((writes as usize / 40).max(1)).enumerate() {
        for (mi, mode) in
            [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending].into_iter().enumerate()
        {
            let sim = SimStorage::new(5000 + n as u64 * 3 + mi as u64);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let (acked, o) = concurrent_workload(&sim);
            overlapped += o;
            check_image(&sim.crash_with(mode), &acked, &format!("crash after write {k} ({mode:?})"));
        }
    }
    assert!(overlapped > 0, "no group ever overlapped another: the campaign tested nothing new");
}

#[test]
fn a_replay_stop_before_a_group_an_overlapping_one_followed_ends_the_log_there() {
    let sim = SimStorage::new(72);
    let (log, gate, first, second) = overtaken(&sim);
    {
        let mut st = gate.state.lock().unwrap();
        st.released = true;
        gate.cond.notify_all();
    }
    assert_eq!(first.join().unwrap().unwrap(), 4);
    assert_eq!(second.join().unwrap().unwrap(), 5);
    Arc::try_unwrap(log).unwrap().close().unwrap();

    // Only headers claiming LSN 3 acknowledged are on disk: LSN 4's data
    // may be found damaged (a crash before its dependency files synced).
    let open_stopping = |stop: Option<Lsn>| {
        let storage: larder_io::StorageRef = Arc::new(sim.clone());
        let mut replayed = Vec::new();
        let log = Log::open_with(storage, Path::new(DIR), options(2), 0, |r: ReplayRecord<'_>| {
            if Some(r.lsn) == stop {
                return Ok::<_, std::io::Error>(Replay::StopBefore);
            }
            replayed.push((r.lsn, r.payload.to_vec()));
            Ok(Replay::Continue)
        })
        .unwrap();
        (log, replayed)
    };
    let (log, replayed) = open_stopping(Some(4));
    assert_eq!(log.recovery_report().acked_lsn, 3);
    assert_eq!(check_prefix(&replayed, 0), 3);
    assert_eq!(log.append(b"after the cut".to_vec()).unwrap(), 4);
    log.close().unwrap();
    let (_, replayed) = open_stopping(None);
    assert_eq!(
        replayed.len(),
        4,
        "LSN 5's group must stay dead: {:?}",
        replayed.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert_eq!(replayed[3], (4, b"after the cut".to_vec()));
}
