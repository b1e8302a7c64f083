//! Setup shared by the fs tests: a store in a temporary directory, and
//! callers with chosen credentials.
#![allow(dead_code, clippy::unwrap_used)]

use larder_fs::{Cred, Fs, FsOptions, Kind};
use larder_object::CreationOptions;

/// Small containers and log segments: a store is quick to create (its
/// first container is zero-filled).
pub fn options() -> FsOptions {
    let creation =
        CreationOptions { container_bytes: 4 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
    FsOptions { creation, ..FsOptions::default() }
}

/// [`options`] for a store on the simulated storage, deterministic: no
/// background threads, no timed syncs.
pub fn sim_options() -> FsOptions {
    let mut o = options();
    o.store.background_checkpoints = false;
    o.store.index.background_threads = false;
    o.store.log.buffered_sync_interval = None;
    o
}

/// A new file system in a fresh temporary directory (kept alive by the
/// returned guard).
pub fn fresh() -> (tempfile::TempDir, Fs) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Fs::create(&dir.path().join("store"), options()).unwrap();
    (dir, fs)
}

/// The superuser.
pub fn root() -> Cred {
    Cred::root()
}

/// An unprivileged user `uid` whose group is `gid`, with `groups`.
pub fn user(uid: u32, gid: u32, groups: &[u32]) -> Cred {
    Cred::new(uid, gid, groups.to_vec())
}

/// The errno of a failed call.
pub fn errno<T: std::fmt::Debug>(r: larder_fs::Result<T>) -> i32 {
    r.expect_err("the call should fail").errno()
}

/// The names and kinds in directory `dir` (without `.` and `..`), read
/// through one directory handle.
pub fn entries(fs: &Fs, dir: u64) -> larder_fs::Result<Vec<(Vec<u8>, Kind)>> {
    let dh = fs.opendir(&Cred::root(), dir)?;
    let (mut out, mut offset) = (Vec::new(), 0);
    loop {
        let batch = fs.readdir(dh, offset, 64)?;
        let Some(last) = batch.last() else { break };
        offset = last.next;
        out.extend(batch.into_iter().filter(|e| e.name != b"." && e.name != b"..").map(|e| (e.name, e.kind)));
    }
    fs.releasedir(dh)?;
    Ok(out)
}
