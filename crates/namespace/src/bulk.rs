//! Bulk creation: many regular files, with their bytes, in one directory in
//! a few transactions; the paper's blind create made safe. Names are sorted
//! and checked against each other and against the directory under the
//! directory's exclusive lock; a name already there (or repeated in the
//! batch) is returned as a duplicate and gets no object.
//!
//! The check against the directory: none at all while the directory is
//! empty, else an index point read per name, which for a name the
//! directory does not hold is answered by the memtable and the runs' bloom
//! filters without reading a data block (the index's counters show it).
//! New onodes and dentries are then written blind (never read back).
//!
//! A large batch ([`BULK_RUN_MIN`] names or more) is committed in chunks of
//! at most [`BULK_RUN_CHUNK`] names and [`BULK_RUN_BYTES`] bytes, each
//! written directly as a sorted run of the index
//! (`Store::transact_as_run`): its metadata is written once, bypassing the
//! log, the memtable and the flush. A smaller one is committed as log
//! records of at most [`BULK_CHUNK`] names and [`BULK_CHUNK_BYTES`] bytes.
//! Either way a crash keeps a prefix of the chunks, each whole.
//!
//! The file system's batch create and the KV API's (used by `larder
//! import`) are both this, with their own checks around it.

use larder_object::meta::{dentry_key, Kind, Name, Onode};
use larder_object::{Durability, LockRequest, ObjectError, Store, Transaction};

use crate::error::NamespaceError;
use crate::ops::NamespaceTxn;

/// Names per log record of a small batch: a few hundred KiB of metadata.
pub const BULK_CHUNK: usize = 1024;
/// Bytes per log record of a small batch, at most (a quarter of a log
/// segment if that is less; a file larger than this is a chunk of its
/// own). Counted as [`record_bytes`] estimates them.
pub const BULK_CHUNK_BYTES: u64 = 4 << 20;
/// Batches of at least this many names are committed as index runs.
pub const BULK_RUN_MIN: usize = 16_384;
/// Names per index run of a large batch (about 130 MiB of metadata held
/// while its run is written). Every run ingested is one more the index
/// merges later: at a quarter of this, a 4M-file create left 16 runs and
/// spent as much CPU merging them (twice each file) while it ran as
/// creating; at this size it leaves 4, one merge.
pub const BULK_RUN_CHUNK: usize = 1_048_576;
/// Bytes per index run of a large batch, counted as for
/// [`BULK_CHUNK_BYTES`].
pub const BULK_RUN_BYTES: u64 = 256 << 20;

/// Bytes a transaction of `store` may gather for one log record and stay
/// well under a record's limit: [`BULK_CHUNK_BYTES`], or a quarter of a log
/// segment if that is less.
pub fn record_budget(store: &Store) -> u64 {
    BULK_CHUNK_BYTES.min(store.superblock().options.log_segment_bytes / 4)
}

/// What a new file adds to its chunk's record or run, about: its onode and
/// dentry, its bytes when inline, else its extents' entries (a crc per
/// 4 KiB block).
pub fn record_bytes(file: &NewFile<'_>, inline_max: u64) -> u64 {
    let len = file.data.len() as u64;
    let data = if len <= inline_max { len } else { len / 1024 + 64 };
    192 + file.name.as_bytes().len() as u64 + data
}

/// A file to create: its name and its bytes.
#[derive(Clone, Debug)]
pub struct NewFile<'a> {
    /// Its name in the directory.
    pub name: Name,
    /// Its contents.
    pub data: &'a [u8],
}

/// What a bulk create did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkCreated {
    /// The names created and their objects, in name order.
    pub created: Vec<(Vec<u8>, u64)>,
    /// Names not created: already in the directory, or repeated in the
    /// batch (each repeat once; the first occurrence is the one created),
    /// in name order.
    pub duplicates: Vec<Vec<u8>>,
}

/// Who the new files belong to, decided under the directory's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOwner {
    /// Permission bits of every new file.
    pub mode: u32,
    /// Owner user and group.
    pub owner: (u32, u32),
}

/// Creates a regular file for each of `files` in directory `dir`, except
/// names it holds already or that repeat (returned as duplicates, with no
/// object left for them).
///
/// Each chunk's transaction holds `dir` exclusively and reads its onode,
/// which must be a directory ([`NamespaceError::NotADirectory`], or the
/// object layer's `NoSuchObject` when it is gone); `begin` then checks
/// what the caller must (permissions) and says who owns the new files,
/// and `after` runs once a chunk created at least one (the file system
/// marks the directory changed).
///
/// Small batches commit as log records, the last chunk with `durability`,
/// earlier ones buffered; large ones commit each chunk durably as an index
/// run, whatever `durability` says.
pub fn create_files<E>(
    store: &Store,
    dir: u64,
    files: Vec<NewFile<'_>>,
    durability: Durability,
    mut begin: impl FnMut(&mut Transaction<'_>, &Onode) -> Result<NewOwner, E>,
    mut after: impl FnMut(&mut Transaction<'_>) -> Result<(), E>,
) -> Result<BulkCreated, E>
where
    E: From<NamespaceError> + From<ObjectError>,
{
    let (unique, mut duplicates) = distinct(files);
    let as_runs = unique.len() >= BULK_RUN_MIN;
    let (max_names, max_bytes) =
        if as_runs { (BULK_RUN_CHUNK, BULK_RUN_BYTES) } else { (BULK_CHUNK, record_budget(store)) };
    let inline_max = u64::from(store.superblock().options.inline_max_bytes);
    let chunks = chunk(&unique, max_names, max_bytes, |f| record_bytes(f, inline_max));
    let total = unique.len();
    if as_runs {
        // One high-water commit for the whole batch, not one per chunk
        // (each a log record flushed as a small run between the ingested
        // ones). At most the batch's duplicates go unused.
        store.reserve_object_ids(unique.len() as u64)?;
    }
    let lock = [LockRequest::Exclusive(dir)];
    let mut out = BulkCreated { created: Vec::with_capacity(total), duplicates: Vec::new() };
    // The names move from `files` into what is returned, uncopied.
    let mut files = unique.into_iter();
    for (i, &len) in chunks.iter().enumerate() {
        let chunk = files.as_slice().get(..len).unwrap_or_default();
        let create = |txn: &mut Transaction<'_>| -> Result<ChunkDone, E> {
            let onode = txn.onode(dir)?.ok_or(ObjectError::NoSuchObject { object: dir })?;
            if onode.kind != Kind::Directory {
                return Err(NamespaceError::NotADirectory { object: dir }.into());
            }
            let owner = begin(txn, &onode)?;
            let empty = onode.dir.is_some_and(|d| d.entries == 0);
            let done = create_chunk(txn, dir, chunk, owner, empty)?;
            if !done.ids.is_empty() {
                after(txn)?;
            }
            Ok(done)
        };
        let done = if as_runs {
            store.transact_as_run(&lock, create)?.0
        } else {
            let d = if i + 1 == chunks.len() { durability } else { Durability::Buffered };
            store.transact_locked(&lock, d, create)?.0
        };
        let mut ids = done.ids;
        let mut dups = done.dups.into_iter().peekable();
        for (at, f) in files.by_ref().take(len).enumerate() {
            if dups.next_if_eq(&at).is_some() {
                duplicates.push(f.name.into_bytes());
            } else if let Some(id) = ids.next() {
                out.created.push((f.name.into_bytes(), id));
            }
        }
    }
    if chunks.is_empty() && durability == Durability::Durable {
        // No names, so no commit made anything durable: every earlier
        // change still is when this returns, as promised. (The last chunk
        // commits with `durability` even when it creates nothing.)
        store.sync()?;
    }
    duplicates.sort_unstable();
    out.duplicates = duplicates;
    Ok(out)
}

/// `files` sorted by name with repeats taken out (the first occurrence
/// stays), and the repeats' names. In place: a copy of a large batch's
/// files was as many fresh pages to fault in.
fn distinct(mut files: Vec<NewFile<'_>>) -> (Vec<NewFile<'_>>, Vec<Vec<u8>>) {
    // Stable: of a repeated name, the caller's first occurrence comes first.
    files.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut duplicates = Vec::new();
    // `later` is removed when it repeats `kept`, the occurrence before it.
    files.dedup_by(|later, kept| {
        let repeat = later.name == kept.name;
        if repeat {
            duplicates.push(later.name.as_bytes().to_vec());
        }
        repeat
    });
    (files, duplicates)
}

/// The lengths of consecutive slices of `files` of at most `max_names`
/// names and `max_bytes` bytes each as `weight` counts them (a heavier
/// file alone).
fn chunk<'a>(
    files: &[NewFile<'a>],
    max_names: usize,
    max_bytes: u64,
    weight: impl Fn(&NewFile<'a>) -> u64,
) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, f) in files.iter().enumerate() {
        let len = weight(f);
        if i > start && (i - start == max_names || bytes + len > max_bytes) {
            out.push(i - start);
            (start, bytes) = (i, 0);
        }
        bytes += len;
    }
    if start < files.len() {
        out.push(files.len() - start);
    }
    out
}

/// What one chunk did: the ids of the files it created, in name order,
/// and the positions in the chunk of the names it found already there.
struct ChunkDone {
    ids: std::ops::Range<u64>,
    dups: Vec<usize>,
}

/// Creates the files of `chunk` (sorted, distinct) in `dir`, held
/// exclusively, except those it already holds; `empty`: `dir` holds none.
fn create_chunk(
    txn: &mut Transaction<'_>,
    dir: u64,
    chunk: &[NewFile<'_>],
    owner: NewOwner,
    empty: bool,
) -> Result<ChunkDone, NamespaceError> {
    let mut names: Vec<&Name> = Vec::with_capacity(chunk.len());
    let mut contents: Vec<&[u8]> = Vec::with_capacity(chunk.len());
    let mut dups = Vec::new();
    // An empty directory holds none of them: no read at all; nor does one
    // holding no name from the chunk's first to its last: one seek.
    let check_each = !empty && holds_a_name_between(txn, dir, chunk)?;
    for (at, f) in chunk.iter().enumerate() {
        if check_each && txn.lookup(dir, &f.name)?.is_some() {
            dups.push(at);
        } else {
            names.push(&f.name);
            contents.push(f.data);
        }
    }
    if names.is_empty() {
        return Ok(ChunkDone { ids: 0..0, dups });
    }
    let ids = txn.create_files_in(dir, &names, &contents, owner.mode, owner.owner)?;
    Ok(ChunkDone { ids, dups })
}

/// Whether directory `dir` holds a name from the first of `chunk` (sorted)
/// to its last, both included: when it does not, it holds none of the
/// chunk's names. A large batch's later chunks take this path (the earlier
/// ones made the directory non-empty, with names all before theirs).
fn holds_a_name_between(txn: &Transaction<'_>, dir: u64, chunk: &[NewFile<'_>]) -> Result<bool, NamespaceError> {
    let (Some(first), Some(last)) = (chunk.first(), chunk.last()) else {
        return Ok(false);
    };
    let start = dentry_key(dir, &first.name);
    // The least key after the last name's: that key with a zero byte added.
    let mut end = dentry_key(dir, &last.name);
    end.push(0);
    Ok(!txn.scan(&start, &end, true, 1)?.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn file(name: &str, len: usize) -> NewFile<'static> {
        static BYTES: [u8; 64] = [7; 64];
        NewFile { name: Name::new(name.as_bytes()).unwrap(), data: &BYTES[..len] }
    }

    #[test]
    fn chunks_close_at_the_name_count_or_the_byte_budget() {
        let files: Vec<_> = (0..7).map(|i| file(&format!("f{i}"), 10)).collect();
        let sizes = |c: Vec<usize>| c;
        let len = |f: &NewFile<'_>| f.data.len() as u64;
        assert_eq!(sizes(chunk(&files, 3, 1000, len)), [3, 3, 1]);
        assert_eq!(sizes(chunk(&files, 100, 25, len)), [2, 2, 2, 1]);
        // A file above the budget is a chunk of its own.
        let big = vec![file("a", 10), file("b", 64), file("c", 10)];
        assert_eq!(sizes(chunk(&big, 100, 30, len)), [1, 1, 1]);
        assert!(chunk(&[], 3, 10, len).is_empty());
        // Estimated record bytes: inline bytes count whole, extents little.
        assert_eq!(record_bytes(&file("ab", 64), 64), 192 + 2 + 64);
        assert!(record_bytes(&NewFile { name: Name::new("x").unwrap(), data: &[0; 1 << 20] }, 4096) < 2000);
    }

    #[test]
    fn repeats_keep_the_first_occurrence() {
        let files = vec![file("b", 1), file("a", 2), file("b", 3), file("b", 4)];
        let (unique, dups) = distinct(files);
        let got: Vec<_> = unique.iter().map(|f| (f.name.as_bytes().to_vec(), f.data.len())).collect();
        assert_eq!(got, [(b"a".to_vec(), 2), (b"b".to_vec(), 1)]);
        assert_eq!(dups, [b"b".to_vec(), b"b".to_vec()]);
    }
}
