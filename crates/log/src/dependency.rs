//! Data files a record depends on: durable no later than the record.

use larder_io::FileRef;

/// What a record needs durable with it (the data of a large write,
/// written to its own file before the record is appended).
#[derive(Clone, Debug)]
pub enum Dependency {
    /// The whole file, synced (fdatasync) concurrently with the group's
    /// own write and sync.
    Sync(FileRef),
    /// `[offset, offset + len)` of a file, written over blocks that were
    /// already allocated and written (outside [`larder_io::File::holes`]
    /// before the write), on a storage whose sync of the log flushes the
    /// device cache this file's writes reach
    /// ([`larder_io::Storage::shares_flush`]): the range is written back
    /// and waited for before the log's sync, whose flush then makes it
    /// durable. One flush for the data and the record instead of one each.
    WriteBack {
        /// The data file.
        file: FileRef,
        /// Where the range starts.
        offset: u64,
        /// Its length in bytes.
        len: u64,
    },
}

impl Dependency {
    /// The file depended on.
    pub fn file(&self) -> &FileRef {
        match self {
            Dependency::Sync(f) | Dependency::WriteBack { file: f, .. } => f,
        }
    }

    /// Adds `dep` to `deps`, one entry per file (by path): a sync absorbs
    /// write-backs of the same file, and write-backs of one file merge
    /// into the range covering both (writing back the pages between is
    /// harmless).
    pub fn merge_into(deps: &mut Vec<Dependency>, dep: &Dependency) {
        let Some(have) = deps.iter_mut().find(|d| d.file().path() == dep.file().path()) else {
            deps.push(dep.clone());
            return;
        };
        match (&*have, dep) {
            (Dependency::Sync(_), _) => {}
            (_, Dependency::Sync(f)) => *have = Dependency::Sync(f.clone()),
            (
                Dependency::WriteBack { file, offset: a, len: alen },
                Dependency::WriteBack { offset: b, len: blen, .. },
            ) => {
                let start = (*a).min(*b);
                let end = (a + alen).max(b + blen);
                *have = Dependency::WriteBack { file: file.clone(), offset: start, len: end - start };
            }
        }
    }
}
