//! What a check returns and what it tells its caller while it runs.

use std::fmt;

use crate::problem::Problem;

/// The phases of a check, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// One pass over every key of the index snapshot: decoding and the
    /// metadata invariants.
    Index,
    /// Free space against the extents in use.
    Space,
    /// Every block of every referenced extent read back and checked
    /// against its crc32c.
    Checksums,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Index => "index",
            Phase::Space => "space",
            Phase::Checksums => "checksums",
        })
    }
}

/// How far a check is, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The phase running.
    pub phase: Phase,
    /// Items of the phase done: keys for [`Phase::Index`], containers for
    /// [`Phase::Space`], blocks for [`Phase::Checksums`].
    pub done: u64,
    /// Items the phase has in all, when known before it ends (the index
    /// does not say how many keys it holds).
    pub total: Option<u64>,
}

/// A check that did not run, or ran on part of the store only, because
/// reading the index failed partway (the failure is itself a problem).
/// Skipping it keeps the report free of problems that are only echoes of
/// the keys that could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skipped {
    /// Object ids against `next_object_id` (store metadata unreadable).
    ObjectIds,
    /// Root, dentry targets, fmap and xattr owners (omap unreadable).
    References,
    /// Link counts against dentries.
    LinkCounts,
    /// Directory entry counts against the dmap.
    EntryCounts,
    /// Unnamed objects against orphan records.
    Orphans,
    /// Extended attributes (some were not read).
    Xattrs,
    /// Free space against the extents in use.
    Space,
    /// Block checksums (all or some of them).
    Checksums,
    /// Heap files and records against each other (onodes, dentries or
    /// heap records not read whole).
    Heaps,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Skipped::ObjectIds => "object ids against next_object_id",
            Skipped::References => "references to objects (root, dentries, fmap, xattrs, orphans)",
            Skipped::LinkCounts => "link counts",
            Skipped::EntryCounts => "directory entry counts",
            Skipped::Orphans => "orphan records of unnamed objects",
            Skipped::Xattrs => "extended attributes",
            Skipped::Space => "free space",
            Skipped::Checksums => "block checksums",
            Skipped::Heaps => "heap files and records",
        })
    }
}

/// What a check counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Index keys read.
    pub keys: u64,
    /// Onodes that decoded.
    pub objects: u64,
    /// Of those, directories.
    pub directories: u64,
    /// Of those, objects whose bytes live in a heap file of their own.
    pub heap_objects: u64,
    /// Heaps (heap root records).
    pub heaps: u64,
    /// Heap objects whose arena records were decoded and checked.
    pub heap_arenas: u64,
    /// Dentries (dmap keys).
    pub dentries: u64,
    /// Extent map entries (fmap keys).
    pub fmap_entries: u64,
    /// Extended attributes.
    pub xattrs: u64,
    /// Orphan records.
    pub orphans: u64,
    /// Transactional trees (catalog records that decoded).
    pub trees: u64,
    /// Entries of transactional trees.
    pub tree_entries: u64,
    /// Container bytes the extent map references (whole blocks).
    pub bytes_referenced: u64,
    /// Container blocks read back whose crc32c matched.
    pub blocks_verified: u64,
}

/// The outcome of a check: every problem found, what was counted, and
/// what could not be checked.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every problem found, in the order found (by phase, then key order).
    pub problems: Vec<Problem>,
    /// Findings that are no damage and leave the store clean (a stray
    /// heap file, which the next open removes).
    pub warnings: Vec<Problem>,
    /// Problems found beyond [`crate::Options::max_problems`], counted but
    /// not kept.
    pub problems_dropped: u64,
    /// What was counted.
    pub counts: Counts,
    /// Checks skipped, wholly or in part, because the index could not be
    /// read through. Empty after a complete check.
    pub skipped: Vec<Skipped>,
    /// The index sequence number the check saw the store at.
    pub seq: u64,
}

impl Report {
    /// Whether the store passed every check, and every check ran.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.problems_dropped == 0 && self.skipped.is_empty()
    }
}

impl fmt::Display for Report {
    /// One problem per line, then the counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.problems {
            writeln!(f, "{p}")?;
        }
        if self.problems_dropped > 0 {
            writeln!(f, "... and {} more problems", self.problems_dropped)?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        for s in &self.skipped {
            writeln!(f, "not checked (index unreadable): {s}")?;
        }
        let c = &self.counts;
        write!(
            f,
            "{} problems; {} keys, {} objects ({} directories, {} heap objects in {} heaps, {} arenas), {} dentries, \
             {} fmap entries, {} xattrs, {} orphans, {} bytes referenced, {} blocks verified",
            self.problems.len() as u64 + self.problems_dropped,
            c.keys,
            c.objects,
            c.directories,
            c.heap_objects,
            c.heaps,
            c.heap_arenas,
            c.dentries,
            c.fmap_entries,
            c.xattrs,
            c.orphans,
            c.bytes_referenced,
            c.blocks_verified
        )
    }
}
