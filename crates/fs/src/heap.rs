//! What the file system refuses around heaps (docs/heap.md, "What a heap
//! is"): a heap's directories (flagged `FLAG_HEAP`) change their entries
//! only through the heap, so the heap's reverse name index never disagrees
//! with them; a heap object's names are the heap's business, so it gets
//! no hard link here. Reading, and writing a heap object's bytes in
//! place, are allowed; a truncate that would shrink one is refused below
//! (the object layer's `HeapShrink`, EPERM here).

use larder_object::meta::onode::FLAG_HEAP;
use larder_object::meta::{DataLocation, Onode};

use crate::error::{FsError, Result};

/// Whether `o` is a heap's directory (flagged `FLAG_HEAP`).
pub(crate) fn is_heap_directory(o: &Onode) -> bool {
    o.flags & FLAG_HEAP != 0
}

/// EPERM when directory `dir` (its onode `o`) belongs to a heap: `what`
/// (create, unlink, rename...) would change its entries.
pub(crate) fn refuse_in_heap(o: &Onode, dir: u64, what: &str) -> Result<()> {
    if is_heap_directory(o) {
        return Err(FsError::posix(
            libc::EPERM,
            format!(
                "{what} in directory {dir}, which belongs to a heap: its entries change only through the heap \
                 (the heap API, or `larder heap rm`)"
            ),
        ));
    }
    Ok(())
}

/// EPERM when object `ino` (its onode `o`) is a heap object: a hard link
/// would give it a name the heap does not know.
pub(crate) fn refuse_heap_link(o: &Onode, ino: u64) -> Result<()> {
    if matches!(o.location, DataLocation::OwnFile { .. }) {
        return Err(FsError::posix(
            libc::EPERM,
            format!("link of object {ino}, a heap object: its names change only through the heap (add_name)"),
        ));
    }
    Ok(())
}
