//! Data blocks in Larder: one Larder store per data directory, in its
//! subdirectory `larder-blocks`, holding each block as one object of the
//! bucket `blocks` under the block's path relative to the data directory
//! (`ab/cd/<hex hash>[.zst]`, the file store's layout).
//!
//! A block is written by one Larder put: its bytes and the record naming
//! it are committed together, synced in one round when `data_fsync` is on
//! (`Durability::Durable`) and within the store's buffered interval when it
//! is off (`Durability::Buffered`; a crash then loses a suffix of recent
//! blocks, never leaves a partial one). Replacing a plain copy by a
//! compressed one, and setting aside a corrupted block, are one atomic
//! batch each (put and delete together) when both paths are in the same
//! store. Larder checks every 4 KiB it reads against a checksum; Garage's
//! own check of the hash (or zstd checksum) stays in the block manager.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use larder_kv::{Durability, Kv, KvBatch, KvError, KvOptions};

use garage_util::error::*;

use crate::block_store::{BlockDirEntry, BlockReadError, BlockStore};

/// The subdirectory of a data directory holding its Larder store.
pub const LARDER_BLOCKS_DIR: &str = "larder-blocks";

/// The bucket holding the blocks in each store.
const BUCKET: &str = "blocks";

/// One Larder store per data directory (module doc).
pub struct LarderBlockStore {
	/// Each data directory and its open store.
	stores: Vec<(PathBuf, Arc<Kv>)>,
}

impl LarderBlockStore {
	/// Opens (creating where missing) the store of every data directory.
	pub fn open(data_dirs: &[PathBuf]) -> Result<Self, Error> {
		let mut stores = Vec::with_capacity(data_dirs.len());
		for data_dir in data_dirs {
			let kv = open_or_create(&data_dir.join(LARDER_BLOCKS_DIR))?;
			stores.push((data_dir.clone(), Arc::new(kv)));
		}
		Ok(Self { stores })
	}

	/// The store holding `path` and the path's key in it.
	fn locate(&self, path: &Path) -> Result<(Arc<Kv>, String), Error> {
		for (data_dir, kv) in self.stores.iter() {
			if let Ok(relative) = path.strip_prefix(data_dir) {
				let key = relative.to_str().ok_or_else(|| {
					Error::Message(format!("block path is not UTF-8: {}", path.display()))
				})?;
				return Ok((kv.clone(), key.to_string()));
			}
		}
		Err(Error::Message(format!(
			"block path {} is in no data directory of the Larder block store",
			path.display()
		)))
	}
}

/// Opens the store in `dir`, or creates it (with its bucket) when `dir`
/// holds none yet.
fn open_or_create(dir: &Path) -> Result<Kv, Error> {
	let holds_files = match std::fs::read_dir(dir) {
		Ok(mut entries) => entries.next().is_some(),
		Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
		Err(e) => return Err(e.into()),
	};
	let kv = if holds_files {
		Kv::open(dir, options()).map_err(|e| larder_error(dir, e))?
	} else {
		std::fs::create_dir_all(dir)?;
		Kv::create(dir, options()).map_err(|e| larder_error(dir, e))?
	};
	let has_bucket = kv
		.buckets()
		.map_err(|e| larder_error(dir, e))?
		.iter()
		.any(|b| b == BUCKET.as_bytes());
	if !has_bucket {
		kv.create_bucket(BUCKET).map_err(|e| larder_error(dir, e))?;
	}
	Ok(kv)
}

/// The store's options: blocks are written whole, in pieces of up to
/// Garage's block size (1 MiB by default), so containers are zero-filled
/// direct (`direct_fill`): no page-cache copy of the zeros, which cost a
/// fresh node more CPU than its blocks' own writes.
fn options() -> KvOptions {
	let mut options = KvOptions::default();
	options.store.space.direct_fill = true;
	options
}

fn larder_error(what: &Path, e: KvError) -> Error {
	Error::Message(format!("Larder block store, {}: {}", what.display(), e))
}

fn durability(sync: bool) -> Durability {
	if sync {
		Durability::Durable
	} else {
		Durability::Buffered
	}
}

/// Runs a blocking Larder call off the async threads.
async fn blocking<T: Send + 'static>(
	f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
	tokio::task::spawn_blocking(f)
		.await
		.map_err(|e| Error::Message(format!("Larder block store task failed: {}", e)))?
}

#[async_trait]
impl BlockStore for LarderBlockStore {
	fn name(&self) -> &'static str {
		"larder"
	}

	async fn exists(&self, path: &Path) -> bool {
		let Ok((kv, key)) = self.locate(path) else {
			return false;
		};
		let path = path.to_path_buf();
		blocking(move || {
			kv.head(BUCKET, &key)
				.map(|h| h.is_some())
				.map_err(|e| larder_error(&path, e))
		})
		.await
		.unwrap_or(false)
	}

	async fn read(&self, path: &Path) -> Result<Vec<u8>, BlockReadError> {
		let (kv, key) = self.locate(path).map_err(BlockReadError::Failed)?;
		let path = path.to_path_buf();
		let read = blocking(move || {
			Ok(match kv.get(BUCKET, &key) {
				Ok(Some(data)) => Ok(data),
				Ok(None) => Err(BlockReadError::Failed(Error::Message(format!(
					"block {} is not in the Larder block store",
					path.display()
				)))),
				Err(e) if e.is_corrupt() => Err(BlockReadError::Corrupted(larder_error(&path, e))),
				Err(e) => Err(BlockReadError::Failed(larder_error(&path, e))),
			})
		})
		.await;
		read.map_err(BlockReadError::Failed)?
	}

	async fn write(
		&self,
		_directory: &Path,
		target: &Path,
		data: Bytes,
		sync: bool,
		replaces: Option<&Path>,
	) -> Result<(), Error> {
		let (kv, key) = self.locate(target)?;
		let replaced = replaces.map(|p| self.locate(p)).transpose()?;
		let target = target.to_path_buf();
		blocking(move || {
			match replaced {
				Some((old_kv, old_key)) if Arc::ptr_eq(&old_kv, &kv) => {
					let mut batch = KvBatch::new();
					batch.put(&key, data.to_vec()).delete(&old_key);
					kv.write_batch(BUCKET, &batch, durability(sync))
						.map_err(|e| larder_error(&target, e))?;
				}
				Some((old_kv, old_key)) => {
					// Another data directory: the new copy is durable (as
					// asked) before the old one goes.
					kv.put(BUCKET, &key, &data, durability(sync))
						.map_err(|e| larder_error(&target, e))?;
					old_kv
						.delete(BUCKET, &old_key, durability(sync))
						.map_err(|e| larder_error(&target, e))?;
				}
				None => {
					kv.put(BUCKET, &key, &data, durability(sync))
						.map_err(|e| larder_error(&target, e))?;
				}
			}
			Ok(())
		})
		.await
	}

	async fn rename(&self, from: &Path, to: &Path) -> Result<(), Error> {
		let (kv, from_key) = self.locate(from)?;
		let (to_kv, to_key) = self.locate(to)?;
		if !Arc::ptr_eq(&kv, &to_kv) {
			return Err(Error::Message(format!(
				"cannot move block {} to another data directory ({})",
				from.display(),
				to.display()
			)));
		}
		let from = from.to_path_buf();
		blocking(move || {
			let data = match kv.get(BUCKET, &from_key) {
				Ok(Some(data)) => data,
				Ok(None) => {
					return Err(Error::Message(format!(
						"block {} is not in the Larder block store",
						from.display()
					)))
				}
				Err(e) if e.is_corrupt() => {
					// Larder returns no damaged bytes, so there are none to
					// keep under the new name: the block goes, and resync
					// fetches it again as for any block set aside.
					warn!(
						"block {} fails Larder's check ({}): removed instead of kept as {}",
						from.display(),
						e,
						to_key
					);
					kv.delete(BUCKET, &from_key, Durability::Durable)
						.map_err(|e| larder_error(&from, e))?;
					return Ok(());
				}
				Err(e) => return Err(larder_error(&from, e)),
			};
			let mut batch = KvBatch::new();
			batch.put(&to_key, data).delete(&from_key);
			kv.write_batch(BUCKET, &batch, Durability::Durable)
				.map_err(|e| larder_error(&from, e))
		})
		.await
	}

	async fn remove(&self, path: &Path) -> Result<(), Error> {
		let (kv, key) = self.locate(path)?;
		let path = path.to_path_buf();
		blocking(move || {
			if kv
				.delete(BUCKET, &key, Durability::Buffered)
				.map_err(|e| larder_error(&path, e))?
			{
				Ok(())
			} else {
				Err(Error::Message(format!(
					"block {} is not in the Larder block store",
					path.display()
				)))
			}
		})
		.await
	}

	async fn list_dir(&self, dir: &Path) -> Result<Vec<BlockDirEntry>, Error> {
		let (kv, relative) = match self.locate(dir) {
			Ok(found) => found,
			Err(_) => return Ok(vec![]),
		};
		let dir = dir.to_path_buf();
		blocking(move || {
			let prefix = if relative.is_empty() {
				String::new()
			} else {
				format!("{}/", relative)
			};
			let mut entries: Vec<BlockDirEntry> = vec![];
			for entry in kv
				.scan_prefix(BUCKET, prefix.as_bytes())
				.map_err(|e| larder_error(&dir, e))?
			{
				let entry = entry.map_err(|e| larder_error(&dir, e))?;
				let Ok(key) = String::from_utf8(entry.key) else {
					continue;
				};
				let rest = &key[prefix.len()..];
				let (name, is_dir) = match rest.split_once('/') {
					Some((level, _)) => (level, true),
					None => (rest, false),
				};
				// Keys come in order, so a level's keys are adjacent.
				if entries.last().is_some_and(|e| e.name == name) {
					continue;
				}
				entries.push(BlockDirEntry {
					name: name.to_string(),
					path: dir.join(name),
					is_dir,
				});
			}
			Ok(entries)
		})
		.await
	}
}

impl Drop for LarderBlockStore {
	fn drop(&mut self) {
		for (data_dir, kv) in self.stores.iter() {
			if let Err(e) = kv.sync() {
				error!(
					"Larder block store in {}: final sync failed: {}",
					data_dir.display(),
					e
				);
			}
		}
	}
}
