//! What the index pass keeps in memory: a small summary per object, the
//! extents in use, and which maps could be read whole. Values themselves
//! (inline bytes, checksums) are not kept: the checksum phase reads the
//! fmap again from the same snapshot, so memory stays proportional to the
//! number of objects and extents, not to the data.

use std::collections::{BTreeMap, BTreeSet};

use larder_object::meta::onode::FLAG_HEAP;
use larder_object::meta::{DataLocation, HeapObject, HeapRoot, Kind, Map, Name, Onode};

use crate::problem::{ExtentOwner, Problem};
use crate::report::Counts;

/// Where an object's bytes live, without the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    Inline,
    Extents,
    OwnFile,
}

impl Loc {
    pub(crate) fn of(location: &DataLocation) -> Loc {
        match location {
            DataLocation::Inline(_) => Loc::Inline,
            DataLocation::Extents => Loc::Extents,
            DataLocation::OwnFile { .. } => Loc::OwnFile,
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Loc::Inline => "inline",
            Loc::Extents => "in extents",
            Loc::OwnFile => "in a heap file",
        }
    }
}

/// One object as the checks need it.
#[derive(Clone, Debug)]
pub(crate) struct ObjInfo {
    pub(crate) kind: Kind,
    pub(crate) nlink: u32,
    pub(crate) size: u64,
    pub(crate) loc: Loc,
    /// The heap file id of an object whose bytes are in one.
    pub(crate) heap_file: Option<u64>,
    /// The onode carries `FLAG_HEAP` (a heap's directory).
    pub(crate) heap_flag: bool,
    /// `DirInfo` (parent, recorded entry count) of a directory.
    pub(crate) dir: Option<(u64, u64)>,
    /// Dentries naming the object.
    pub(crate) names: u64,
    /// Dentries under the object (a directory).
    pub(crate) entries: u64,
    /// Dentries under the object naming directories (their `..` links
    /// count in its nlink).
    pub(crate) subdirs: u64,
    /// Whether an orphan record exists for it (even one that does not
    /// decode: the key says the record is there).
    pub(crate) orphan: bool,
    /// The first dentry naming a directory, to name both when a second
    /// one turns up.
    pub(crate) first_name: Option<(u64, Name)>,
}

impl ObjInfo {
    pub(crate) fn new(onode: &Onode) -> ObjInfo {
        ObjInfo {
            kind: onode.kind,
            nlink: onode.nlink,
            size: onode.size,
            loc: Loc::of(&onode.location),
            heap_file: match onode.location {
                DataLocation::OwnFile { file } => Some(file),
                _ => None,
            },
            heap_flag: onode.flags & FLAG_HEAP != 0,
            dir: onode.dir.map(|d| (d.parent, d.entries)),
            names: 0,
            entries: 0,
            subdirs: 0,
            orphan: false,
            first_name: None,
        }
    }
}

/// An object as a reference to it finds it.
pub(crate) enum Lookup<'a> {
    /// No onode key.
    Missing,
    /// An onode key whose value does not decode (already reported: checks
    /// depending on the onode are skipped rather than reported twice).
    Undecodable,
    /// The onode.
    Found(&'a mut ObjInfo),
}

/// Everything the index pass found.
#[derive(Default)]
pub(crate) struct Model {
    pub(crate) objects: BTreeMap<u64, ObjInfo>,
    pub(crate) undecodable: BTreeSet<u64>,
    /// Every decoded fmap entry whose container exists.
    pub(crate) extents: Vec<ExtentOwner>,
    /// Blocks of those extents (the checksum phase's total).
    pub(crate) blocks: u64,
    pub(crate) next_object_id: Option<u64>,
    /// Heap root records that decoded, by root directory.
    pub(crate) heap_roots: BTreeMap<u64, HeapRoot>,
    /// Heap object records that decoded, by object.
    pub(crate) heap_objects: BTreeMap<u64, HeapObject>,
    /// Heap name records (the reverse index of each heap's `names/`).
    pub(crate) heap_names: Vec<(u64, Name)>,
    /// Maps some of whose keys could not be read.
    pub(crate) incomplete: BTreeSet<Map>,
    pub(crate) counts: Counts,
    /// The transactional trees' catalog, counts and entries.
    pub(crate) trees: crate::trees::TreesModel,
}

impl Model {
    pub(crate) fn lookup(&mut self, id: u64) -> Lookup<'_> {
        match self.objects.get_mut(&id) {
            Some(o) => Lookup::Found(o),
            None if self.undecodable.contains(&id) => Lookup::Undecodable,
            None => Lookup::Missing,
        }
    }

    /// Whether every key of all of `maps` was read.
    pub(crate) fn complete(&self, maps: &[Map]) -> bool {
        maps.iter().all(|m| !self.incomplete.contains(m))
    }
}

/// The problems found so far, keeping at most `max`.
pub(crate) struct Problems {
    pub(crate) list: Vec<Problem>,
    pub(crate) max: usize,
    pub(crate) dropped: u64,
}

impl Problems {
    pub(crate) fn new(max: usize) -> Problems {
        Problems { list: Vec::new(), max, dropped: 0 }
    }

    pub(crate) fn push(&mut self, p: Problem) {
        if self.list.len() < self.max {
            self.list.push(p);
        } else {
            self.dropped += 1;
        }
    }
}
