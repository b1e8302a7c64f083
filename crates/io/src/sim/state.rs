//! The simulated machine's state: file images, pending operations and the
//! live and durable namespaces.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::faults::ArmedFault;
use super::SimCounters;
use crate::error::{IoError, IoResult};
use crate::rangeset::RangeSet;

/// Identifies a file independently of its names, like an inode number, so
/// an open handle survives a rename or remove of its name.
pub(super) type FileId = u64;

/// The torn-write granularity: a write reaches the media in whole 512-byte
/// sectors, aligned to absolute file offsets.
pub(super) const SECTOR: u64 = 512;

/// Largest file the simulation holds; everything lives in memory, so an
/// offset past this is a caller bug rather than something to allocate.
pub(super) const MAX_FILE_LEN: u64 = 1 << 30;

/// A data operation on one file, kept until the file is synced.
#[derive(Clone, Debug)]
pub(super) enum FileOp {
    /// `write_at`.
    Write { offset: u64, data: Vec<u8> },
    /// `set_len`.
    SetLen(u64),
    /// `allocate`: extends the file with zeros, existing bytes stay.
    Allocate { offset: u64, len: u64 },
    /// `punch_hole`: zeros the range inside the file, length stays.
    PunchHole { offset: u64, len: u64 },
}

impl FileOp {
    /// Applies the whole operation to an image.
    pub(super) fn apply(&self, image: &mut Vec<u8>) {
        match self {
            FileOp::Write { offset, data } => write_into(image, *offset, data),
            FileOp::SetLen(len) => image.resize(*len as usize, 0),
            FileOp::Allocate { offset, len } => {
                let end = (offset + len) as usize;
                if image.len() < end {
                    image.resize(end, 0);
                }
            }
            FileOp::PunchHole { offset, len } => {
                let start = (*offset as usize).min(image.len());
                let end = ((offset + len) as usize).min(image.len());
                image[start..end].fill(0);
            }
        }
    }
}

/// Copies `data` into `image` at `offset`, growing it with zeros as needed.
pub(super) fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// Splits `[offset, offset + len)` at absolute sector boundaries into
/// `(start, end)` pieces; a torn write keeps any subset of them.
pub(super) fn sector_pieces(offset: u64, len: u64) -> Vec<(u64, u64)> {
    let end = offset + len;
    let mut pieces = Vec::new();
    let mut start = offset;
    while start < end {
        let next = ((start / SECTOR) + 1) * SECTOR;
        let piece_end = next.min(end);
        pieces.push((start, piece_end));
        start = piece_end;
    }
    pieces
}

/// One file's contents.
#[derive(Clone, Debug, Default)]
pub(super) struct FileData {
    /// What reads return: durable plus every pending op.
    pub(super) live: Vec<u8>,
    /// What a crash keeps for sure.
    pub(super) durable: Vec<u8>,
    /// Operations since the last sync, oldest first.
    pub(super) pending: Vec<FileOp>,
    /// Writes written back to the device (`File::write_back`) but not yet
    /// flushed: the next successful sync of any file makes them durable;
    /// a crash before it keeps, drops or tears each, like pending ones.
    pub(super) written_back: Vec<FileOp>,
    /// Ranges of the durable image on no written block (punched, or grown
    /// by `set_len` / `allocate`): writing there is metadata, which only a
    /// sync of the file makes durable.
    pub(super) holes: RangeSet,
    /// Ranges of the live image punched and not written since: they take
    /// no space against the capacity. Empty after a crash (whatever the
    /// crash kept counts whole).
    pub(super) punched: RangeSet,
}

impl FileData {
    /// A file whose durable image (`image`) is all it holds, with `holes`.
    pub(super) fn settled(image: Vec<u8>, holes: RangeSet) -> FileData {
        FileData {
            live: image.clone(),
            durable: image,
            pending: Vec::new(),
            written_back: Vec::new(),
            holes,
            punched: RangeSet::default(),
        }
    }

    /// Bytes the live image takes against the capacity: its length less
    /// the punched ranges in it.
    pub(super) fn used_bytes(&self) -> u64 {
        (self.live.len() as u64).saturating_sub(self.punched.total())
    }

    /// Bytes of `[offset, end)` that are punched now (a write there takes
    /// space again).
    pub(super) fn punched_in(&self, offset: u64, end: u64) -> u64 {
        self.punched.overlapping(offset, end).map(|(s, e)| e.min(end) - s.max(offset)).sum()
    }

    /// Makes `op` durable: applies it to the durable image and tracks the
    /// holes it makes or fills.
    pub(super) fn settle(&mut self, op: &FileOp) {
        let old_len = self.durable.len() as u64;
        op.apply(&mut self.durable);
        let new_len = self.durable.len() as u64;
        match op {
            FileOp::Write { offset, data } => {
                self.holes.insert(old_len, *offset);
                self.holes.remove(*offset, offset + data.len() as u64);
            }
            FileOp::SetLen(_) | FileOp::Allocate { .. } => {
                self.holes.remove(new_len, u64::MAX);
                self.holes.insert(old_len, new_len);
            }
            FileOp::PunchHole { offset, len } => self.holes.insert(*offset, (offset + len).min(new_len)),
        }
    }

    /// The ranges of the file, up to `len`, not on written blocks: durable
    /// holes, growth past the durable length, and ranges pending non-write
    /// operations touch (a punch or resize is metadata).
    pub(super) fn unwritten(&self, len: u64) -> RangeSet {
        let mut set = self.holes.clone();
        set.insert(self.durable.len() as u64, len);
        for op in self.pending.iter().filter(|op| !matches!(op, FileOp::Write { .. })) {
            let (start, end) = op_range(op);
            set.insert(start, end.min(len));
        }
        set
    }

    /// Whether `[offset, end)` is on written blocks: inside the durable
    /// length and outside [`FileData::unwritten`].
    pub(super) fn is_written(&self, offset: u64, end: u64) -> bool {
        end <= self.durable.len() as u64 && !self.unwritten(u64::MAX).intersects(offset, end)
    }
}

/// The range an operation changes, for overlap checks (a resize: from its
/// length on).
pub(super) fn op_range(op: &FileOp) -> (u64, u64) {
    match op {
        FileOp::Write { offset, data } => (*offset, offset + data.len() as u64),
        FileOp::SetLen(len) => (*len, u64::MAX),
        FileOp::Allocate { offset, len } | FileOp::PunchHole { offset, len } => (*offset, offset + len),
    }
}

/// Whether two half-open ranges share a byte.
pub(super) fn meets((a, b): (u64, u64), (start, end): (u64, u64)) -> bool {
    a < end && start < b
}

/// A namespace operation, queued on the directory that holds the name.
#[derive(Clone, Debug)]
pub(super) enum NsOp {
    Create { path: PathBuf, id: FileId },
    Mkdir { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf, id: FileId },
    Remove { path: PathBuf },
}

/// Names of files and directories (live or durable).
#[derive(Clone, Debug, Default)]
pub(super) struct Namespace {
    pub(super) files: BTreeMap<PathBuf, FileId>,
    pub(super) dirs: BTreeSet<PathBuf>,
}

/// The root and first-level directories (`/`, `/data`, `data`) are taken to
/// exist, durably, so tests need not create them; deeper ones must be made.
pub(super) fn is_implicit_dir(path: &Path) -> bool {
    path.components().filter(|c| matches!(c, Component::Normal(_))).count() <= 1
}

/// Whether `path` is the root of the namespace (`/` or the empty path).
pub(super) fn is_root(path: &Path) -> bool {
    path.components().all(|c| !matches!(c, Component::Normal(_)))
}

/// The directory that holds `path`'s name.
pub(super) fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl Namespace {
    /// Whether `path` can hold names.
    pub(super) fn dir_exists(&self, path: &Path) -> bool {
        self.dirs.contains(path) || (is_implicit_dir(path) && !self.files.contains_key(path))
    }

    pub(super) fn apply(&mut self, op: &NsOp) {
        match op {
            NsOp::Create { path, id } => {
                self.files.insert(path.clone(), *id);
            }
            NsOp::Mkdir { path } => {
                self.dirs.insert(path.clone());
            }
            NsOp::Rename { from, to, id } => {
                self.files.remove(from);
                self.files.insert(to.clone(), *id);
            }
            NsOp::Remove { path } => {
                self.files.remove(path);
            }
        }
    }

    fn ancestors_exist(&self, path: &Path) -> bool {
        path.ancestors().skip(1).all(|a| is_implicit_dir(a) || self.dirs.contains(a))
    }

    /// Drops names whose directory chain did not survive, as after a crash
    /// that lost a directory's own entry: its whole subtree is unreachable.
    pub(super) fn prune(&mut self) {
        let kept: BTreeSet<PathBuf> = self.dirs.iter().filter(|d| self.ancestors_exist(d)).cloned().collect();
        self.dirs = kept;
        let files = std::mem::take(&mut self.files);
        self.files = files.into_iter().filter(|(p, _)| self.ancestors_exist(p)).collect();
    }

    /// Sorted names directly inside `dir`.
    pub(super) fn children(&self, dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = self
            .files
            .keys()
            .chain(self.dirs.iter())
            .filter(|p| p.parent() == Some(dir) && p.as_path() != dir)
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// The whole simulated machine, behind one mutex.
#[derive(Debug)]
pub(super) struct State {
    pub(super) rng: StdRng,
    pub(super) crashed: bool,
    pub(super) files: BTreeMap<FileId, FileData>,
    pub(super) next_id: FileId,
    pub(super) live: Namespace,
    pub(super) durable: Namespace,
    /// Unsynced namespace ops per directory, oldest first.
    pub(super) dir_pending: BTreeMap<PathBuf, Vec<NsOp>>,
    /// Successful writes left before the machine crashes.
    pub(super) writes_left: Option<u64>,
    /// Successful syncs (file or directory) left before the machine crashes.
    pub(super) syncs_left: Option<u64>,
    /// Namespace operations left before the machine crashes.
    pub(super) names_left: Option<u64>,
    pub(super) faults: Vec<ArmedFault>,
    pub(super) counters: SimCounters,
    pub(super) locks: BTreeSet<PathBuf>,
    pub(super) capacity: u64,
    /// Whether a random crash keeps any subset of a directory's pending
    /// namespace ops rather than a prefix; carried across reboots.
    pub(super) unordered_dir_ops: bool,
    /// Open handles per file, for `open_unshared` (no entry: none).
    pub(super) handles: BTreeMap<FileId, usize>,
}

impl State {
    pub(super) fn new(rng: StdRng) -> State {
        State {
            rng,
            crashed: false,
            files: BTreeMap::new(),
            next_id: 1,
            live: Namespace::default(),
            durable: Namespace::default(),
            dir_pending: BTreeMap::new(),
            writes_left: None,
            syncs_left: None,
            names_left: None,
            faults: Vec::new(),
            counters: SimCounters::default(),
            locks: BTreeSet::new(),
            capacity: u64::MAX,
            unordered_dir_ops: false,
            handles: BTreeMap::new(),
        }
    }

    pub(super) fn from_seed(seed: u64) -> State {
        State::new(StdRng::seed_from_u64(seed))
    }

    pub(super) fn check_alive(&self) -> IoResult<()> {
        if self.crashed {
            return Err(IoError::Crashed);
        }
        Ok(())
    }

    /// Counts a completed write toward an armed crash point.
    pub(super) fn note_write(&mut self) {
        if let Some(left) = self.writes_left.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.writes_left = None;
                self.crashed = true;
            }
        }
    }

    /// Counts a completed sync toward an armed crash point.
    pub(super) fn note_sync(&mut self) {
        if let Some(left) = self.syncs_left.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.syncs_left = None;
                self.crashed = true;
            }
        }
    }

    pub(super) fn file(&self, id: FileId, path: &Path) -> IoResult<&FileData> {
        self.files.get(&id).ok_or_else(|| IoError::NotFound { path: path.to_path_buf() })
    }

    pub(super) fn file_mut(&mut self, id: FileId, path: &Path) -> IoResult<&mut FileData> {
        self.files.get_mut(&id).ok_or_else(|| IoError::NotFound { path: path.to_path_buf() })
    }

    /// Applies a data op to the live image and queues it until the next sync.
    pub(super) fn file_op(&mut self, id: FileId, path: &Path, op: FileOp) -> IoResult<()> {
        let file = self.file_mut(id, path)?;
        op.apply(&mut file.live);
        match &op {
            FileOp::Write { offset, data } => file.punched.remove(*offset, offset + data.len() as u64),
            FileOp::SetLen(len) => file.punched.remove(*len, u64::MAX),
            FileOp::Allocate { offset, len } => file.punched.remove(*offset, offset + len),
            FileOp::PunchHole { offset, len } => {
                file.punched.insert(*offset, (offset + len).min(file.live.len() as u64))
            }
        }
        file.pending.push(op);
        Ok(())
    }

    /// Applies a namespace op to the live names and queues it on `dir`.
    pub(super) fn ns_op(&mut self, dir: PathBuf, op: NsOp) {
        self.live.apply(&op);
        self.dir_pending.entry(dir).or_default().push(op);
        self.counters.namespace_ops += 1;
        if let Some(left) = self.names_left.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.names_left = None;
                self.crashed = true;
            }
        }
    }

    /// Fails with `NoSpace` if file `id` taking `new_used` bytes (its
    /// length less its punched ranges) would push the sum of named files'
    /// bytes past the capacity.
    pub(super) fn check_capacity(&self, id: FileId, new_used: u64, path: &Path) -> IoResult<()> {
        if self.capacity == u64::MAX {
            return Ok(());
        }
        let ids: BTreeSet<FileId> = self.live.files.values().copied().collect();
        let others: u64 = ids
            .iter()
            .filter(|other| **other != id)
            .filter_map(|other| self.files.get(other))
            .map(FileData::used_bytes)
            .sum();
        if others.saturating_add(new_used) > self.capacity {
            return Err(IoError::NoSpace { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// Bytes a writer may still add: the capacity less the named files'
    /// live lengths and plus their punched ranges (`u64::MAX` without a
    /// capacity).
    pub(super) fn available(&self) -> u64 {
        if self.capacity == u64::MAX {
            return u64::MAX;
        }
        let ids: BTreeSet<FileId> = self.live.files.values().copied().collect();
        let used: u64 = ids.iter().filter_map(|id| self.files.get(id)).map(FileData::used_bytes).sum();
        self.capacity.saturating_sub(used)
    }

    /// The device cache flush every successful sync issues: every file's
    /// written-back writes become durable.
    pub(super) fn flush_written_back(&mut self) {
        for file in self.files.values_mut() {
            for op in std::mem::take(&mut file.written_back) {
                file.settle(&op);
            }
        }
    }

    /// Resolves a live file name.
    pub(super) fn live_file(&self, path: &Path) -> IoResult<FileId> {
        self.live.files.get(path).copied().ok_or_else(|| IoError::NotFound { path: path.to_path_buf() })
    }
}

/// Rejects ranges the in-memory simulation will not hold.
pub(super) fn check_range(offset: u64, len: u64, path: &Path) -> IoResult<()> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_FILE_LEN => Ok(()),
        _ => Err(IoError::InvalidInput {
            path: path.to_path_buf(),
            reason: "range beyond the simulation's maximum file size",
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_at_absolute_sector_boundaries() {
        assert_eq!(sector_pieces(500, 600), vec![(500, 512), (512, 1024), (1024, 1100)]);
        assert_eq!(sector_pieces(512, 512), vec![(512, 1024)]);
        assert!(sector_pieces(7, 0).is_empty());
    }

    #[test]
    fn prune_drops_subtrees_of_missing_directories() {
        let mut ns = Namespace::default();
        ns.files.insert(PathBuf::from("/db/a/x"), 1);
        ns.files.insert(PathBuf::from("/db/y"), 2);
        ns.dirs.insert(PathBuf::from("/db/a/b"));
        ns.prune();
        assert_eq!(ns.files.keys().collect::<Vec<_>>(), vec![Path::new("/db/y")]);
        assert!(ns.dirs.is_empty());
    }

    #[test]
    fn punch_hole_keeps_length_and_allocate_keeps_bytes() {
        let mut image = vec![7u8; 10];
        FileOp::PunchHole { offset: 8, len: 100 }.apply(&mut image);
        assert_eq!(image, [7, 7, 7, 7, 7, 7, 7, 7, 0, 0]);
        FileOp::Allocate { offset: 0, len: 12 }.apply(&mut image);
        assert_eq!(image.len(), 12);
        assert_eq!(image[0], 7);
    }
}
