//! The store: one directory on disk, opened once, reached through the KV
//! and file system views that share it.

use std::path::Path;
use std::sync::Arc;
#[cfg(feature = "fs")]
use std::sync::OnceLock;

use larder_io::StorageRef;
use larder_object::ObjectError;

use crate::error::Result;
use crate::Options;

/// An open store: a directory holding the index, the intent log and the
/// data containers of one Larder store.
///
/// Its views share it: [`Store::kv`] (buckets of keys as paths) and
/// [`Store::fs`] (POSIX files and directories) see the same objects, so a
/// key `a/b` of bucket `photos` is the file `/photos/a/b`. The store takes
/// a lock in its directory: one process has it open at a time.
///
/// [`Store::close`] makes everything durable and closes cleanly; a store
/// dropped without it loses at most the buffered changes of the last
/// [`Options::buffered_sync_interval`], as a crash would, and the next
/// open recovers.
#[derive(Debug)]
pub struct Store {
    objects: Arc<larder_object::Store>,
    #[cfg(feature = "kv")]
    kv: larder_kv::Kv,
    /// Shared with the KV view's question of what the fs has open.
    #[cfg(feature = "fs")]
    fs: Arc<OnceLock<Arc<larder_fs::Fs>>>,
    #[cfg(feature = "trees")]
    trees: OnceLock<larder_trees::Trees>,
}

impl Store {
    /// Opens the store in `dir`, recovering from any crash: every change
    /// acknowledged as durable before the crash is there. When `dir` holds
    /// no store (or does not exist) and
    /// [`Options::create_if_missing`] is on (the default), creates one
    /// there, with [`Options::creation`]'s sizes.
    ///
    /// Fails with [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) when
    /// there is no store and none may be created,
    /// [`ErrorKind::Locked`](crate::ErrorKind::Locked) when another process
    /// has it open, and [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt)
    /// (naming the file) when its files fail their checks or come from a
    /// newer version of Larder.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let dir = tmp.path().join("store");
    /// let store = larder::Store::open(&dir, larder::Options::default())?;
    /// store.close()?;
    /// // Open again: the store is there now.
    /// let store = larder::Store::open(&dir, larder::Options::new().create_if_missing(false))?;
    /// store.close()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Store> {
        Self::open_with(Arc::new(larder_io::RealStorage::new()), dir.as_ref(), options)
    }

    /// Creates a new store in `dir` (which may exist, but must hold no
    /// store: else [`ErrorKind::AlreadyExists`](crate::ErrorKind::AlreadyExists)).
    pub fn create(dir: impl AsRef<Path>, options: Options) -> Result<Store> {
        Self::create_with(Arc::new(larder_io::RealStorage::new()), dir.as_ref(), options)
    }

    /// [`Store::open`] on `storage` (the real file system, or
    /// [`larder::io::SimStorage`](crate::io::SimStorage) to test a program
    /// against crashes and injected faults).
    pub fn open_with(storage: StorageRef, dir: &Path, options: Options) -> Result<Store> {
        match larder_object::Store::open(storage.clone(), dir, options.store_options()) {
            Ok(objects) => Ok(Self::wrap(objects, &options)),
            Err(ObjectError::NotAStore { .. }) if options.creates_if_missing() => {
                match Self::create_with(storage.clone(), dir, options.clone()) {
                    // Another opener created it meanwhile: open that one.
                    Err(crate::Error::Store(ObjectError::AlreadyExists { .. })) => {
                        Ok(Self::wrap(larder_object::Store::open(storage, dir, options.store_options())?, &options))
                    }
                    created => created,
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Store::create`] on `storage`.
    pub fn create_with(storage: StorageRef, dir: &Path, options: Options) -> Result<Store> {
        let creation = options.creation_options(dir)?;
        let objects = larder_object::Store::create(storage, dir, creation, options.store_options())?;
        Ok(Self::wrap(objects, &options))
    }

    fn wrap(objects: larder_object::Store, options: &Options) -> Store {
        let objects = Arc::new(objects);
        #[cfg(not(feature = "kv"))]
        let _ = options;
        #[cfg(feature = "fs")]
        let fs = Arc::new(OnceLock::new());
        #[cfg(feature = "kv")]
        let kv = larder_kv::Kv::with_store(objects.clone(), options.owner_ids());
        // A KV delete of a key whose object the fs view has open keeps the
        // object until the fs's last release of it.
        #[cfg(all(feature = "kv", feature = "fs"))]
        let kv = kv.sharing_opens(Arc::new(crate::open_objects::LazyFsOpens {
            fs: Arc::clone(&fs),
            objects: objects.clone(),
        }));
        Store {
            #[cfg(feature = "kv")]
            kv,
            #[cfg(feature = "fs")]
            fs,
            #[cfg(feature = "trees")]
            trees: OnceLock::new(),
            objects,
        }
    }

    /// The key-value view: buckets of objects whose keys are paths.
    ///
    /// ```
    /// use larder::Durability;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let store = larder::Store::open(tmp.path(), larder::Options::default())?;
    /// let kv = store.kv();
    /// kv.create_bucket("logs")?;
    /// kv.put("logs", "2026/11/26", b"all quiet", Durability::Durable)?;
    /// assert_eq!(kv.get("logs", "2026/11/26")?, Some(b"all quiet".to_vec()));
    /// # store.close()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "kv")]
    pub fn kv(&self) -> &larder_kv::Kv {
        &self.kv
    }

    /// The file system view: files, directories, links and permissions,
    /// called as the kernel calls a file system (on inode numbers, with
    /// the caller's credentials), plus paths. Made on first use; every call
    /// returns the same one (its open handles and rename lock are shared).
    #[cfg(feature = "fs")]
    pub fn fs(&self) -> &Arc<larder_fs::Fs> {
        self.fs.get_or_init(|| Arc::new(larder_fs::Fs::with_store(self.objects.clone())))
    }

    /// The transactional trees of the store: named ordered maps of byte
    /// keys and values, changed by serializable transactions. Opened on
    /// first use (reading the tree catalog); every call returns the same
    /// one, so its write transactions are serialized against each other.
    #[cfg(feature = "trees")]
    pub fn trees(&self) -> Result<&larder_trees::Trees> {
        if let Some(t) = self.trees.get() {
            return Ok(t);
        }
        let opened = larder_trees::Trees::open(self.objects.clone())?;
        // A racing first call may have set it: theirs is kept, ours dropped.
        Ok(self.trees.get_or_init(|| opened))
    }

    /// The object store below the views, for what they do not cover:
    /// objects by id, transactions, health and counters.
    pub fn objects(&self) -> &Arc<larder_object::Store> {
        &self.objects
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        self.objects.dir()
    }

    /// Makes every change so far durable (one log sync): buffered KV
    /// changes and file system changes nobody fsynced included.
    pub fn sync(&self) -> Result<()> {
        Ok(self.objects.sync()?)
    }

    /// Makes everything durable, flushes the index so the next open has
    /// nothing to replay, and stops the background threads. Open file
    /// handles are dropped (files unlinked while open are freed at the next
    /// open). If a clone of [`Store::objects`] or [`Store::fs`] is still
    /// held elsewhere, only makes everything durable; the last holder's
    /// drop then stops the threads.
    pub fn close(self) -> Result<()> {
        #[cfg(feature = "kv")]
        drop(self.kv);
        #[cfg(feature = "fs")]
        drop(self.fs);
        #[cfg(feature = "trees")]
        drop(self.trees);
        let objects = self.objects;
        objects.sync()?;
        match Arc::try_unwrap(objects) {
            Ok(objects) => Ok(objects.close()?),
            Err(_shared) => Ok(()),
        }
    }
}
