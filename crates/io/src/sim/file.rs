//! The `Storage` and `File` implementations of the simulated machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::faults::{fault_error, flip_bit, short_len, SimFault, SimOp};
use super::state::{
    check_range, is_implicit_dir, is_root, meets, op_range, parent_of, FileData, FileId, FileOp, NsOp, State,
};
use super::SimStorage;
use crate::error::{IoError, IoResult};
use crate::real::check_same_dir;
use crate::storage::{File, FileRef, Lock, OpenOptions, Storage};

/// An open simulated file: a file id plus the machine it lives on.
struct SimFile {
    state: Arc<Mutex<State>>,
    id: FileId,
    path: PathBuf,
    writable: bool,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile").field("path", &self.path).field("id", &self.id).finish_non_exhaustive()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if let Some(n) = st.handles.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                st.handles.remove(&self.id);
            }
        }
    }
}

/// A held entry in the machine's lock table, removed on drop.
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl std::fmt::Debug for SimLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Lock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

/// Checks the machine is up and fires any armed fault of kind `op` as an
/// error. Used by calls for which no fault has a special meaning.
fn enter(st: &mut State, op: SimOp, paths: &[&Path]) -> IoResult<()> {
    st.check_alive()?;
    match take(st, op, paths) {
        Some(fault) => Err(fault_error(fault, op, paths.first().copied().unwrap_or(Path::new("")))),
        None => Ok(()),
    }
}

/// Takes the fault due on this call, if any, counting it.
fn take(st: &mut State, op: SimOp, paths: &[&Path]) -> Option<SimFault> {
    let fault = super::faults::take_fault(&mut st.faults, op, paths);
    if fault.is_some() {
        st.counters.faults_injected += 1;
    }
    fault
}

/// Opens `path`, creating it if asked; returns the file id.
fn open_id(st: &mut State, path: &Path, create: bool, create_new: bool) -> IoResult<FileId> {
    if st.live.dirs.contains(path) || is_root(path) {
        return Err(IoError::InvalidInput { path: path.to_path_buf(), reason: "is a directory" });
    }
    if let Some(id) = st.live.files.get(path) {
        if create_new {
            return Err(IoError::AlreadyExists { path: path.to_path_buf() });
        }
        return Ok(*id);
    }
    let parent = parent_of(path);
    if !(create || create_new) || !st.live.dir_exists(&parent) {
        return Err(IoError::NotFound { path: path.to_path_buf() });
    }
    let id = st.next_id;
    st.next_id += 1;
    st.files.insert(id, FileData::default());
    st.ns_op(parent, NsOp::Create { path: path.to_path_buf(), id });
    st.counters.creates += 1;
    Ok(id)
}

impl Storage for SimStorage {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef> {
        let mut st = self.state.lock();
        enter(&mut st, SimOp::Open, &[path])?;
        let create = options.create || options.create_new;
        let id = open_id(&mut st, path, create, options.create_new)?;
        st.counters.opens += 1;
        *st.handles.entry(id).or_default() += 1;
        Ok(Arc::new(SimFile {
            state: Arc::clone(&self.state),
            id,
            path: path.to_path_buf(),
            // Like the real backend, creating implies write access.
            writable: options.write || create,
        }))
    }

    fn open_unshared(&self, path: &Path) -> IoResult<Option<FileRef>> {
        {
            let st = self.state.lock();
            st.check_alive()?;
            let id = st.live_file(path)?;
            if st.handles.get(&id).is_some_and(|&n| n > 0) {
                return Ok(None);
            }
        }
        self.open(path, OpenOptions::WRITE).map(Some)
    }

    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        st.check_alive()?;
        let mut ancestors: Vec<&Path> = path.ancestors().collect();
        ancestors.reverse();
        for dir in ancestors {
            if dir.as_os_str().is_empty() || st.live.dirs.contains(dir) {
                continue;
            }
            if st.live.files.contains_key(dir) {
                return Err(IoError::AlreadyExists { path: dir.to_path_buf() });
            }
            if is_implicit_dir(dir) {
                // Pre-existing and durable: record it only so it is listed.
                st.live.dirs.insert(dir.to_path_buf());
                st.durable.dirs.insert(dir.to_path_buf());
                continue;
            }
            st.ns_op(parent_of(dir), NsOp::Mkdir { path: dir.to_path_buf() });
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let st = self.state.lock();
        st.check_alive()?;
        if !st.live.dir_exists(path) {
            return Err(IoError::NotFound { path: path.to_path_buf() });
        }
        Ok(st.live.children(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        enter(&mut st, SimOp::Rename, &[from, to])?;
        check_same_dir(from, to)?;
        if st.live.dirs.contains(from) || st.live.dirs.contains(to) {
            return Err(IoError::InvalidInput {
                path: from.to_path_buf(),
                reason: "the simulation renames files only",
            });
        }
        let id = st.live_file(from)?;
        if from != to {
            let op = NsOp::Rename { from: from.to_path_buf(), to: to.to_path_buf(), id };
            st.ns_op(parent_of(from), op);
        }
        st.counters.renames += 1;
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        enter(&mut st, SimOp::Remove, &[path])?;
        if st.live.dirs.contains(path) {
            return Err(IoError::InvalidInput { path: path.to_path_buf(), reason: "is a directory" });
        }
        st.live_file(path)?;
        st.ns_op(parent_of(path), NsOp::Remove { path: path.to_path_buf() });
        st.counters.removes += 1;
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        // A failed directory sync leaves the queue pending: the entries may
        // or may not reach the disk, which a crash then decides.
        enter(&mut st, SimOp::SyncDir, &[path])?;
        if !st.live.dir_exists(path) {
            return Err(IoError::NotFound { path: path.to_path_buf() });
        }
        let ops = st.dir_pending.remove(path).unwrap_or_default();
        for op in &ops {
            st.durable.apply(op);
        }
        st.counters.dir_syncs += 1;
        st.note_sync();
        Ok(())
    }

    fn exists(&self, path: &Path) -> IoResult<bool> {
        let st = self.state.lock();
        st.check_alive()?;
        Ok(is_root(path) || st.live.files.contains_key(path) || st.live.dirs.contains(path))
    }

    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>> {
        let mut st = self.state.lock();
        st.check_alive()?;
        open_id(&mut st, path, true, false)?;
        if !st.locks.insert(path.to_path_buf()) {
            return Err(IoError::Locked { path: path.to_path_buf() });
        }
        Ok(Box::new(SimLock { state: Arc::clone(&self.state), path: path.to_path_buf() }))
    }

    /// The capacity ([`SimStorage::set_capacity`]) less the named files'
    /// lengths; without a capacity, no bound (`u64::MAX`).
    fn available_bytes(&self, _path: &Path) -> IoResult<u64> {
        let st = self.state.lock();
        st.check_alive()?;
        Ok(st.available())
    }

    /// The simulated machine is one device: every sync flushes it.
    fn shares_flush(&self, _synced: &Path, _written: &Path) -> IoResult<bool> {
        Ok(true)
    }
}

impl SimFile {
    /// Fails like a write on a read-only descriptor (EBADF).
    fn check_writable(&self, op: SimOp) -> IoResult<()> {
        if self.writable {
            return Ok(());
        }
        Err(IoError::Os { op: op.name(), path: self.path.clone(), source: std::io::Error::from_raw_os_error(9) })
    }

    /// The shared entry of `set_len` and `allocate`: both may grow the file.
    fn grow_op(&self, op: SimOp, offset: u64, len: u64, file_op: FileOp) -> IoResult<()> {
        let mut st = self.state.lock();
        enter(&mut st, op, &[&self.path])?;
        self.check_writable(op)?;
        check_range(offset, len, &self.path)?;
        let file = st.file(self.id, &self.path)?;
        let current = file.live.len() as u64;
        let (new_len, refilled) = match file_op {
            FileOp::SetLen(new_len) => (new_len, 0),
            _ => (current.max(offset + len), file.punched_in(offset, offset + len)),
        };
        if new_len > current || refilled > 0 {
            let punched_after = file.punched.total() - file.punched_in(new_len, u64::MAX) - refilled;
            st.check_capacity(self.id, new_len - punched_after.min(new_len), &self.path)?;
        }
        st.file_op(self.id, &self.path, file_op)?;
        match op {
            SimOp::SetLen => st.counters.set_lens += 1,
            _ => st.counters.allocates += 1,
        }
        Ok(())
    }
}

impl File for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<usize> {
        let mut st = self.state.lock();
        st.check_alive()?;
        let flip = match take(&mut st, SimOp::Read, &[&self.path]) {
            Some(SimFault::BitFlip) => true,
            Some(fault) => return Err(fault_error(fault, SimOp::Read, &self.path)),
            None => false,
        };
        let live = &st.file(self.id, &self.path)?.live;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(live.len());
        let n = buf.len().min(live.len() - start);
        buf[..n].copy_from_slice(&live[start..start + n]);
        if flip {
            flip_bit(&mut st.rng, &mut buf[..n]);
        }
        st.counters.reads += 1;
        st.counters.bytes_read += n as u64;
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<usize> {
        let mut st = self.state.lock();
        st.check_alive()?;
        let len = match take(&mut st, SimOp::Write, &[&self.path]) {
            Some(SimFault::ShortWrite) => short_len(buf.len()),
            Some(fault) => return Err(fault_error(fault, SimOp::Write, &self.path)),
            None => buf.len(),
        };
        self.check_writable(SimOp::Write)?;
        check_range(offset, len as u64, &self.path)?;
        if len > 0 {
            let file = st.file(self.id, &self.path)?;
            let current = file.live.len() as u64;
            let end = offset + len as u64;
            let refilled = file.punched_in(offset, end);
            if end > current || refilled > 0 {
                let used = current.max(end) - (file.punched.total() - refilled);
                st.check_capacity(self.id, used, &self.path)?;
            }
            let op = FileOp::Write { offset, data: buf[..len].to_vec() };
            st.file_op(self.id, &self.path, op)?;
        }
        st.counters.writes += 1;
        st.counters.bytes_written += len as u64;
        st.note_write();
        Ok(len)
    }

    fn sync_data(&self) -> IoResult<()> {
        let mut st = self.state.lock();
        st.check_alive()?;
        let fault = take(&mut st, SimOp::SyncData, &[&self.path]);
        let file = st.file_mut(self.id, &self.path)?;
        let pending = std::mem::take(&mut file.pending);
        if let Some(fault) = fault {
            // The kernel dropped the dirty pages of a failed fsync: they stay
            // in the live image (the page cache) but never reach the disk.
            tracing::debug!(path = %self.path.display(), dropped = pending.len(), "injected sync failure");
            return Err(fault_error(fault, SimOp::SyncData, &self.path));
        }
        // The flush a sync issues covers every file's written-back writes,
        // which are older than this file's pending ops they overlap.
        st.flush_written_back();
        let file = st.file_mut(self.id, &self.path)?;
        for op in &pending {
            file.settle(op);
        }
        st.counters.syncs += 1;
        st.note_sync();
        Ok(())
    }

    fn holes(&self) -> IoResult<Option<Vec<(u64, u64)>>> {
        let st = self.state.lock();
        st.check_alive()?;
        let file = st.file(self.id, &self.path)?;
        Ok(Some(file.unwritten(file.live.len() as u64).iter().collect()))
    }

    /// Moves the range's pending writes that land on written blocks to the
    /// written-back list (made durable by the next sync of any file), in
    /// order, those that overlap each other together (the kernel writes a
    /// page with every write to it); a write that overlaps a pending op
    /// that cannot move stays pending with it, so neither jumps ahead of
    /// the other. Others stay pending (as the real call writes them too,
    /// but their blocks' metadata waits for a sync of this file). A zero
    /// `len` means to the end of the file.
    fn write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        let mut st = self.state.lock();
        st.check_alive()?;
        let fault = take(&mut st, SimOp::WriteBack, &[&self.path]);
        let end = if len == 0 { u64::MAX } else { offset.saturating_add(len) };
        let file = st.file_mut(self.id, &self.path)?;
        let mut eligible: Vec<bool> = file
            .pending
            .iter()
            .map(|op| {
                let (s, e) = op_range(op);
                matches!(op, FileOp::Write { .. }) && offset <= s && e <= end && file.is_written(s, e)
            })
            .collect();
        // An op that stays keeps every op it overlaps, to a fixed point.
        let ranges: Vec<(u64, u64)> = file.pending.iter().map(op_range).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..ranges.len() {
                if eligible[i] && (0..ranges.len()).any(|j| !eligible[j] && meets(ranges[j], ranges[i])) {
                    eligible[i] = false;
                    changed = true;
                }
            }
        }
        let mut moved = Vec::new();
        let mut kept = Vec::new();
        for (op, go) in std::mem::take(&mut file.pending).into_iter().zip(eligible) {
            if go {
                moved.push(op)
            } else {
                kept.push(op)
            }
        }
        file.pending = kept;
        if let Some(fault) = fault {
            // Like a failed sync: the pages that failed are gone for good.
            tracing::debug!(path = %self.path.display(), dropped = moved.len(), "injected write-back failure");
            return Err(fault_error(fault, SimOp::WriteBack, &self.path));
        }
        file.written_back.extend(moved);
        st.counters.write_backs += 1;
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        if len == 0 {
            // fallocate rejects an empty range with EINVAL.
            return Err(IoError::InvalidInput { path: self.path.clone(), reason: "allocate of zero bytes" });
        }
        self.grow_op(SimOp::Allocate, offset, len, FileOp::Allocate { offset, len })
    }

    fn punch_hole(&self, offset: u64, len: u64) -> IoResult<()> {
        if len == 0 {
            return Err(IoError::InvalidInput { path: self.path.clone(), reason: "punch_hole of zero bytes" });
        }
        let mut st = self.state.lock();
        st.check_alive()?;
        let fault = take(&mut st, SimOp::PunchHole, &[&self.path]);
        self.check_writable(SimOp::PunchHole)?;
        check_range(offset, len, &self.path)?;
        if let Some(fault) = fault {
            if fault == SimFault::ShortWrite && len > 4096 {
                // A punch that freed some blocks before it failed.
                let half = (len / 2).next_multiple_of(4096).min(len - 4096);
                st.file_op(self.id, &self.path, FileOp::PunchHole { offset, len: half })?;
            }
            return Err(fault_error(fault, SimOp::PunchHole, &self.path));
        }
        st.file_op(self.id, &self.path, FileOp::PunchHole { offset, len })?;
        st.counters.punch_holes += 1;
        Ok(())
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.grow_op(SimOp::SetLen, 0, len, FileOp::SetLen(len))
    }

    fn len(&self) -> IoResult<u64> {
        let st = self.state.lock();
        st.check_alive()?;
        Ok(st.file(self.id, &self.path)?.live.len() as u64)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
