//! Human names of objects: `names/` entries, create-if-absent (PSHFS's
//! mfaddname and mfgetobjbyname, without their races: ids are store-issued
//! and a name and its reverse record change in one transaction).

use larder_namespace::{list, NamespaceTxn};
use larder_object::meta::{heap_name_key, Name};
use larder_object::{Durability, LockRequest};

use crate::error::{invalid, not_found, HeapError, Result};
use crate::{Heap, ObjectId};

/// `text` as a name, or why it cannot be one.
fn checked_name(text: &str) -> Result<Name> {
    Name::new(text).map_err(|e| invalid(format!("name {text:?}: {e}")))
}

impl Heap {
    /// Gives `object` the name `name` (1-255 bytes, no NUL or `/`, not `.`
    /// or `..`), if no object has it: of racing callers exactly one wins,
    /// the others get [`HeapError::AlreadyExists`]. An object may have
    /// many names.
    pub fn add_name(&self, object: ObjectId, name: &str) -> Result<()> {
        let id = object.0;
        let name = checked_name(name)?;
        self.check_writable("name an object")?;
        let locks = [
            LockRequest::Exclusive(id),
            LockRequest::Shared(self.shared.names_dir),
            LockRequest::Name(self.shared.names_dir, name.as_bytes().to_vec()),
        ];
        self.shared.store.transact_locked(&locks, Durability::Buffered, |txn| -> Result<()> {
            if txn.heap_object(id)?.filter(|r| r.heap == self.shared.root).is_none() {
                return Err(not_found(format!("object {id}")));
            }
            txn.link_in(self.shared.names_dir, &name, id)?;
            txn.put(&heap_name_key(id, &name), &[]);
            Ok(())
        })?;
        Ok(())
    }

    /// The object named `name`, attached (PSHFS's mfgetobjbyname). Never
    /// a half-made object (a name is given only to a whole one, in one
    /// transaction); racing a free, the object or `NotFound`.
    pub fn get_by_name(&self, name: &str) -> Result<ObjectId> {
        let key = checked_name(name)?;
        let dentry = list::lookup(&self.shared.store, self.shared.names_dir, &key)?
            .ok_or_else(|| not_found(format!("name {name:?}")))?;
        match self.attach(dentry.child) {
            Ok(_) => Ok(ObjectId(dentry.child)),
            // Freed between the lookup and the attach: the name is gone too.
            Err(HeapError::NotFound { .. }) => Err(not_found(format!("name {name:?}"))),
            Err(e) => Err(e),
        }
    }
}
