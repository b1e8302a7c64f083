//! Read-only mappings of files that never change while mapped.

/// The bytes of a whole file, mapped read-only: reads are memory loads
/// (no system call, no copy). Only for files the engine never writes,
/// truncates or renames over while the mapping lives (an index run once
/// written); the mapping stays valid after the file is unlinked.
pub struct Mapping {
    map: memmap2::Mmap,
}

impl Mapping {
    /// Maps `file` (its length now) read-only; `None` for an empty file,
    /// which cannot be mapped.
    pub(crate) fn of(file: &std::fs::File) -> std::io::Result<Option<Mapping>> {
        if file.metadata()?.len() == 0 {
            return Ok(None);
        }
        #[allow(unsafe_code)]
        // SAFETY: the mapping is read-only and private to this process, and
        // `File::map` is documented as only for files the engine never
        // modifies or truncates while mapped (run files are written, synced
        // and renamed into place before any reader opens them, and deleted
        // only by unlinking, which leaves a mapping valid). Another process
        // truncating the file would make reads fault (SIGBUS): the store's
        // directory is locked and such tampering is outside the contract,
        // as for LMDB's map.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        // The kernel's read-around on a fault (its default advice): a run's
        // blocks are read again and again while it lives, so the blocks
        // around the one a point read faults in are the ones the next
        // reads want. One block per fault (random advice) made a cold
        // store's lookups wait for a disk read per block.
        Ok(Some(Mapping { map }))
    }
}

impl Mapping {
    /// Maps every page of the file into this mapping now (Linux's
    /// `MADV_POPULATE_READ`), reading from disk any page not cached, so
    /// later reads take no page fault: for a thread that can pay for the
    /// faults before the readers that would otherwise meet them one by one.
    /// Says whether the kernel did it (false on a kernel without the advice,
    /// or a file cut short meanwhile: the reads then fault as before).
    pub fn populate(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.map.advise(memmap2::Advice::PopulateRead).is_ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }
}

impl std::ops::Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping").field("len", &self.map.len()).finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{OpenOptions, RealStorage, Storage};

    /// Populating maps the file's bytes as they are; a mapping whose file
    /// was cut short under it is refused (no signal), and its pages before
    /// the cut still read.
    #[test]
    fn populate_maps_the_file_and_refuses_a_cut_one() {
        let dir = tempfile::tempdir().unwrap();
        let storage = RealStorage::new();
        let file = storage.open(&dir.path().join("run"), OpenOptions::CREATE_NEW).unwrap();
        let bytes: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
        crate::write_all_at(&*file, &bytes, 0).unwrap();
        let map = file.map().unwrap().expect("real files map");
        if cfg!(target_os = "linux") {
            assert!(map.populate(), "a whole file populates");
        }
        assert_eq!(&map[..], &bytes[..]);
        file.set_len(4096).unwrap();
        assert!(!map.populate(), "a mapping past its file's end populated");
        assert_eq!(&map[..4096], &bytes[..4096]);
    }
}
