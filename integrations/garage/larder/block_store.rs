//! Where a node keeps its data blocks: the interface the block manager,
//! resync, scrub and repair use, and Garage's own file-per-block store.
//!
//! Blocks are named by paths under the data directories, the same for
//! every store: `<data dir>/<hash[0]>/<hash[1]>/<hex hash>` for a plain
//! block, with `.zst` for a compressed one and `.corrupted` appended to one
//! set aside by a failed check. The file store keeps each as that file; the
//! Larder store (`larder_block_store.rs`, feature `larder`) keeps each as an
//! object under that relative key in one Larder store per data directory.
//! Hashing, compression, reference counts, scrub and resync stay in the
//! block manager, above this interface.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use rand::prelude::*;
use tokio::fs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use garage_util::config::Config;
use garage_util::error::*;

/// One entry of a listed block directory.
#[derive(Debug, Clone)]
pub struct BlockDirEntry {
	/// Its name (one path component).
	pub name: String,
	/// Its full path.
	pub path: PathBuf,
	/// Whether it is a directory (else a block).
	pub is_dir: bool,
}

/// Why a stored block could not be read.
#[derive(Debug)]
pub enum BlockReadError {
	/// The store's own check of the stored bytes failed (Larder's checksum
	/// of every 4 KiB it reads): the block is corrupted on this node, as
	/// when its bytes do not match its hash, and the block manager sets it
	/// aside and fetches it again from another node.
	Corrupted(Error),
	/// Any other failure: the block is missing, or the read itself failed.
	Failed(Error),
}

impl From<BlockReadError> for Error {
	fn from(e: BlockReadError) -> Error {
		match e {
			BlockReadError::Corrupted(e) | BlockReadError::Failed(e) => e,
		}
	}
}

impl From<std::io::Error> for BlockReadError {
	fn from(e: std::io::Error) -> BlockReadError {
		BlockReadError::Failed(e.into())
	}
}

/// A place to keep data blocks, addressed by their paths under the data
/// directories (module doc).
#[async_trait]
pub trait BlockStore: Send + Sync {
	/// The store's name in the configuration (`block_store`).
	fn name(&self) -> &'static str;

	/// Whether a block is stored at `path`.
	async fn exists(&self, path: &Path) -> bool;

	/// The stored bytes of the block at `path`. A store that checks what
	/// it reads returns [`BlockReadError::Corrupted`] for damaged bytes,
	/// never the damaged bytes themselves; the file store has no such
	/// check (the block manager's hash check finds its damaged blocks).
	async fn read(&self, path: &Path) -> Result<Vec<u8>, BlockReadError>;

	/// Stores `data` at `target` (in block directory `directory`),
	/// replacing `replaces` if given (another copy of the same block, at a
	/// different path). With `sync`, the block is on disk when this
	/// returns; without, a crash may lose it but never leaves a partial
	/// block at `target`.
	async fn write(
		&self,
		directory: &Path,
		target: &Path,
		data: Bytes,
		sync: bool,
		replaces: Option<&Path>,
	) -> Result<(), Error>;

	/// Moves the block at `from` to `to` (used to set aside a corrupted
	/// block). A store that cannot read the damaged bytes back (their
	/// check fails) removes the block at `from` instead: either way no
	/// block is left at `from`.
	async fn rename(&self, from: &Path, to: &Path) -> Result<(), Error>;

	/// Removes the block at `path`.
	async fn remove(&self, path: &Path) -> Result<(), Error>;

	/// The entries of block directory `dir` (a data directory or one of its
	/// hash-named subdirectories), in no particular order.
	async fn list_dir(&self, dir: &Path) -> Result<Vec<BlockDirEntry>, Error>;
}

/// Opens the store the configuration's `block_store` names.
pub fn open_block_store(config: &Config, data_dirs: &[PathBuf]) -> Result<Arc<dyn BlockStore>, Error> {
	match config.block_store.as_str() {
		"file" | "" => Ok(Arc::new(FileBlockStore)),
		"discard" => {
			warn!("block_store = \"discard\": data blocks are not kept (a benchmark's ceiling, never for data)");
			Ok(Arc::new(DiscardBlockStore::default()))
		}
		"raw" => {
			warn!("block_store = \"raw\": data blocks are written and not kept (a benchmark's ceiling, never for data)");
			Ok(Arc::new(RawBlockStore::open(data_dirs)?))
		}
		#[cfg(feature = "larder")]
		"larder" => Ok(Arc::new(crate::larder_block_store::LarderBlockStore::open(
			data_dirs,
		)?)),
		#[cfg(not(feature = "larder"))]
		"larder" => {
			let _ = data_dirs;
			Err(Error::Message(
				"block_store = \"larder\" needs a Garage built with the `larder` feature".into(),
			))
		}
		other => Err(Error::Message(format!(
			"invalid block_store: {} (options are: file, larder, discard, raw)",
			other
		))),
	}
}

/// Garage's own store: one file per block, written to a temporary file,
/// synced, renamed into place and its directory synced.
pub struct FileBlockStore;

#[async_trait]
impl BlockStore for FileBlockStore {
	fn name(&self) -> &'static str {
		"file"
	}

	async fn exists(&self, path: &Path) -> bool {
		fs::metadata(path).await.is_ok()
	}

	async fn read(&self, path: &Path) -> Result<Vec<u8>, BlockReadError> {
		let mut f = fs::File::open(path).await?;
		let mut data = vec![];
		f.read_to_end(&mut data).await?;
		Ok(data)
	}

	async fn write(
		&self,
		directory: &Path,
		target: &Path,
		data: Bytes,
		sync: bool,
		replaces: Option<&Path>,
	) -> Result<(), Error> {
		let mut path_tmp = target.to_path_buf();
		let tmp_extension = format!("tmp{}", hex::encode(rand::rng().random::<[u8; 4]>()));
		path_tmp.set_extension(tmp_extension);

		fs::create_dir_all(directory).await?;

		let mut delete_on_drop = DeleteOnDrop(Some(path_tmp.clone()));

		let mut f = fs::File::create(&path_tmp).await?;
		f.write_all(&data).await?;
		f.flush().await?;

		if sync {
			f.sync_all().await?;
		}

		drop(f);

		fs::rename(path_tmp, target).await?;

		delete_on_drop.cancel();

		if let Some(to_delete) = replaces {
			fs::remove_file(to_delete).await?;
		}

		if sync {
			// We want to ensure that when this function returns, data is properly persisted
			// to disk. The first step is the sync_all above that does an fsync on the data file.
			// Now, we do an fsync on the containing directory, to ensure that the rename
			// is persisted properly. See:
			// http://thedjbway.b0llix.net/qmail/syncdir.html
			let dir = fs::OpenOptions::new()
				.read(true)
				.mode(0)
				.open(directory)
				.await?;
			dir.sync_all().await?;
			drop(dir);
		}

		Ok(())
	}

	async fn rename(&self, from: &Path, to: &Path) -> Result<(), Error> {
		fs::rename(from, to).await?;
		Ok(())
	}

	async fn remove(&self, path: &Path) -> Result<(), Error> {
		fs::remove_file(path).await?;
		Ok(())
	}

	async fn list_dir(&self, dir: &Path) -> Result<Vec<BlockDirEntry>, Error> {
		let mut entries = vec![];
		let mut reader = fs::read_dir(dir).await?;
		while let Some(ent) = reader.next_entry().await? {
			let name = if let Ok(n) = ent.file_name().into_string() {
				n
			} else {
				continue;
			};
			let ft = ent.file_type().await?;
			if ft.is_dir() || ft.is_file() {
				entries.push(BlockDirEntry {
					name,
					path: ent.path(),
					is_dir: ft.is_dir(),
				});
			}
		}
		Ok(entries)
	}
}

/// A store that keeps the names of the blocks written to it and none of
/// their bytes: what a PutObject costs Garage when storing its block costs
/// nothing, the ceiling a block store is measured against (bench.sh).
/// Reads fail. Never for data: the configuration's warning says so.
#[derive(Default)]
pub struct DiscardBlockStore {
	/// Written and not removed, so the block manager and its resync see
	/// the blocks as present (else they would fetch them from other nodes).
	names: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
}

impl DiscardBlockStore {
	fn names(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<PathBuf>> {
		// The set stays whole if a holder panicked: each use is one call.
		self.names.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}
}

#[async_trait]
impl BlockStore for DiscardBlockStore {
	fn name(&self) -> &'static str {
		"discard"
	}

	async fn exists(&self, path: &Path) -> bool {
		self.names().contains(path)
	}

	async fn read(&self, path: &Path) -> Result<Vec<u8>, BlockReadError> {
		Err(unreadable(self.name(), path))
	}

	async fn write(
		&self,
		_directory: &Path,
		target: &Path,
		_data: Bytes,
		_sync: bool,
		replaces: Option<&Path>,
	) -> Result<(), Error> {
		let mut names = self.names();
		if let Some(old) = replaces {
			names.remove(old);
		}
		names.insert(target.to_path_buf());
		Ok(())
	}

	async fn rename(&self, from: &Path, to: &Path) -> Result<(), Error> {
		let mut names = self.names();
		if !names.remove(from) {
			return Err(not_kept(from));
		}
		names.insert(to.to_path_buf());
		Ok(())
	}

	async fn remove(&self, path: &Path) -> Result<(), Error> {
		if !self.names().remove(path) {
			return Err(not_kept(path));
		}
		Ok(())
	}

	async fn list_dir(&self, dir: &Path) -> Result<Vec<BlockDirEntry>, Error> {
		// Each kept name under `dir` gives its first component below it:
		// the block itself, or the hash-named directory it sits in.
		let mut entries = std::collections::BTreeMap::new();
		for path in self.names().iter() {
			let Ok(below) = path.strip_prefix(dir) else {
				continue;
			};
			let mut components = below.components();
			let Some(first) = components.next() else {
				continue;
			};
			let Some(name) = first.as_os_str().to_str() else {
				continue;
			};
			let is_dir = components.next().is_some();
			entries.entry(name.to_string()).or_insert(is_dir);
		}
		Ok(entries
			.into_iter()
			.map(|(name, is_dir)| BlockDirEntry {
				path: dir.join(&name),
				name,
				is_dir,
			})
			.collect())
	}
}

/// Bytes of one slot of the raw store's file: a block of Garage's default
/// size (1 MiB), compressed or not, fits.
pub const RAW_SLOT_BYTES: u64 = 2 << 20;

/// Slots of the raw store's file (256 MiB): more than the blocks in
/// flight at once, so concurrent writes never share a slot.
pub const RAW_SLOTS: u64 = 128;

/// The name of the raw store's file in the first data directory.
pub const RAW_FILE_NAME: &str = "raw-ceiling.bin";

/// A store that writes each block's bytes the cheapest way a durable write
/// can be made, an overwrite of an already-written file followed by an
/// fdatasync (no allocation, no name, no file-system metadata), into the
/// next slot of a ring in one file, and keeps only the blocks' names, as
/// the discard store does: reads fail. What a PutObject costs Garage when
/// storing its block costs only the disk's write and flush: the physical
/// ceiling a block store is measured against (bench.sh), as the objects
/// benchmark's overwrite+fdatasync is Larder's. Never for data: the
/// configuration's warning says so, and each write overwrites an older
/// block's bytes.
pub struct RawBlockStore {
	names: DiscardBlockStore,
	file: Arc<std::fs::File>,
	next: std::sync::atomic::AtomicU64,
}

impl RawBlockStore {
	/// Opens the store's file in the first of `data_dirs`, written whole
	/// (zeros) and synced, so every later write is an overwrite.
	pub fn open(data_dirs: &[PathBuf]) -> Result<RawBlockStore, Error> {
		let dir = data_dirs
			.first()
			.ok_or_else(|| Error::Message("block_store = \"raw\" needs a data directory".into()))?;
		std::fs::create_dir_all(dir)?;
		let path = dir.join(RAW_FILE_NAME);
		let file = std::fs::OpenOptions::new()
			.read(true)
			.write(true)
			.create(true)
			.truncate(false)
			.open(&path)?;
		let zeros = vec![0u8; RAW_SLOT_BYTES as usize];
		for slot in 0..RAW_SLOTS {
			std::os::unix::fs::FileExt::write_all_at(&file, &zeros, slot * RAW_SLOT_BYTES)?;
		}
		file.sync_all()?;
		Ok(RawBlockStore {
			names: DiscardBlockStore::default(),
			file: Arc::new(file),
			next: std::sync::atomic::AtomicU64::new(0),
		})
	}
}

#[async_trait]
impl BlockStore for RawBlockStore {
	fn name(&self) -> &'static str {
		"raw"
	}

	async fn exists(&self, path: &Path) -> bool {
		self.names.exists(path).await
	}

	async fn read(&self, path: &Path) -> Result<Vec<u8>, BlockReadError> {
		Err(unreadable(self.name(), path))
	}

	async fn write(
		&self,
		directory: &Path,
		target: &Path,
		data: Bytes,
		sync: bool,
		replaces: Option<&Path>,
	) -> Result<(), Error> {
		if data.len() as u64 > RAW_SLOT_BYTES {
			return Err(Error::Message(format!(
				"block_store = \"raw\": {} is {} bytes, more than a slot's {}",
				target.display(),
				data.len(),
				RAW_SLOT_BYTES
			)));
		}
		let slot = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % RAW_SLOTS;
		let file = Arc::clone(&self.file);
		tokio::task::spawn_blocking(move || {
			std::os::unix::fs::FileExt::write_all_at(&*file, &data, slot * RAW_SLOT_BYTES)?;
			if sync {
				file.sync_data()?;
			}
			Ok::<(), std::io::Error>(())
		})
		.await
		.map_err(|e| Error::Message(format!("block_store = \"raw\": the write's task failed: {}", e)))??;
		self.names.write(directory, target, Bytes::new(), sync, replaces).await
	}

	async fn rename(&self, from: &Path, to: &Path) -> Result<(), Error> {
		self.names.rename(from, to).await
	}

	async fn remove(&self, path: &Path) -> Result<(), Error> {
		self.names.remove(path).await
	}

	async fn list_dir(&self, dir: &Path) -> Result<Vec<BlockDirEntry>, Error> {
		self.names.list_dir(dir).await
	}
}

/// The error of a read from a store that keeps no bytes (discard, raw).
fn unreadable(store: &str, path: &Path) -> BlockReadError {
	BlockReadError::Failed(Error::Message(format!(
		"block_store = \"{}\" keeps no bytes: {} cannot be read",
		store,
		path.display()
	)))
}

/// The error of a rename or removal of a block the discard store never
/// had, as the file store's is for a missing file.
fn not_kept(path: &Path) -> Error {
	Error::from(std::io::Error::new(
		std::io::ErrorKind::NotFound,
		format!("no block at {}", path.display()),
	))
}

struct DeleteOnDrop(Option<PathBuf>);

impl DeleteOnDrop {
	fn cancel(&mut self) {
		drop(self.0.take());
	}
}

impl Drop for DeleteOnDrop {
	fn drop(&mut self) {
		if let Some(path) = self.0.take() {
			tokio::spawn(async move {
				if let Err(e) = fs::remove_file(&path).await {
					debug!("DeleteOnDrop failed for {}: {}", path.display(), e);
				}
			});
		}
	}
}
