//! Larder's store checker: reads a whole store from one index snapshot and
//! reports every broken invariant of docs/format.md section 15.
//!
//! [`check`] first reads the store's redundant copies (the two slots of
//! the superblock): a slot not holding the current copy is a problem
//! ([`Problem::SuperblockCopy`]) that [`repair`] fixes. Then it makes
//! three passes:
//!
//! 1. [`Phase::Index`]: every key of the snapshot, in order. Each key and
//!    value is decoded (one that does not decode is reported and skipped);
//!    references are checked as they are read, since the maps sort so that
//!    every onode precedes the keys referring to it (`visit.rs`); then the
//!    counts: root, link counts, orphans, entry counts (`namespace.rs`).
//! 2. [`Phase::Space`]: no two fmap entries share a block, and the
//!    allocator's free space is container space minus the blocks in use
//!    (`space.rs`).
//! 3. [`Phase::Checksums`]: every block of every referenced extent is read
//!    from its container and checked against its crc32c (`blocks.rs`).
//!
//! Damage is reported, never an error and never a panic: a check returns
//! `Err` only when it cannot go on (the storage fails a read). Bytes the
//! index cannot read (a run block failing its checksum) are a problem
//! naming the file; the checks that depend on the keys lost are skipped
//! and listed in [`Report::skipped`].
//!
//! The metadata and checksum checks see one consistent snapshot, so they
//! may run while the store is in use. The space check compares that
//! snapshot with the allocator as it is now, so it is exact only on a
//! quiescent store: space a concurrent transaction has allocated but not
//! committed would show as leaked.
#![deny(missing_docs)]

mod blocks;
mod error;
mod heap;
mod model;
mod namespace;
mod problem;
mod redundancy;
mod report;
mod scan;
mod space;
mod trees;
mod visit;

use std::collections::BTreeSet;

use larder_index::Snapshot;
use larder_object::meta::{Map, MetaLimits};
use larder_object::Store;
use larder_space::{ReaderGuard, SpaceError};

pub use error::{FsckError, Result};
pub use problem::{ExtentOwner, Problem, ShowKey};
pub use redundancy::{repair, Repaired};
pub use report::{Counts, Phase, Progress, Report, Skipped};

use model::Problems;

/// What a check does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Read every referenced block back and check its crc32c (phase 3).
    /// Default true; false checks metadata and space only, in time
    /// proportional to the index rather than to the data.
    pub verify_checksums: bool,
    /// Problems kept in the report; more are only counted
    /// ([`Report::problems_dropped`]), so a badly damaged store cannot
    /// exhaust memory. Default 100,000.
    pub max_problems: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { verify_checksums: true, max_problems: 100_000 }
    }
}

/// Attempts at a snapshot the space manager accepts before giving up.
const SNAPSHOT_ATTEMPTS: usize = 16;

/// Checks `store` with the default [`Options`], calling `progress` as each
/// phase advances.
pub fn check(store: &Store, progress: &mut dyn FnMut(Progress)) -> Result<Report> {
    check_with(store, &Options::default(), progress)
}

/// Checks `store` as `options` say, calling `progress` as each phase
/// advances. Returns every problem found; `Err` only when the check could
/// not go on.
pub fn check_with(store: &Store, options: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Report> {
    let (snapshot, _guard) = read_view(store)?;
    let limits = MetaLimits::from_superblock(store.superblock());
    let containers = store.space().container_ids().into_iter().collect();
    let mut problems = Problems::new(options.max_problems);
    let mut skipped = BTreeSet::new();
    redundancy::check(store, &mut problems)?;

    let mut visitor = visit::Visitor::new(limits, containers, &mut problems);
    scan::run(&snapshot, &mut visitor, progress)?;
    visitor.finish_arena();
    let mut model = std::mem::take(&mut visitor.model);
    namespace::check(&model, &mut problems, &mut skipped);
    trees::check_counts(&model, &mut problems);
    let mut warnings = Vec::new();
    heap::check(store, &snapshot, &model, &mut problems, &mut warnings, &mut skipped)?;
    model.counts.heaps = model.heap_roots.len() as u64;

    let fmap_complete = model.complete(&[Map::Fmap]);
    let extents = std::mem::take(&mut model.extents);
    space::check(store.space(), extents, fmap_complete, &mut problems, &mut skipped, progress)?;

    if options.verify_checksums {
        let blocks = blocks::BlockCheck { store, snapshot: &snapshot, limits, total: model.blocks, fmap_complete };
        model.counts.blocks_verified = blocks.run(&mut problems, &mut skipped, progress)?;
        if !fmap_complete {
            skipped.insert(Skipped::Checksums);
        }
    }
    Ok(Report {
        problems: problems.list,
        problems_dropped: problems.dropped,
        warnings,
        counts: model.counts,
        skipped: skipped.into_iter().collect(),
        seq: snapshot.seq(),
    })
}

/// An index snapshot and the space manager's registration of it, so no
/// extent the snapshot maps is reused while its blocks are read. A
/// snapshot older than frees already released is refused; a newer one is
/// taken then.
fn read_view(store: &Store) -> Result<(Snapshot, ReaderGuard)> {
    let mut attempt = 0;
    loop {
        let snapshot = store.index().snapshot();
        match store.space().register_reader(snapshot.seq()) {
            Ok(guard) => return Ok((snapshot, guard)),
            Err(SpaceError::ReaderTooOld { .. }) if attempt + 1 < SNAPSHOT_ATTEMPTS => attempt += 1,
            Err(e) => return Err(e.into()),
        }
    }
}
