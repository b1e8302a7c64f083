//! Which leases a request must revoke before it executes
//! (docs/server.md, "Leases": the conflict table).
//!
//! An object lease covers the object's attributes, a file's bytes and
//! opens of it kept after close; the namespace lease covers path
//! resolutions. So a request revokes:
//!
//! - `Object(ino)` when it changes the object: a write, fallocate or
//!   setattr of it, an open or create with O_TRUNC, a link to it, an
//!   unlink, rmdir or rename of a name of it or over it, an extended
//!   attribute set or removed;
//! - `Object(dir)` of every directory whose entries it changes (its size,
//!   times and link count change): create, mknod, mkdir, symlink, link,
//!   unlink, rmdir, rename, a bucket made;
//! - `Namespace` when it may change how an existing path resolves: unlink,
//!   rmdir, rename, a setattr of mode, owner or group on a directory, an
//!   extended attribute set or removed (ACLs), a metadata batch;
//! - `Subtree(dir)` of every directory at or above each directory whose
//!   entries or attributes it changes (the directories above are found
//!   through `..`), and of a directory it removes: only while subtree
//!   leases are in use, which a change learns from the lease table
//!   (`LeaseTable::subtrees_in_use`);
//! - everything: a KV put, delete, batch, writer finish or bucket removal
//!   (a put rewrites a value's object in place, a delete removes names).
//!
//! A name is looked up before the change to find its object; a rename
//! racing with the change can make that the wrong object, whose client
//! keeps cached bytes that are still the object's (its paths are revoked
//! through the namespace).

use larder_fs::{Cred, Fs, Kind};
use larder_protocol::message::{LeaseTarget, Request};

use crate::leases::Scope;
use crate::session::{HandleKind, Session};

/// What `request` of `session` revokes; with `subtrees`, the subtree
/// leases over what it changes too.
pub(crate) fn scope(fs: &Fs, session: &Session, request: &Request, subtrees: bool) -> Scope {
    scope_of_all(fs, session, std::slice::from_ref(request), subtrees)
}

/// What `requests` of `session` revoke together (a batch's operations).
pub(crate) fn scope_of_all(fs: &Fs, session: &Session, requests: &[Request], subtrees: bool) -> Scope {
    use LeaseTarget::{Namespace, Object, Subtree};
    let mut targets = Vec::new();
    let mut directories = Vec::new();
    for request in requests {
        if !collect(fs, session, request, &mut targets, &mut directories) {
            return Scope::Everything;
        }
    }
    if subtrees {
        for directory in directories {
            targets.extend(at_and_above(fs, directory).into_iter().map(Subtree));
        }
    }
    if targets.is_empty() {
        Scope::Nothing
    } else {
        targets.sort_by_key(|t| match t {
            Namespace => (0, 0),
            Object(ino) => (1, *ino),
            Subtree(ino) => (2, *ino),
        });
        targets.dedup();
        Scope::Targets(targets)
    }
}

/// Most directories walked up from one: deeper trees are not a case a
/// server meets, and a loop (a corrupt `..`) must end.
const MAX_DEPTH: usize = 4096;

/// `directory` and every directory above it up to the root, through
/// `..`; an object that is not a directory (or is gone) ends the walk
/// after itself.
fn at_and_above(fs: &Fs, directory: u64) -> Vec<u64> {
    let mut out = vec![directory];
    let mut at = directory;
    while out.len() < MAX_DEPTH {
        match fs.lookup(&Cred::root(), at, b"..") {
            Ok(parent) if parent.ino != at => {
                out.push(parent.ino);
                at = parent.ino;
            }
            _ => break,
        }
    }
    out
}

/// The object a name names now, if any.
fn named(fs: &Fs, parent: u64, name: &[u8]) -> Option<u64> {
    fs.lookup(&Cred::root(), parent, name).ok().map(|attr| attr.ino)
}

/// Adds `request`'s targets to `out`, and to `directories` the
/// directories whose entries or attributes it changes or that it
/// removes (and objects whose attributes it changes, which may be
/// directories: for one that is not, only a subtree lease on it would be
/// named, and none is granted on a non-directory); false when it revokes
/// everything.
fn collect(
    fs: &Fs,
    session: &Session,
    request: &Request,
    out: &mut Vec<LeaseTarget>,
    directories: &mut Vec<u64>,
) -> bool {
    use LeaseTarget::{Namespace, Object};
    const O_TRUNC: i32 = libc::O_TRUNC;
    match request {
        Request::Write { handle, .. } | Request::Fallocate { handle, .. } => {
            if let Some((HandleKind::File, ino)) = session.handle(*handle) {
                out.push(Object(ino));
            }
        }
        Request::SetAttributes { ino, set, .. } => {
            out.push(Object(*ino));
            directories.push(*ino);
            if set.mode.is_some() || set.uid.is_some() || set.gid.is_some() {
                let directory = fs.getattr(*ino).map(|a| a.kind == Kind::Directory).unwrap_or(true);
                if directory {
                    out.push(Namespace);
                }
            }
        }
        Request::Open { ino, flags } if flags & O_TRUNC != 0 => out.push(Object(*ino)),
        Request::Create { parent, name, flags, .. } => {
            out.push(Object(*parent));
            directories.push(*parent);
            if flags & O_TRUNC != 0 {
                out.extend(named(fs, *parent, name).map(Object));
            }
        }
        Request::Mknod { parent, .. } | Request::Mkdir { parent, .. } | Request::Symlink { parent, .. } => {
            out.push(Object(*parent));
            directories.push(*parent);
        }
        Request::Link { ino, parent, .. } => {
            out.push(Object(*ino));
            out.push(Object(*parent));
            directories.push(*parent);
        }
        Request::Unlink { parent, name } => {
            out.push(Namespace);
            out.push(Object(*parent));
            directories.push(*parent);
            out.extend(named(fs, *parent, name).map(Object));
        }
        Request::Rmdir { parent, name } => {
            out.push(Namespace);
            out.push(Object(*parent));
            directories.push(*parent);
            if let Some(removed) = named(fs, *parent, name) {
                out.push(Object(removed));
                out.push(LeaseTarget::Subtree(removed));
            }
        }
        Request::Rename { parent, name, new_parent, new_name, .. } => {
            out.push(Namespace);
            out.push(Object(*parent));
            out.push(Object(*new_parent));
            directories.extend([*parent, *new_parent]);
            out.extend(named(fs, *parent, name).map(Object));
            if let Some(replaced) = named(fs, *new_parent, new_name) {
                // A directory renamed over goes, as by rmdir.
                out.push(Object(replaced));
                out.push(LeaseTarget::Subtree(replaced));
            }
        }
        Request::SetXattr { ino, .. } | Request::RemoveXattr { ino, .. } => {
            out.push(Namespace);
            out.push(Object(*ino));
            directories.push(*ino);
        }
        Request::MetadataBatch { operations, .. } => {
            out.push(Namespace);
            for operation in operations {
                if !collect(fs, session, operation, out, directories) {
                    return false;
                }
            }
        }
        Request::CreateBucket { .. } => {
            out.push(Object(fs.root()));
            directories.push(fs.root());
        }
        Request::KvPut { .. }
        | Request::KvDelete { .. }
        | Request::KvWriteBatch { .. }
        | Request::KvWriterFinish { .. }
        | Request::DeleteBucket { .. } => return false,
        // Opening may create the heap's directories: rare, so coarse.
        Request::HeapOpen { .. } => return false,
        Request::Heap { heap, operation } => {
            // A heap handle that is not open answers EBADF and changes
            // nothing.
            if let Ok(heap) = session.heaps().get(*heap) {
                heap_targets(&heap, operation, out, directories);
            }
        }
        _ => {}
    }
    true
}

/// What a heap operation changes: its `objects/` directory (alloc, copy,
/// clone, free), its `names/` directory (add_name, free), the object (its
/// size or type, or it goes), and for a free every path resolution (names
/// are removed, as an unlink's).
fn heap_targets(
    heap: &larder_heap::Heap,
    operation: &larder_protocol::message::HeapOperation,
    out: &mut Vec<LeaseTarget>,
    directories: &mut Vec<u64>,
) {
    use larder_protocol::message::HeapOperation as H;
    use LeaseTarget::{Namespace, Object};
    match operation {
        H::Alloc { .. } | H::Copy { .. } | H::Clone { .. } => {
            out.push(Object(heap.objects_dir_id()));
            directories.push(heap.objects_dir_id());
        }
        H::AddName { object, .. } => {
            out.push(Object(heap.names_dir_id()));
            directories.push(heap.names_dir_id());
            out.push(Object(*object));
        }
        H::Free { object } => {
            out.push(Namespace);
            out.push(Object(heap.objects_dir_id()));
            out.push(Object(heap.names_dir_id()));
            directories.extend([heap.objects_dir_id(), heap.names_dir_id()]);
            out.push(Object(*object));
        }
        // A block allocation may grow the object; its size as the fs sees
        // it changes at the heap's next sync, its bytes at once.
        H::Grow { object, .. } | H::AttachType { object, .. } | H::AllocIn { object, .. } => out.push(Object(*object)),
        H::FreeIn { pointer } => out.push(Object(pointer.object)),
        H::Attach { .. }
        | H::Size { .. }
        | H::GetByName { .. }
        | H::Names { .. }
        | H::AllocType { .. }
        | H::TypeOf { .. }
        | H::Check { .. }
        | H::Sync => {}
    }
}
