//! Rule 8: every block in use is referenced by one fmap entry only, and
//! the allocator's free space is exactly container space minus the blocks
//! in use (pending frees aside).
//!
//! `SpaceManager::verify` refuses overlapping extents outright, so the
//! overlaps are found here first, naming both entries, and verify is given
//! the union of the extents in use: the blocks in use, each once.

use std::collections::BTreeSet;

use larder_object::meta::Extent;
use larder_space::{container_file_name, SpaceManager};

use crate::error::Result;
use crate::model::Problems;
use crate::problem::{ExtentOwner, Problem};
use crate::report::{Phase, Progress, Skipped};

/// Checks `extents` (every decoded fmap entry whose container exists)
/// against each other and, when `complete` (the whole fmap was read),
/// against the allocator.
pub(crate) fn check(
    space: &SpaceManager,
    mut extents: Vec<ExtentOwner>,
    complete: bool,
    problems: &mut Problems,
    skipped: &mut BTreeSet<Skipped>,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    extents.sort_unstable_by_key(|o| (o.extent, o.object, o.offset));
    let union = shared(&extents, problems);
    if !complete {
        // Space only some lost fmap keys reference would show as leaked.
        skipped.insert(Skipped::Space);
        return Ok(());
    }
    let report = space.verify(union)?;
    let path = |e: &Extent| space.dir().join(container_file_name(e.container));
    for extent in report.free_but_used {
        problems.push(Problem::FreeButUsed { path: path(&extent), extent });
    }
    for extent in report.leaked {
        problems.push(Problem::Leaked { path: path(&extent), extent });
    }
    progress(Progress { phase: Phase::Space, done: report.containers, total: Some(report.containers) });
    Ok(())
}

/// Reports every entry whose extent shares blocks with an earlier one (in
/// container and offset order; `sorted` is), naming the one reaching
/// furthest before it, and returns the union of all extents.
fn shared(sorted: &[ExtentOwner], problems: &mut Problems) -> Vec<Extent> {
    let mut union: Vec<Extent> = Vec::new();
    // The entry reaching furthest so far in the current container.
    let mut reach: Option<ExtentOwner> = None;
    for &owner in sorted {
        let e = owner.extent;
        match reach.filter(|r| r.extent.container == e.container && e.offset < r.extent.end()) {
            Some(first) => {
                problems.push(Problem::ExtentShared { first, second: owner });
                if e.end() > first.extent.end() {
                    reach = Some(owner);
                }
            }
            None => reach = Some(owner),
        }
        match union.last_mut() {
            Some(u) if u.container == e.container && e.offset < u.end() => {
                u.len = u.len.max(e.end() - u.offset);
            }
            _ => union.push(e),
        }
    }
    union
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(object: u64, container: u64, block: u64, blocks: u64) -> ExtentOwner {
        ExtentOwner { object, offset: 0, extent: Extent { container, offset: block * 4096, len: blocks * 4096 } }
    }

    #[test]
    fn overlaps_name_both_entries_and_the_union_covers_each_block_once() {
        let mut problems = Problems::new(100);
        let sorted = [owner(1, 0, 0, 4), owner(2, 0, 2, 4), owner(3, 0, 4, 1), owner(4, 0, 8, 1), owner(5, 1, 0, 1)];
        let union = shared(&sorted, &mut problems);
        assert_eq!(
            problems.list,
            vec![
                Problem::ExtentShared { first: sorted[0], second: sorted[1] },
                Problem::ExtentShared { first: sorted[1], second: sorted[2] },
            ]
        );
        let ext = |container, block: u64, blocks: u64| Extent { container, offset: block * 4096, len: blocks * 4096 };
        assert_eq!(union, vec![ext(0, 0, 6), ext(0, 8, 1), ext(1, 0, 1)]);
    }
}
