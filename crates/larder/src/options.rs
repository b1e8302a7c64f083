//! One set of options for every way in: a [`Store`](crate::Store) (its KV
//! and file system views) and a standalone index.

use std::path::{Path, PathBuf};
use std::time::Duration;

use larder_io::Storage;
use larder_object::{CreationOptions, StoreOptions};

use crate::error::Result;

/// How a store is opened or created: memory budgets, how soon buffered
/// changes become durable, whether a missing store is created and with
/// which fixed sizes.
///
/// The named settings cover what most programs tune; [`Options::layers_mut`]
/// reaches every option of every layer for the rest. Defaults:
///
/// | setting | default |
/// | --- | --- |
/// | [`memtable_bytes`](Options::memtable_bytes) | 64 MiB |
/// | [`block_cache_bytes`](Options::block_cache_bytes) | 64 MiB |
/// | [`metadata_cache_bytes`](Options::metadata_cache_bytes) | 64 MiB |
/// | [`buffered_sync_interval`](Options::buffered_sync_interval) | 10 ms |
/// | [`create_if_missing`](Options::create_if_missing) | true |
/// | [`creation`](Options::creation) | fitted to the file system's free space, as `larder init` |
/// | [`owner`](Options::owner) | the process's effective uid and gid |
///
/// ```
/// use std::time::Duration;
///
/// let options = larder::Options::new()
///     .memtable_bytes(8 << 20)
///     .block_cache_bytes(16 << 20)
///     .buffered_sync_interval(Some(Duration::from_millis(50)));
/// assert_eq!(options.layers().index.memtable_size_bytes, 8 << 20);
/// assert_eq!(options.layers().log.buffered_sync_interval, Some(Duration::from_millis(50)));
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    layers: StoreOptions,
    creation: Option<CreationOptions>,
    create_if_missing: bool,
    owner: Option<(u32, u32)>,
}

impl Default for Options {
    fn default() -> Self {
        Options { layers: StoreOptions::default(), creation: None, create_if_missing: true, owner: None }
    }
}

impl Options {
    /// The defaults (see the table above).
    pub fn new() -> Options {
        Options::default()
    }

    /// Size at which the index's memtable is frozen and flushed (bytes).
    /// Up to three memtables are held at once (the active one and two
    /// waiting for their flush), so this times three bounds their memory.
    pub fn memtable_bytes(mut self, bytes: usize) -> Options {
        self.layers.index.memtable_size_bytes = bytes;
        self
    }

    /// Budget of the index's cache of data blocks (bytes).
    pub fn block_cache_bytes(mut self, bytes: usize) -> Options {
        self.layers.index.block_cache_bytes = bytes;
        self
    }

    /// Budget of the metadata caches (bytes): the store's cache of onodes,
    /// names and small objects' bytes, and the index's cache of bloom
    /// filters and block indexes, each this much.
    pub fn metadata_cache_bytes(mut self, bytes: usize) -> Options {
        self.layers.meta_cache_bytes = bytes;
        self.layers.index.metadata_cache_bytes = bytes;
        self
    }

    /// How soon a change committed with
    /// [`Durability::Buffered`](crate::Durability::Buffered) (and every
    /// file system change nobody fsynced) is made durable by a background
    /// thread; `None` runs no such thread, so buffered changes become
    /// durable only at the next durable commit, `sync` or close. A crash
    /// loses at most the buffered changes of this last interval, always the
    /// latest ones. A store used mainly as a file system may take
    /// `larder::fs::FS_BUFFERED_SYNC_INTERVAL` (1 s, as the `larder-fs`
    /// layer does on its own): fewer syncs under a stream of creates.
    pub fn buffered_sync_interval(mut self, interval: Option<Duration>) -> Options {
        self.layers.log.buffered_sync_interval = interval;
        self
    }

    /// Whether opening a directory that holds no store creates one
    /// (default true). With false, opening it fails with
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn create_if_missing(mut self, create: bool) -> Options {
        self.create_if_missing = create;
        self
    }

    /// The sizes fixed when a store is created (container and log segment
    /// sizes, the inline limit); ignored when the store exists. Without
    /// them, a new store gets the defaults fitted to the free space of the
    /// file system it is on, as `larder init` does
    /// ([`CreationOptions::fitted_to`]).
    pub fn creation(mut self, creation: CreationOptions) -> Options {
        self.creation = Some(creation);
        self
    }

    /// The owner (uid, gid) of objects and directory levels the KV API
    /// creates; by default the process's effective ids. (The file system
    /// API takes the caller's credentials on every call instead.)
    pub fn owner(mut self, uid: u32, gid: u32) -> Options {
        self.owner = Some((uid, gid));
        self
    }

    /// Every run-time option of the layers below (index, intent log, space
    /// manager, store), as these settings left them.
    pub fn layers(&self) -> &StoreOptions {
        &self.layers
    }

    /// Every run-time option of the layers below, to change what the named
    /// settings do not cover. Each layer checks its options when the store
    /// opens and refuses bad ones, naming the option.
    pub fn layers_mut(&mut self) -> &mut StoreOptions {
        &mut self.layers
    }

    /// The run-time options of a store opened with these settings.
    pub fn store_options(&self) -> StoreOptions {
        self.layers.clone()
    }

    /// The options of a standalone index ([`crate::index::open`]): the
    /// memtable, cache and other index settings above.
    #[cfg(feature = "index")]
    pub fn index_options(&self) -> larder_index::Options {
        self.layers.index.clone()
    }

    /// The sizes a store created in `dir` gets: those given to
    /// [`Options::creation`], or the defaults fitted to the free space of
    /// the file system holding `dir` (or its nearest existing ancestor).
    pub fn creation_options(&self, dir: &Path) -> Result<CreationOptions> {
        if let Some(creation) = self.creation {
            return Ok(creation);
        }
        let on = existing_ancestor(dir);
        let available = larder_io::RealStorage::new().available_bytes(&on)?;
        Ok(CreationOptions::fitted_to(available))
    }

    /// Whether a missing store is created.
    pub fn creates_if_missing(&self) -> bool {
        self.create_if_missing
    }

    /// The owner of objects the KV API creates (uid, gid).
    pub fn owner_ids(&self) -> (u32, u32) {
        self.owner.unwrap_or_else(|| (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()))
    }
}

/// The nearest existing directory at or above `dir`: the file system a
/// store created in `dir` will be on.
fn existing_ancestor(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute.ancestors().find(|a| a.is_dir()).unwrap_or(Path::new("/")).to_path_buf()
}
