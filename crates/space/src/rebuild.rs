//! Free space is derived, not stored: it is container space minus the
//! extents in use, which the object layer's extent map lists. This module
//! checks such a list and compares it with a live allocator (for fsck).

use std::collections::BTreeMap;

use crate::error::{Result, SpaceError};
use crate::extent::Extent;
use larder_io::RangeSet;

/// Checks the extents in use and groups them by container, sorted by
/// offset. Refuses an extent that is misaligned, empty or runs past its
/// container's end, one in a container for which `exists` is false, and two
/// extents sharing a block (naming both).
pub(crate) fn index_used(
    used: impl IntoIterator<Item = Extent>,
    container_bytes: u64,
    exists: impl Fn(u64) -> bool,
) -> Result<BTreeMap<u64, Vec<Extent>>> {
    let mut all: Vec<Extent> = Vec::new();
    for e in used {
        e.check(container_bytes)?;
        if !exists(e.container) {
            return Err(SpaceError::InvalidExtent { extent: e, what: "its container does not exist" });
        }
        all.push(e);
    }
    all.sort_unstable();
    let mut by_container: BTreeMap<u64, Vec<Extent>> = BTreeMap::new();
    // The extent reaching furthest so far in the current container: any
    // later extent starting before its end overlaps it.
    let mut reach: Option<Extent> = None;
    for e in all {
        if let Some(prev) = reach.filter(|p| p.container == e.container) {
            if e.offset < prev.end() {
                return Err(SpaceError::Overlap { first: prev, second: e });
            }
        }
        if !reach.is_some_and(|p| p.container == e.container && e.end() <= p.end()) {
            reach = Some(e);
        }
        by_container.entry(e.container).or_default().push(e);
    }
    Ok(by_container)
}

/// The blocks of `extents` (checked, one container) as a range set.
pub(crate) fn used_blocks(extents: &[Extent]) -> RangeSet {
    let mut set = RangeSet::default();
    for e in extents {
        let (s, n) = e.blocks();
        set.insert(s, s + n);
    }
    set
}

/// What [`crate::SpaceManager::verify`] found comparing the live allocator
/// with the free space derived from the extents in use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Containers checked.
    pub containers: u64,
    /// Bytes in the extents in use.
    pub used_bytes: u64,
    /// Bytes the allocator holds as free (reusable now).
    pub free_bytes: u64,
    /// Bytes freed but not yet released; fine whether or not the list of
    /// extents in use still names them (it may come from a durable state
    /// older than the frees).
    pub pending_bytes: u64,
    /// Space in use that the allocator holds as free: it could hand it out
    /// again and overwrite live data. Must be empty.
    pub free_but_used: Vec<Extent>,
    /// Space neither in use, nor free, nor pending: leaked until the next
    /// open rebuilds free space. Must be empty.
    pub leaked: Vec<Extent>,
}

impl VerifyReport {
    /// Whether free space is exactly container space minus the extents in
    /// use (pending frees aside).
    pub fn is_clean(&self) -> bool {
        self.free_but_used.is_empty() && self.leaked.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ext(container: u64, block: u64, blocks: u64) -> Extent {
        Extent { container, offset: block * 4096, len: blocks * 4096 }
    }

    #[test]
    fn overlaps_are_reported_with_both_extents() {
        let used = [ext(0, 0, 10), ext(0, 12, 1), ext(0, 5, 1), ext(1, 0, 1)];
        match index_used(used, 1 << 20, |_| true) {
            Err(SpaceError::Overlap { first, second }) => {
                assert_eq!((first, second), (ext(0, 0, 10), ext(0, 5, 1)));
            }
            other => panic!("{other:?}"),
        }
        let ok = index_used([ext(1, 0, 1), ext(0, 1, 1), ext(0, 0, 1)], 1 << 20, |_| true).unwrap();
        assert_eq!(ok[&0], vec![ext(0, 0, 1), ext(0, 1, 1)]);
        let err = index_used([ext(7, 0, 1)], 1 << 20, |c| c != 7).unwrap_err();
        assert!(err.to_string().contains("container 0000000000000007"), "{err}");
    }
}
