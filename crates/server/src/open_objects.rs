//! The file system's open objects, as the KV API over the same store asks
//! about them: a KV delete or replace of a key whose object a client has
//! open through the file system keeps it until that open's last release,
//! as an unlink through the file system does.

use std::sync::Arc;

use larder_fs::{Fs, OpenGates};
use larder_kv::{HeldObjects, OpenObjects};

/// [`OpenObjects`] of a file system.
pub(crate) struct FsOpens(pub(crate) Arc<Fs>);

struct Held<'a>(OpenGates<'a>);

impl OpenObjects for FsOpens {
    fn hold<'a>(&'a self, objects: &[u64]) -> Box<dyn HeldObjects + 'a> {
        Box::new(Held(self.0.hold_open(objects)))
    }
}

impl HeldObjects for Held<'_> {
    fn is_open(&self, object: u64) -> bool {
        self.0.is_open(object)
    }

    fn mark_orphaned(&self, object: u64) {
        self.0.mark_orphaned(object);
    }
}
