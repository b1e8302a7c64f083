//! The file system's open objects, as the store's KV view asks about them:
//! a KV delete or replace of a key whose object is open through
//! [`crate::Store::fs`] keeps the object, as an orphan, until that open's
//! last release, as an unlink through the file system does.

use std::sync::{Arc, OnceLock};

use larder_fs::{Fs, OpenGates};
use larder_kv::{HeldObjects, OpenObjects};

/// [`OpenObjects`] of the store's file system view, which is made on first
/// use: asking makes it (an empty handle table, no I/O), so that no open
/// can begin between the question and the KV change's commit.
pub(crate) struct LazyFsOpens {
    pub(crate) fs: Arc<OnceLock<Arc<Fs>>>,
    pub(crate) objects: Arc<larder_object::Store>,
}

struct Held<'a>(OpenGates<'a>);

impl OpenObjects for LazyFsOpens {
    fn hold<'a>(&'a self, objects: &[u64]) -> Box<dyn HeldObjects + 'a> {
        let fs = self.fs.get_or_init(|| Arc::new(Fs::with_store(self.objects.clone())));
        Box::new(Held(fs.hold_open(objects)))
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
