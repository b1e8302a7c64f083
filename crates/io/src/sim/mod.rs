//! `SimStorage`: an in-memory file system for crash and fault tests,
//! deterministic from a `u64` seed.
//!
//! # Fault model
//!
//! **Files.** Every file has a *live* image (what reads return) and a
//! *durable* image (what survives a crash), and an ordered list of *pending*
//! operations: the writes, `set_len`, `allocate` and `punch_hole` calls made
//! since its last successful `sync_data`. Each operation changes the live
//! image at once. `sync_data` on a file moves exactly that file's pending
//! operations into its durable image; it persists nothing of any other file
//! and no name. Reads past the end return fewer bytes; `allocate` extends
//! the file with zeros and keeps existing bytes; `punch_hole` zeros the
//! range inside the file and keeps its length.
//!
//! **Names.** Creating a file (open with create), `rename`, `remove_file` and
//! `create_dir_all` change the live namespace at once and are queued on the
//! directory that holds the name. `sync_dir(dir)` makes that directory's
//! queue durable. A file's data and its name are durable independently: a
//! synced file whose create was never dir-synced is gone after a crash. A
//! rename must stay in one directory. Open handles refer to files, not
//! names (like inodes), so they keep working after a rename or remove. The
//! root (`/` or the empty path) and first-level directories (`/data`,
//! `data`) exist durably from the start; deeper ones must be created.
//!
//! **Crash.** [`SimStorage::crash`] returns a new machine (a reboot) whose
//! live and durable state both equal this machine's durable state plus,
//! drawn from the seed:
//! - per file, each pending operation independently kept or dropped, applied
//!   in order; a kept write may instead be *torn*: any subset of its pieces
//!   split at absolute 512-byte sector boundaries reaches the disk and the
//!   rest does not (a torn write may extend the file only to the end of its
//!   last surviving piece);
//! - per directory, a random prefix of its pending namespace operations (so
//!   an unsynced create, rename or remove may be lost), or, after
//!   [`SimStorage::set_unordered_dir_ops`], any subset of them, each kept or
//!   dropped on its own (so a rename may survive while the create of a file
//!   before it is lost: POSIX orders nothing in a directory until it is
//!   synced, and file systems that do not journal names in order lose
//!   them so); names in a directory whose own entry was lost go with it.
//!
//! Bytes outside a write's range never change; nothing is ever invented.
//! [`CrashMode`] offers the two extremes (drop or keep everything pending)
//! for tests that need them. The old handle and all its files then fail
//! every call with [`IoError::Crashed`], so threads of the old engine stop.
//!
//! **Crash points.** [`SimStorage::crash_after_writes`]`(k)` crashes the
//! machine right after `k` more successful `write_at` calls (across all
//! files): every later call fails with `Crashed` and the `k+1`-th write does
//! not happen. [`SimStorage::crash_after_syncs`] does the same counting
//! successful `sync_data` and `sync_dir` calls, and
//! [`SimStorage::crash_after_namespace_ops`] namespace operations (creates,
//! renames, removes, new directories). `k = 0` crashes at once.
//! The test then takes the image with [`SimStorage::crash`].
//!
//! **Faults.** [`SimStorage::fail_nth`]`(op, n, fault)` makes the `n`-th
//! future call of kind `op` (1-based, counted from arming) fail:
//! - [`SimFault::Eio`]: `IoError::Os` with errno 5; nothing changes;
//! - [`SimFault::NoSpace`]: `IoError::NoSpace`; nothing changes;
//! - [`SimFault::ShortWrite`]: `write_at` writes the first half of the
//!   buffer (at least one byte) and returns that count;
//! - [`SimFault::BitFlip`]: `read_at` succeeds with one seed-chosen bit of
//!   the returned bytes flipped; the images are unchanged.
//!
//! `ShortWrite` and `BitFlip` on other calls act as `Eio`. A failed
//! `sync_data` (any fault) drops the file's pending operations for good:
//! the live image keeps them but they never become durable, and the next
//! sync reports success, like Linux after a failed fsync. A failed
//! `sync_dir` changes nothing (its queue stays pending).
//!
//! **Damage and capacity.** [`SimStorage::corrupt`] flips bits in both
//! images (bit rot). [`SimStorage::set_capacity`] makes writes, `set_len` and
//! `allocate` fail with `NoSpace` when the sum of named files' live lengths
//! would exceed the limit.
//!
//! Locks are an in-process table keyed by path. All randomness comes from
//! one `StdRng` seeded with the seed, so the same calls in the same order
//! give the same results.

mod campaign;
mod crash;
mod faults;
mod file;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use campaign::{campaign_seeds, crash_at_every_point, crash_runs, CampaignShape, CrashRun};
pub use crash::CrashMode;
pub use faults::{SimFault, SimOp};

use crate::error::{IoError, IoResult};
use faults::ArmedFault;
use state::State;

/// Calls completed by a [`SimStorage`] since it was created (or rebooted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// Successful `read_at` calls.
    pub reads: u64,
    /// Bytes returned by reads.
    pub bytes_read: u64,
    /// Successful `write_at` calls (short ones included).
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Successful `sync_data` calls.
    pub syncs: u64,
    /// Successful `write_back` calls.
    pub write_backs: u64,
    /// Successful `sync_dir` calls.
    pub dir_syncs: u64,
    /// Namespace operations queued on a directory: file creates, renames,
    /// removes and each directory `create_dir_all` made.
    pub namespace_ops: u64,
    /// Successful `open` calls.
    pub opens: u64,
    /// Files created (by `open` or `lock`).
    pub creates: u64,
    /// Successful renames.
    pub renames: u64,
    /// Successful removes.
    pub removes: u64,
    /// Successful `allocate` calls.
    pub allocates: u64,
    /// Successful `punch_hole` calls.
    pub punch_holes: u64,
    /// Successful `set_len` calls.
    pub set_lens: u64,
    /// Armed faults that fired.
    pub faults_injected: u64,
}

/// A simulated machine with crash and fault injection; see the module docs
/// for the exact model. Cloning gives another handle to the same machine.
#[derive(Clone)]
pub struct SimStorage {
    state: Arc<Mutex<State>>,
    seed: u64,
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimStorage").field("seed", &self.seed).finish_non_exhaustive()
    }
}

impl SimStorage {
    /// A new, empty machine whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> SimStorage {
        SimStorage { state: Arc::new(Mutex::new(State::from_seed(seed))), seed }
    }

    /// The seed this machine (or the machine it rebooted from) started with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Crashes with [`CrashMode::Random`]; see [`SimStorage::crash_with`].
    pub fn crash(&self) -> SimStorage {
        self.crash_with(CrashMode::Random)
    }

    /// Crashes this machine and returns the rebooted one: its state is the
    /// durable state here plus what `mode` keeps of the pending operations.
    /// This handle and its files fail with [`IoError::Crashed`] from now on.
    /// Calling it again on this handle draws another image of the same
    /// pre-crash state.
    pub fn crash_with(&self, mode: CrashMode) -> SimStorage {
        let next = crash::crash(&mut self.state.lock(), mode);
        SimStorage { state: Arc::new(Mutex::new(next)), seed: self.seed }
    }

    /// Crashes the machine right after `k` more successful `write_at` calls
    /// (at once if `k` is 0).
    pub fn crash_after_writes(&self, k: u64) {
        let mut st = self.state.lock();
        if k == 0 {
            st.crashed = true;
        } else {
            st.writes_left = Some(k);
        }
    }

    /// Crashes the machine right after `k` more successful `sync_data` or
    /// `sync_dir` calls (at once if `k` is 0).
    pub fn crash_after_syncs(&self, k: u64) {
        let mut st = self.state.lock();
        if k == 0 {
            st.crashed = true;
        } else {
            st.syncs_left = Some(k);
        }
    }

    /// Crashes the machine right after the call that makes the `k`-th more
    /// namespace operation (a file create, rename or remove, or a directory
    /// `create_dir_all` makes), at once if `k` is 0: the crash that lands
    /// between a rename and the directory sync that would make it durable.
    pub fn crash_after_namespace_ops(&self, k: u64) {
        let mut st = self.state.lock();
        if k == 0 {
            st.crashed = true;
        } else {
            st.names_left = Some(k);
        }
    }

    /// Whether the machine has crashed (every call fails with `Crashed`).
    pub fn is_crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// Calls completed so far.
    pub fn counters(&self) -> SimCounters {
        self.state.lock().counters
    }

    /// Makes the `n`-th future call of kind `op` (1-based; 0 counts as 1)
    /// fail with `fault`.
    pub fn fail_nth(&self, op: SimOp, n: u64, fault: SimFault) {
        self.state.lock().faults.push(ArmedFault { op, path: None, remaining: n.max(1), fault });
    }

    /// Arms one fault of a kind drawn by `draw` (a random number) at a call
    /// drawn among those a probe run of the same workload made of its kind
    /// (`probe`): a short or full write, EIO on a sync, write-back, open,
    /// rename, punch, directory sync or read, ENOSPC on an allocate. Returns
    /// what it armed, for a failure message.
    pub fn fail_one_at_random(&self, probe: &SimCounters, draw: u64) -> String {
        let kinds = [
            (SimOp::Write, probe.writes, SimFault::ShortWrite),
            (SimOp::Write, probe.writes, SimFault::NoSpace),
            (SimOp::SyncData, probe.syncs, SimFault::Eio),
            (SimOp::WriteBack, probe.write_backs, SimFault::Eio),
            (SimOp::Allocate, probe.allocates, SimFault::NoSpace),
            (SimOp::Open, probe.opens, SimFault::Eio),
            (SimOp::Rename, probe.renames, SimFault::Eio),
            (SimOp::PunchHole, probe.punch_holes, SimFault::Eio),
            (SimOp::SyncDir, probe.dir_syncs, SimFault::Eio),
            (SimOp::Read, probe.reads, SimFault::Eio),
        ];
        let (op, count, fault) = kinds[(draw % kinds.len() as u64) as usize];
        let n = (draw / kinds.len() as u64) % count.max(1) + 1;
        self.fail_nth(op, n, fault);
        format!("{fault:?} at {op:?} call {n} of {count}")
    }

    /// Makes the next call of kind `op` on `path` fail with `fault` (for a
    /// rename, `path` may be either name).
    pub fn fail_path(&self, path: impl AsRef<Path>, op: SimOp, fault: SimFault) {
        let path = Some(path.as_ref().to_path_buf());
        self.state.lock().faults.push(ArmedFault { op, path, remaining: 1, fault });
    }

    /// Disarms every fault that has not fired yet.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Makes every later [`CrashMode::Random`] crash of this machine, and
    /// of the machines it reboots into, keep any subset of each directory's
    /// unsynced namespace operations instead of a prefix of them. Tests of
    /// code that must not rely on names persisting in order turn it on.
    pub fn set_unordered_dir_ops(&self, on: bool) {
        self.state.lock().unordered_dir_ops = on;
    }

    /// Limits the sum of named files' live lengths less their punched
    /// ranges (punched since the last crash); `u64::MAX` removes the
    /// limit. Growth past it, or a write into a punched range past it,
    /// fails with `NoSpace`; [`crate::Storage::available_bytes`] reports what is
    /// left.
    pub fn set_capacity(&self, bytes: u64) {
        self.state.lock().capacity = bytes;
    }

    /// Flips the bits of `xor_mask` in the byte at `offset` of the file now
    /// named `path`, in both its live and durable image (bit rot).
    pub fn corrupt(&self, path: impl AsRef<Path>, offset: u64, xor_mask: u8) -> IoResult<()> {
        let path = path.as_ref();
        let mut st = self.state.lock();
        let id = st.live_file(path)?;
        let file = st.file_mut(id, path)?;
        let mut hit = false;
        for image in [&mut file.live, &mut file.durable] {
            if let Some(byte) = usize::try_from(offset).ok().and_then(|o| image.get_mut(o)) {
                *byte ^= xor_mask;
                hit = true;
            }
        }
        if hit {
            Ok(())
        } else {
            Err(IoError::InvalidInput { path: path.to_path_buf(), reason: "corrupt offset past end of file" })
        }
    }

    /// Length of the durable image of the file now named `path`.
    pub fn durable_len(&self, path: impl AsRef<Path>) -> IoResult<u64> {
        Ok(self.read_durable(path)?.len() as u64)
    }

    /// The durable image of the file now named `path` (what a crash that
    /// drops every pending operation would leave).
    pub fn read_durable(&self, path: impl AsRef<Path>) -> IoResult<Vec<u8>> {
        let path = path.as_ref();
        let st = self.state.lock();
        let id = st.live_file(path)?;
        Ok(st.file(id, path)?.durable.clone())
    }

    /// Live file names, sorted.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.state.lock().live.files.keys().cloned().collect()
    }

    /// File names that are durable (would survive a crash), sorted.
    pub fn durable_file_names(&self) -> Vec<PathBuf> {
        self.state.lock().durable.files.keys().cloned().collect()
    }
}
