//! The problems a check reports: one variant per broken rule of
//! docs/format.md section 15, each naming where (object id, key, container
//! file and offset) and what is wrong.

use std::fmt;
use std::path::PathBuf;

use larder_object::meta::{Extent, Kind, MetaKey, Name, XattrName};

/// An fmap entry: the object, the logical offset of its key, its extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentOwner {
    /// The object.
    pub object: u64,
    /// The entry's logical offset in the object.
    pub offset: u64,
    /// The container space it references.
    pub extent: Extent,
}

impl fmt::Display for ExtentOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (object {} offset {})", self.extent, self.object, self.offset)
    }
}

/// A key as a person reads it: which map, which object, which name.
pub struct ShowKey<'a>(pub &'a MetaKey);

impl fmt::Display for ShowKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            MetaKey::Store(name) => write!(f, "store entry \"{name}\""),
            MetaKey::Onode { object } => write!(f, "onode of object {object}"),
            MetaKey::Extent { object, offset } => write!(f, "fmap entry of object {object} at offset {offset}"),
            MetaKey::Dentry { parent, name } => write!(f, "dentry \"{name}\" in directory {parent}"),
            MetaKey::Xattr { object, name } => write!(f, "xattr \"{name}\" of object {object}"),
            MetaKey::Orphan { object } => write!(f, "orphan record of object {object}"),
            MetaKey::HeapRoot { root } => write!(f, "heap root record of directory {root}"),
            MetaKey::HeapObject { object } => write!(f, "heap object record of object {object}"),
            MetaKey::HeapName { object, name } => write!(f, "heap name \"{name}\" of object {object}"),
            MetaKey::HeapType { type_id } => write!(f, "heap type {type_id}"),
            MetaKey::HeapSpan { object, span } => write!(f, "arena record of object {object} at {span}"),
            MetaKey::HeapImage { object, offset } => write!(f, "page image of object {object} at {offset}"),
            MetaKey::TreeCatalog { name } => write!(f, "catalog record of tree \"{}\"", name.escape_default()),
            MetaKey::TreeNextId => write!(f, "tree id high-water mark"),
            MetaKey::TreeCount { tree } => write!(f, "count record of tree {tree}"),
            MetaKey::TreeEntry { tree, key } => write!(f, "entry {} of tree {tree}", hex(key)),
        }
    }
}

/// Raw key bytes in hex, cut after 64 bytes so a hostile key cannot flood
/// a terminal.
fn hex(bytes: &[u8]) -> String {
    let cut = bytes.get(..64).unwrap_or(bytes);
    let mut s: String = cut.iter().map(|b| format!("{b:02x}")).collect();
    if cut.len() < bytes.len() {
        s.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    s
}

/// One broken invariant. The rule numbers are docs/format.md section 15's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// Redundancy: a slot of the superblock that does not hold the current
    /// copy (damaged, stale or zero); the store runs on the other one, so
    /// one more damaged byte there would make it unopenable. `larder fsck
    /// --repair` ([`crate::repair`]) rewrites it.
    SuperblockCopy {
        /// The superblock file.
        path: PathBuf,
        /// 0 for slot A, 1 for slot B.
        slot: usize,
        /// The slot's offset in the file.
        offset: u64,
        /// What the slot holds instead.
        what: String,
    },
    /// Rule 1: a key that is no key of the object layer.
    BadKey {
        /// The raw key.
        key: Vec<u8>,
        /// Why it does not decode.
        error: String,
    },
    /// Rule 1: a value that does not decode as its map's record.
    BadValue {
        /// The key holding it.
        key: MetaKey,
        /// Why it does not decode.
        error: String,
    },
    /// Rule 1: a store metadata entry this build does not define.
    UnknownStoreEntry {
        /// Its name.
        name: String,
    },
    /// Rule 1: the index could not be read through (a run block failing
    /// its checksum names the file). The keys between `from` and `to`
    /// were not checked.
    IndexUnreadable {
        /// The index's error, naming the file.
        error: String,
        /// The last key read before the failure (or where the attempt
        /// began); `None`: the start of the index.
        from: Option<Vec<u8>>,
        /// Where the scan went on (the next map's prefix); `None`: it
        /// could not, the rest of the index is unchecked.
        to: Option<Vec<u8>>,
    },
    /// Rule 2: object 1 has no onode.
    RootMissing,
    /// Rule 2: object 1 is not a directory.
    RootNotDirectory {
        /// What it is.
        kind: Kind,
    },
    /// Rule 2: the root's parent is not itself.
    RootParent {
        /// The parent recorded.
        parent: u64,
    },
    /// Rule 2: the root has a link count.
    RootLinked {
        /// The link count recorded.
        nlink: u32,
        /// Its subdirectories (the root has no name: its nlink counts
        /// only their `..`).
        subdirs: u64,
    },
    /// Rule 2: a dentry names the root.
    RootNamed {
        /// The directory holding the dentry.
        parent: u64,
        /// The dentry's name.
        name: Name,
    },
    /// Rule 2: the root has an orphan record.
    RootOrphan,
    /// Rule 3: an object id that was never allocated.
    IdNotAllocated {
        /// The id.
        id: u64,
        /// The key holding it (in the key or in its value).
        key: MetaKey,
        /// Which field of the key or value.
        field: &'static str,
        /// The store's `next_object_id`, if it has one.
        next_object_id: Option<u64>,
    },
    /// Rule 4: a dentry in a directory that does not exist.
    DentryParentMissing {
        /// The directory.
        parent: u64,
        /// The dentry's name.
        name: Name,
    },
    /// Rule 4: a dentry in an object that is not a directory.
    DentryParentNotDirectory {
        /// The object.
        parent: u64,
        /// The dentry's name.
        name: Name,
        /// What the object is.
        kind: Kind,
    },
    /// Rule 4: a dentry naming an object that does not exist.
    DentryChildMissing {
        /// The directory.
        parent: u64,
        /// The dentry's name.
        name: Name,
        /// The object named.
        child: u64,
    },
    /// Rule 4: a dentry whose kind is not its object's.
    DentryKindMismatch {
        /// The directory.
        parent: u64,
        /// The dentry's name.
        name: Name,
        /// The object named.
        child: u64,
        /// The kind the dentry says.
        dentry: Kind,
        /// The kind the onode says.
        onode: Kind,
    },
    /// Rule 4: a directory named by a second dentry.
    DirectoryNamedTwice {
        /// The directory.
        dir: u64,
        /// The first dentry naming it: (directory, name).
        first: (u64, Name),
        /// Another one.
        second: (u64, Name),
    },
    /// Rule 4: a directory whose recorded parent is not the directory
    /// holding its dentry.
    DirectoryParentMismatch {
        /// The directory.
        dir: u64,
        /// The parent its onode records.
        recorded: u64,
        /// The directory holding its dentry.
        parent: u64,
        /// The dentry's name.
        name: Name,
    },
    /// Rule 4: a named directory whose chain of parents never reaches the
    /// root (it loops): it and everything below it are lost to path walks.
    DirectoryUnreachable {
        /// The directory.
        dir: u64,
        /// The parent its onode records.
        parent: u64,
    },
    /// Rule 5: a link count that is not the number of dentries.
    NlinkMismatch {
        /// The object.
        object: u64,
        /// Its link count.
        nlink: u32,
        /// Links found: dentries naming it, plus, for a directory, the
        /// `..` of each subdirectory.
        dentries: u64,
    },
    /// Rule 5: an object without names and without an orphan record.
    UnnamedWithoutOrphan {
        /// The object.
        object: u64,
    },
    /// Rule 5: an orphan record of an object that does not exist.
    OrphanWithoutObject {
        /// The object.
        object: u64,
    },
    /// Rule 5: an orphan record of an object that has names.
    OrphanLinked {
        /// The object.
        object: u64,
        /// Its link count.
        nlink: u32,
    },
    /// Rule 6: a directory whose entry count is not its number of dentries.
    EntryCountMismatch {
        /// The directory.
        dir: u64,
        /// The count its onode records.
        recorded: u64,
        /// Dentries under it.
        found: u64,
    },
    /// Rule 7: an fmap entry of an object that does not exist.
    FmapWithoutOnode {
        /// The object.
        object: u64,
        /// The entry's logical offset.
        offset: u64,
    },
    /// Rule 7: an fmap entry of an object whose bytes are not in extents.
    FmapNotExtents {
        /// The object.
        object: u64,
        /// The entry's logical offset.
        offset: u64,
        /// Where the onode says its bytes are.
        location: &'static str,
    },
    /// Rule 7: an fmap entry starting before the previous one of the same
    /// object ends.
    FmapOverlap {
        /// The object.
        object: u64,
        /// The entry's logical offset.
        offset: u64,
        /// Where the entries before it end.
        previous_end: u64,
    },
    /// Rule 7: an fmap entry ending past its object's size.
    FmapPastSize {
        /// The object.
        object: u64,
        /// The entry's logical offset.
        offset: u64,
        /// Where the entry's range ends.
        end: u64,
        /// The object's size.
        size: u64,
    },
    /// Rule 7: an fmap entry in a container that does not exist.
    ContainerMissing {
        /// The entry.
        owner: ExtentOwner,
    },
    /// Rule 8: two fmap entries referencing the same blocks.
    ExtentShared {
        /// The entry whose extent starts first.
        first: ExtentOwner,
        /// The entry overlapping it.
        second: ExtentOwner,
    },
    /// Rule 8: space in use that the allocator holds as free (it could
    /// hand it out again and overwrite live data).
    FreeButUsed {
        /// The container file.
        path: PathBuf,
        /// The space.
        extent: Extent,
    },
    /// Rule 8: space neither in use, free, nor pending release.
    Leaked {
        /// The container file.
        path: PathBuf,
        /// The space.
        extent: Extent,
    },
    /// Rule 9: a container block whose crc32c is not the one its fmap
    /// entry records.
    ChecksumMismatch {
        /// The object.
        object: u64,
        /// The block's logical offset in the object.
        offset: u64,
        /// The container file.
        path: PathBuf,
        /// The block's offset in the container file.
        container_offset: u64,
    },
    /// Rule 10: an extended attribute of an object that does not exist.
    XattrWithoutObject {
        /// The object.
        object: u64,
        /// The attribute's name.
        name: XattrName,
    },
    /// Heaps: a heap object (its onode says `OwnFile`) without a heap
    /// object record.
    HeapObjectWithoutRecord {
        /// The object.
        object: u64,
    },
    /// Heaps: a heap object whose file is missing.
    HeapFileMissing {
        /// The object.
        object: u64,
        /// The file it should have.
        path: PathBuf,
    },
    /// Heaps: a heap object's file shorter than the durable size its
    /// record keeps: something outside Larder shrank it (the heap refuses
    /// to attach it).
    HeapFileShrunk {
        /// The object.
        object: u64,
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The durable size of its record.
        durable_size: u64,
    },
    /// Heaps: a heap object record whose object does not exist.
    HeapRecordWithoutObject {
        /// The object.
        object: u64,
    },
    /// Heaps: a heap object record whose object keeps its bytes elsewhere.
    HeapRecordNotHeapObject {
        /// The object.
        object: u64,
        /// Where its bytes are.
        location: &'static str,
    },
    /// Heaps: a heap object record naming a heap that has no root record.
    HeapObjectWithoutHeap {
        /// The object.
        object: u64,
        /// The heap root directory it names.
        heap: u64,
    },
    /// Heaps: a heap root record whose directories are missing, not
    /// directories, or not flagged `FLAG_HEAP`.
    HeapRootBroken {
        /// The heap's root directory.
        root: u64,
        /// What is wrong.
        what: String,
    },
    /// Heaps: an entry of a heap's `objects/` or `names/` directory that
    /// does not name a heap object of that heap as it should.
    HeapEntryWrong {
        /// The heap's root directory.
        heap: u64,
        /// The directory holding the entry.
        dir: u64,
        /// The entry's name.
        name: Name,
        /// The object it names.
        child: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// Heaps: a heap object without its entry in its heap's `objects/`.
    HeapObjectUnlisted {
        /// The object.
        object: u64,
        /// Its heap.
        heap: u64,
    },
    /// Heaps: a reverse name record whose `names/` entry is missing or
    /// names another object.
    HeapNameWithoutEntry {
        /// The object.
        object: u64,
        /// The name.
        name: Name,
    },
    /// Heaps: a reverse name record of an object without a heap record.
    HeapNameWithoutObject {
        /// The object.
        object: u64,
        /// The name.
        name: Name,
    },
    /// Trees (rule T1): two catalog records give the same tree id.
    TreeIdShared {
        /// The id.
        id: u64,
        /// The first tree's name.
        first: String,
        /// The second tree's name.
        second: String,
    },
    /// Trees (rule T1): a catalog record's id is at or above the id
    /// high-water mark, so it could be handed out again.
    TreeIdNotAllocated {
        /// The id.
        id: u64,
        /// The tree's name.
        name: String,
        /// The high-water mark.
        next_tree_id: u64,
    },
    /// Trees (rule T2): entries or a count record of a tree id that has no
    /// catalog record (reported once per tree).
    TreeNotInCatalog {
        /// The tree id.
        tree: u64,
    },
    /// Trees (rule T3): a tree's count record does not match its entries.
    TreeCountMismatch {
        /// The tree id.
        tree: u64,
        /// The tree's name.
        name: String,
        /// The count recorded (0 without a record).
        recorded: u64,
        /// The entries found.
        found: u64,
    },
    /// Heaps: an arena span record of an object without a heap record.
    HeapSpanWithoutObject {
        /// The object.
        object: u64,
        /// The span's offset.
        span: u64,
    },
    /// Heaps: a heap object's arena records do not load as the heap
    /// loads them, the arena they make is inconsistent, or it claims
    /// bytes past the object's size.
    HeapArenaBroken {
        /// The object.
        object: u64,
        /// What is wrong.
        what: String,
    },
    /// Heaps (a warning, not damage): a file in `heap/` that belongs to no
    /// heap object (a create whose transaction was lost, a free whose
    /// removal did not happen): the next open of the store removes it.
    HeapStrayFile {
        /// The file.
        path: PathBuf,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem::*;
        match self {
            SuperblockCopy { path, slot, offset, what } => write!(
                f,
                "{}: superblock copy {} (offset {offset}) {what}; the store runs on the other copy \
                 (`larder fsck --repair` rewrites it)",
                path.display(),
                if *slot == 0 { "A" } else { "B" }
            ),
            BadKey { key, error } => write!(f, "index key {}: {error}", hex(key)),
            BadValue { key, error } => write!(f, "{}: value does not decode: {error}", ShowKey(key)),
            UnknownStoreEntry { name } => write!(f, "store entry \"{name}\" is not one this build defines"),
            IndexUnreadable { error, from, to } => {
                let from = from.as_deref().map_or_else(|| "the start".to_string(), hex);
                let to = to.as_deref().map_or_else(|| "the end".to_string(), hex);
                write!(f, "index unreadable: {error}; keys from {from} to {to} not checked")
            }
            RootMissing => f.write_str("root (object 1) has no onode"),
            RootNotDirectory { kind } => write!(f, "root (object 1) is a {kind:?}, not a directory"),
            RootParent { parent } => write!(f, "root (object 1) has parent {parent}; the root is its own parent"),
            RootLinked { nlink, subdirs } => write!(
                f,
                "root (object 1) has nlink {nlink}; the root has no name, so it counts its {subdirs} subdirectories"
            ),
            RootNamed { parent, name } => write!(f, "dentry \"{name}\" in directory {parent} names the root"),
            RootOrphan => f.write_str("root (object 1) has an orphan record"),
            IdNotAllocated { id, key, field, next_object_id } => {
                write!(f, "{}: {field} {id} was never allocated (", ShowKey(key))?;
                match next_object_id {
                    _ if *id == 0 => f.write_str("id 0 never is)"),
                    Some(n) => write!(f, "next_object_id is {n})"),
                    None => f.write_str("the store has no next_object_id)"),
                }
            }
            DentryParentMissing { parent, name } => {
                write!(f, "dentry \"{name}\" in directory {parent}: directory {parent} does not exist")
            }
            DentryParentNotDirectory { parent, name, kind } => {
                write!(f, "dentry \"{name}\" in directory {parent}: object {parent} is a {kind:?}, not a directory")
            }
            DentryChildMissing { parent, name, child } => {
                write!(f, "dentry \"{name}\" in directory {parent} names object {child}, which does not exist")
            }
            DentryKindMismatch { parent, name, child, dentry, onode } => write!(
                f,
                "dentry \"{name}\" in directory {parent} says object {child} is a {dentry:?}; its onode says {onode:?}"
            ),
            DirectoryNamedTwice { dir, first, second } => write!(
                f,
                "directory {dir} is named by dentry \"{}\" in directory {} and again by \"{}\" in directory {}",
                first.1, first.0, second.1, second.0
            ),
            DirectoryParentMismatch { dir, recorded, parent, name } => write!(
                f,
                "directory {dir} records parent {recorded} but is named by dentry \"{name}\" in directory {parent}"
            ),
            DirectoryUnreachable { dir, parent } => write!(
                f,
                "directory {dir} (parent {parent}) is not reachable from the root: its parents form a cycle"
            ),
            NlinkMismatch { object, nlink, dentries } => {
                write!(f, "object {object} has nlink {nlink} but {dentries} links were found (dentries naming it, and a directory's subdirectories)")
            }
            UnnamedWithoutOrphan { object } => {
                write!(f, "object {object} has no names (nlink 0) and no orphan record: it would leak")
            }
            OrphanWithoutObject { object } => write!(f, "orphan record of object {object}, which does not exist"),
            OrphanLinked { object, nlink } => {
                write!(f, "orphan record of object {object}, which has nlink {nlink}")
            }
            EntryCountMismatch { dir, recorded, found } => {
                write!(f, "directory {dir} records {recorded} entries but has {found} dentries")
            }
            FmapWithoutOnode { object, offset } => {
                write!(f, "fmap entry of object {object} at offset {offset}: the object does not exist")
            }
            FmapNotExtents { object, offset, location } => write!(
                f,
                "fmap entry of object {object} at offset {offset}: the object's bytes are {location}, not in extents"
            ),
            FmapOverlap { object, offset, previous_end } => write!(
                f,
                "fmap entry of object {object} at offset {offset} overlaps the entry before it (ending at {previous_end})"
            ),
            FmapPastSize { object, offset, end, size } => write!(
                f,
                "fmap entry of object {object} at offset {offset} ends at {end}, past the object's size {size}"
            ),
            ContainerMissing { owner } => write!(f, "fmap entry {owner}: the container does not exist"),
            ExtentShared { first, second } => write!(f, "extents in use overlap: {first} and {second}"),
            FreeButUsed { path, extent } => write!(
                f,
                "{}: bytes [{}, +{}) are in use but free in the allocator (could be overwritten)",
                path.display(),
                extent.offset,
                extent.len
            ),
            Leaked { path, extent } => write!(
                f,
                "{}: bytes [{}, +{}) are neither in use, free nor pending (leaked until reopened)",
                path.display(),
                extent.offset,
                extent.len
            ),
            ChecksumMismatch { object, offset, path, container_offset } => write!(
                f,
                "object {object} offset {offset}: block at offset {container_offset} of {} fails its crc32c",
                path.display()
            ),
            XattrWithoutObject { object, name } => {
                write!(f, "xattr \"{name}\" of object {object}: the object does not exist")
            }
            HeapObjectWithoutRecord { object } => {
                write!(f, "heap object {object} (its bytes in a heap file) has no heap object record")
            }
            HeapFileMissing { object, path } => {
                write!(f, "heap object {object}: its file {} is missing", path.display())
            }
            HeapFileShrunk { object, path, len, durable_size } => write!(
                f,
                "heap object {object}: {} is {len} bytes, shorter than its durable size {durable_size}: \
                 shrunk outside Larder (the heap refuses to attach it)",
                path.display()
            ),
            HeapRecordWithoutObject { object } => {
                write!(f, "heap object record of object {object}, which does not exist")
            }
            HeapRecordNotHeapObject { object, location } => {
                write!(f, "heap object record of object {object}, whose bytes are {location}, not in a heap file")
            }
            HeapObjectWithoutHeap { object, heap } => {
                write!(f, "heap object {object} belongs to heap {heap}, which has no heap root record")
            }
            HeapRootBroken { root, what } => write!(f, "heap {root}: {what}"),
            HeapEntryWrong { heap, dir, name, child, what } => {
                write!(f, "heap {heap}: entry \"{name}\" in directory {dir} names object {child}: {what}")
            }
            HeapObjectUnlisted { object, heap } => {
                write!(f, "heap object {object} has no entry in the objects directory of heap {heap}")
            }
            HeapNameWithoutEntry { object, name } => write!(
                f,
                "heap name \"{name}\" of object {object}: its heap's names directory has no such entry naming it"
            ),
            HeapNameWithoutObject { object, name } => {
                write!(f, "heap name \"{name}\" of object {object}, which has no heap object record")
            }
            TreeIdShared { id, first, second } => {
                write!(f, "trees \"{}\" and \"{}\" share the id {id}", first.escape_default(), second.escape_default())
            }
            TreeIdNotAllocated { id, name, next_tree_id } => write!(
                f,
                "tree \"{}\" has id {id}, not below the tree id high-water mark {next_tree_id}",
                name.escape_default()
            ),
            TreeNotInCatalog { tree } => write!(f, "tree {tree} has entries or a count but no catalog record"),
            TreeCountMismatch { tree, name, recorded, found } => write!(
                f,
                "tree \"{}\" (id {tree}) records {recorded} entries but has {found}",
                name.escape_default()
            ),
            HeapSpanWithoutObject { object, span } => {
                write!(f, "arena record of object {object} at {span}: the object has no heap object record")
            }
            HeapArenaBroken { object, what } => write!(f, "arena of heap object {object}: {what}"),
            HeapStrayFile { path } => write!(
                f,
                "{} belongs to no heap object (the next open of the store removes it)",
                path.display()
            ),
        }
    }
}
