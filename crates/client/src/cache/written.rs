//! The client's own writes, kept in its cached pages: a write this client
//! made through a handle (acknowledged by the server, or posted) fills or
//! patches the pages of the file it cached under its lease, as the
//! kernel's page cache keeps what a process wrote, instead of dropping
//! them. So a file the client created and wrote is read back from its
//! cache without a round trip (docs/server.md, "Leases").
//!
//! The server's copy and the cache stay equal because:
//!
//! - another client's write revokes the lease first (the watcher drops the
//!   entry), and this client's own writes revoke nothing of its own;
//! - the pages are patched in the order the server executes the writes: a
//!   waited write patches only if no version was handed out between its
//!   sending and its answer (no other change of this client came between,
//!   so no other write of it can have been reordered with it); a posted
//!   write patches just after it was put on its ring, under the ring's
//!   lock, so writes posted on one ring patch in their ring order; one
//!   answered with a redirect (executed later, elsewhere) or a failure
//!   drops the file's entry instead;
//! - a patch takes a new version for the file, so a read fetched before it
//!   (whose bytes may predate the write) is not cached after it.
//!
//! The file's size must be known (`FileCache::size`, from attributes read
//! under the lease, or from a read under it whose short answer found the
//! file's end, and kept up to date by these patches): cached pages
//! mark the file's end by a short (or empty) last page, and a write that
//! grows the file moves that end.

use super::{FileCache, PAGE};

/// The largest file the server stores (its objects' limit, `i64::MAX`
/// bytes, as a file offset is signed): a write ending past it fails.
const MAX_FILE_BYTES: u64 = i64::MAX as u64;

/// What a patch did to the cache's byte count.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Patched {
    /// Bytes added to cached pages.
    pub(super) added: usize,
    /// Bytes of cached pages removed.
    pub(super) removed: usize,
}

/// Applies the write of `data` at `offset` to `file`'s cached pages and
/// size; `None` when the file's size is not known (the caller then drops
/// what the entry caches). Pages the write covers whole, or that lay
/// past the file's old end (zeros but for the write), are cached when
/// they fit `room` bytes more and the file's `max_pages`; pages cached
/// already are patched; pages partly written and not cached stay
/// uncached. A file that ends on a page boundary gets its empty last
/// page, which marks the end.
pub(super) fn apply(file: &mut FileCache, offset: u64, data: &[u8], room: usize, max_pages: usize) -> Option<Patched> {
    let size = file.size?;
    // A write past the largest file size fails (EFBIG): a posted one is
    // applied before its answer, so it must not be.
    let end = offset.checked_add(data.len() as u64).filter(|&end| end <= MAX_FILE_BYTES)?;
    let mut patched = Patched::default();
    if data.is_empty() {
        return Some(patched);
    }
    let page = PAGE as u64;
    let new_size = size.max(end);
    if new_size > size {
        // Pages past the old end may be cached (a read there caches the
        // empty page that says the file ends): they would end the file
        // early now. Those up to the new end go; the write's own are
        // cached again below.
        let (last, new_last) = (size / page, new_size / page);
        file.pages.retain(|&index, bytes| {
            let stale = index > last && index <= new_last;
            if stale {
                patched.removed += bytes.len();
            }
            !stale
        });
    }
    // The page that ended the file (short, or empty when the file ended on
    // a page boundary) grows with zeros up to the new end.
    if new_size > size {
        let last = size / page;
        if let Some(bytes) = file.pages.get_mut(&last) {
            let length = (new_size - last * page).min(page) as usize;
            let more = length - bytes.len();
            if patched.added + more <= room {
                bytes.resize(length, 0);
                patched.added += more;
            } else if let Some(bytes) = file.pages.remove(&last) {
                patched.removed += bytes.len();
            }
        }
    }
    for index in offset / page..=(end - 1) / page {
        let start = index * page;
        let length = (new_size - start).min(page) as usize;
        let from = offset.max(start);
        let to = end.min(start + page);
        let source = &data[(from - offset) as usize..(to - offset) as usize];
        let at = (from - start) as usize;
        match file.pages.get_mut(&index) {
            Some(bytes) if bytes.len() == length => bytes[at..at + source.len()].copy_from_slice(source),
            Some(_) => {
                // Not the length the size says: not trusted, dropped.
                if let Some(bytes) = file.pages.remove(&index) {
                    patched.removed += bytes.len();
                }
            }
            None => {
                let known = start >= size || (from == start && to - start == length as u64);
                if !known || file.pages.len() >= max_pages || patched.added + length > room {
                    continue;
                }
                let mut bytes = vec![0; length];
                bytes[at..at + source.len()].copy_from_slice(source);
                file.pages.insert(index, bytes);
                patched.added += length;
            }
        }
    }
    if new_size > size && new_size.is_multiple_of(page) && file.pages.len() < max_pages {
        file.pages.entry(new_size / page).or_default();
    }
    file.size = Some(new_size);
    Some(patched)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use larder_protocol::id_hash::IdMap;

    use super::super::test_support::lease;
    use super::super::{FileCache, PAGE};
    use super::*;

    fn entry(size: Option<u64>) -> FileCache {
        FileCache {
            lease: lease(0, 1),
            attributes: None,
            size,
            pages: IdMap::default(),
            handles: Vec::new(),
            entries: None,
            lookups: HashMap::default(),
            version: 1,
        }
    }

    /// What a cached read of the whole file returns, if the pages hold
    /// it: every page up to a short (or empty) one.
    fn cached(file: &FileCache) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for index in 0.. {
            let bytes = file.pages.get(&index)?;
            out.extend_from_slice(bytes);
            if bytes.len() < PAGE {
                return Some(out);
            }
        }
        None
    }

    /// A small random generator (xorshift), so the model test needs no
    /// crate.
    struct Random(u64);

    impl Random {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// A new file written whole, as a web server's setup writes its
    /// files: its pages hold exactly its bytes, with the empty page that
    /// marks an end on a page boundary.
    #[test]
    fn a_new_file_written_whole_is_cached_whole() {
        for length in [1usize, 100, PAGE - 1, PAGE, PAGE + 1, 16 << 10, (16 << 10) + 7] {
            let mut file = entry(Some(0));
            file.pages.insert(0, Vec::new());
            let data: Vec<u8> = (0..length).map(|i| (i % 251) as u8).collect();
            let patched = apply(&mut file, 0, &data, usize::MAX, usize::MAX).unwrap();
            assert_eq!(cached(&file).as_deref(), Some(&data[..]), "{length} bytes");
            assert_eq!(file.size, Some(length as u64));
            let counted: usize = file.pages.values().map(Vec::len).sum();
            assert_eq!(patched.added - patched.removed, counted);
        }
    }

    /// Random writes (overwrites, appends, writes past the end leaving
    /// holes) applied to a model file and to the cache: whatever the
    /// cache holds is the model's bytes, and a page is never cached past
    /// the end.
    #[test]
    fn patched_pages_always_equal_the_file() {
        let mut random = Random(0x9e37_79b9_7f4a_7c15);
        for round in 0..200 {
            let mut model: Vec<u8> = Vec::new();
            let mut file = entry(Some(0));
            file.pages.insert(0, Vec::new());
            // A read past the end caches the empty page there.
            file.pages.insert(1 + random.below(8), Vec::new());
            let mut counted = 0usize;
            for write in 0..20 {
                let offset = random.below(6 * PAGE as u64);
                let length = 1 + random.below(3 * PAGE as u64) as usize;
                let byte = (round * 31 + write) as u8;
                let data = vec![byte; length];
                let end = offset as usize + length;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[offset as usize..end].copy_from_slice(&data);
                // Sometimes little room: pages are then left out, never wrong.
                let room = if random.below(4) == 0 { PAGE } else { usize::MAX };
                let patched = apply(&mut file, offset, &data, room, usize::MAX).unwrap();
                counted = counted + patched.added - patched.removed;
                assert_eq!(file.size, Some(model.len() as u64));
                for (index, bytes) in &file.pages {
                    let start = *index as usize * PAGE;
                    if start > model.len() {
                        // Past the end: only an empty page, read as the end.
                        assert!(bytes.is_empty(), "round {round}: page {index} past the end holds bytes");
                        continue;
                    }
                    let stop = (start + PAGE).min(model.len());
                    assert_eq!(&bytes[..], &model[start..stop], "round {round}, write {write}: page {index}");
                }
                assert_eq!(counted, file.pages.values().map(Vec::len).sum::<usize>());
            }
        }
    }

    /// A write past the largest file size (which the server refuses with
    /// EFBIG) patches nothing.
    #[test]
    fn a_write_past_the_largest_size_patches_nothing() {
        let mut file = entry(Some(0));
        file.pages.insert(0, Vec::new());
        assert_eq!(apply(&mut file, MAX_FILE_BYTES - 1, b"ab", usize::MAX, usize::MAX), None);
        assert_eq!(file.size, Some(0));
        assert!(apply(&mut file, MAX_FILE_BYTES - 2, b"ab", usize::MAX, usize::MAX).is_some());
    }

    /// Without the file's size the cache cannot place the end: nothing is
    /// patched (the caller drops the entry).
    #[test]
    fn an_unknown_size_patches_nothing() {
        let mut file = entry(None);
        file.pages.insert(0, vec![1; PAGE]);
        assert_eq!(apply(&mut file, 0, b"abc", usize::MAX, usize::MAX), None);
        assert_eq!(file.pages.get(&0).unwrap()[..3], [1, 1, 1]);
    }
}
