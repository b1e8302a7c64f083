//! Objects that a file system sharing the store holds open. A delete (or
//! a replacing put) that leaves such an object without a name must keep
//! it, as an orphan, until the file system's last close of it, as an
//! unlink through the file system does: otherwise a handle would read an
//! object deleted under it.

/// The open objects of a file system sharing the store, behind the gates
/// its opens and last closes take.
pub trait OpenObjects: Send + Sync {
    /// Holds the gates of `objects` until the guard drops: meanwhile no
    /// open of them begins and no last close of them ends.
    fn hold<'a>(&'a self, objects: &[u64]) -> Box<dyn HeldObjects + 'a>;
}

/// Gates held by [`OpenObjects::hold`].
pub trait HeldObjects {
    /// Whether the file system has `object` open (one of those held).
    fn is_open(&self, object: u64) -> bool;
    /// Marks `object`, open and left without a name by a change that
    /// committed an orphan record for it, so that its last close frees it.
    fn mark_orphaned(&self, object: u64);
}
