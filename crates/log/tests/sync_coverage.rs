//! A sync makes durable only the groups whose write had returned before
//! it began, never one whose write returned while it was running. How: the
//! segment sync of LSN 4's group is held after its flush has reached the
//! simulated disk, before it returns; LSN 5's group is written meanwhile
//! (its bytes still pending) and waits, since only one sync may run. When
//! the held sync returns, LSN 4 must be published and LSN 5 not: it needs
//! a sync of its own, which is then held at its start. A crash at that
//! point loses LSN 5's bytes, and it must not have been acknowledged. A
//! log that counted as durable every group written before a sync
//! *returned* would acknowledge LSN 5 here and lose it.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{check_prefix, open, open_on, payload, Hooked, Hooks};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::{Log, Lsn, Options};

/// Long enough for any thread of this test to get the CPU; a wait that
/// passes it means the log did not do what the test waits for.
const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Debug, Default)]
struct GateState {
    /// The next segment sync is held after its flush, before it returns.
    hold_end: bool,
    /// A sync is held after its flush.
    end_held: bool,
    end_released: bool,
    /// Every segment sync is held at its start, before its flush.
    hold_starts: bool,
    /// Syncs held at their start.
    starts_held: u64,
    starts_released: bool,
    /// The append of LSN 5 returned.
    second_returned: bool,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    cond: Condvar,
}

fn is_segment(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "seg")
}

impl Hooks for Gate {
    fn before_sync(&self, path: &Path) -> larder_io::IoResult<()> {
        let mut st = self.state.lock().unwrap();
        if is_segment(path) && st.hold_starts {
            st.starts_held += 1;
            self.cond.notify_all();
            while !st.starts_released {
                st = self.cond.wait(st).unwrap();
            }
        }
        Ok(())
    }

    fn after_sync(&self, path: &Path) {
        let mut st = self.state.lock().unwrap();
        if !is_segment(path) || !st.hold_end {
            return;
        }
        st.hold_end = false;
        st.end_held = true;
        self.cond.notify_all();
        while !st.end_released {
            st = self.cond.wait(st).unwrap();
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

    fn update(&self, f: impl FnOnce(&mut GateState)) {
        f(&mut self.state.lock().unwrap());
        self.cond.notify_all();
    }
}

/// One sync at a time, so LSN 5's group waits for the held one.
fn options() -> Options {
    Options { segment_bytes: 256 << 10, max_groups_in_flight: 1, ..common::small_options() }
}

/// Whether some durable file of the log holds `needle`.
fn on_disk(image: &SimStorage, needle: &[u8]) -> bool {
    image.durable_file_names().iter().filter(|p| p.starts_with(common::DIR)).any(|p| {
        let bytes = image.read_durable(p).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle)
    })
}

/// Spins until the log has written `groups` groups: the log counts a group
/// once its write has returned, under the same lock that orders it
/// against the syncs, and tells no hook.
fn wait_for_groups(log: &Log, groups: u64) {
    let deadline = Instant::now() + PATIENCE;
    while log.stats().groups < groups {
        assert!(Instant::now() < deadline, "never: {groups} groups written");
        std::thread::yield_now();
    }
}

#[test]
fn a_group_written_while_a_sync_runs_waits_for_a_sync_that_began_after_it() {
    let sim = SimStorage::new(73);
    let gate = Arc::new(Gate::default());
    let storage = Hooked { inner: sim.clone(), hooks: gate.clone() }.storage();
    let (log, _) = open_on(storage, options(), 0).unwrap();
    for l in 1..=3 {
        assert_eq!(log.append(payload(l)).unwrap(), l);
    }
    let groups = log.stats().groups;
    let log = Arc::new(log);
    gate.update(|st| st.hold_end = true);
    let first = {
        let log = log.clone();
        std::thread::spawn(move || log.append(payload(4)))
    };
    gate.wait_for("the sync of LSN 4's group flushes and is held", |st| st.end_held);
    gate.update(|st| st.hold_starts = true);
    let second = {
        let (log, gate) = (log.clone(), gate.clone());
        std::thread::spawn(move || {
            let r = log.append(payload(5));
            gate.update(|st| st.second_returned = true);
            r
        })
    };
    wait_for_groups(&log, groups + 2);
    gate.update(|st| st.end_released = true);
    assert_eq!(first.join().unwrap().unwrap(), 4);
    gate.wait_for("LSN 5's group starts a sync, or is acknowledged", |st| st.starts_held > 0 || st.second_returned);
    assert_eq!(log.durable_lsn(), 4, "LSN 5 acknowledged by a sync that began before its write returned");
    assert!(!gate.state.lock().unwrap().second_returned);

    let image = sim.crash_with(CrashMode::DropAllPending);
    gate.update(|st| st.starts_released = true);
    assert!(second.join().unwrap().is_err(), "LSN 5's sync ran on a crashed machine");
    assert!(!on_disk(&image, &payload(5)), "LSN 5's bytes must be lost for this test to mean anything");
    let (log, replayed) = open(&image, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    assert_eq!(log.append(payload(5)).unwrap(), 5 as Lsn);
}
