//! The block-store contract, checked against every store: what the block
//! manager, scrub and repair rely on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::block_store::{
	BlockStore, DiscardBlockStore, FileBlockStore, RawBlockStore, RAW_FILE_NAME, RAW_SLOTS, RAW_SLOT_BYTES,
};

/// A block's path as the block manager names it.
fn block_path(data_dir: &Path, hash: &[u8; 32], extension: &str) -> (PathBuf, PathBuf) {
	let directory = data_dir
		.join(hex::encode(&hash[0..1]))
		.join(hex::encode(&hash[1..2]));
	let mut path = directory.join(hex::encode(hash));
	if !extension.is_empty() {
		path.set_extension(extension);
	}
	(directory, path)
}

fn hash(i: u8) -> [u8; 32] {
	let mut h = [0u8; 32];
	h[0] = i % 3;
	h[1] = i;
	h[31] = i;
	h
}

async fn contract(store: &dyn BlockStore, data_dir: &Path) {
	// Nothing stored yet.
	let (dir0, plain0) = block_path(data_dir, &hash(0), "");
	assert!(!store.exists(&plain0).await);
	assert!(store.read(&plain0).await.is_err());

	// Writes are read back, durable or not.
	let mut written = BTreeSet::new();
	for i in 0..20u8 {
		let (dir, path) = block_path(data_dir, &hash(i), "");
		let data = Bytes::from(vec![i; 1000 + 70_000 * (i as usize % 3)]);
		store.write(&dir, &path, data.clone(), i % 2 == 0, None).await.unwrap();
		assert!(store.exists(&path).await);
		assert_eq!(store.read(&path).await.unwrap(), data.to_vec());
		written.insert(path);
	}

	// A compressed copy replaces the plain one.
	let (_, zst0) = block_path(data_dir, &hash(0), "zst");
	store
		.write(&dir0, &zst0, Bytes::from_static(b"compressed"), true, Some(&plain0))
		.await
		.unwrap();
	assert!(!store.exists(&plain0).await);
	assert_eq!(store.read(&zst0).await.unwrap(), b"compressed".to_vec());
	written.remove(&plain0);
	written.insert(zst0.clone());

	// A corrupted block is set aside under another name.
	let (_, plain1) = block_path(data_dir, &hash(1), "");
	let mut corrupted1 = plain1.clone();
	corrupted1.set_extension("corrupted");
	store.rename(&plain1, &corrupted1).await.unwrap();
	assert!(!store.exists(&plain1).await);
	assert_eq!(store.read(&corrupted1).await.unwrap(), vec![1u8; 70_000 + 1000]);
	written.remove(&plain1);
	written.insert(corrupted1);

	// Removal.
	let (_, plain2) = block_path(data_dir, &hash(2), "");
	store.remove(&plain2).await.unwrap();
	assert!(!store.exists(&plain2).await);
	assert!(store.remove(&plain2).await.is_err());
	written.remove(&plain2);

	// Listing: walking the hash directories finds exactly the blocks.
	assert_eq!(listed_blocks(store, data_dir).await, written);
}

/// The blocks found by walking the hash directories under `data_dir`, as
/// scrub and repair walk them.
async fn listed_blocks(store: &dyn BlockStore, data_dir: &Path) -> BTreeSet<PathBuf> {
	let mut found = BTreeSet::new();
	let mut todo = vec![data_dir.to_path_buf()];
	while let Some(dir) = todo.pop() {
		for entry in store.list_dir(&dir).await.unwrap() {
			assert_eq!(entry.path, dir.join(&entry.name));
			if entry.is_dir {
				if hex::decode(&entry.name).is_ok() {
					todo.push(entry.path);
				}
			} else if entry.name.len() >= 64 && hex::decode(&entry.name[..64]).is_ok() {
				found.insert(entry.path);
			}
		}
	}
	found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_keeps_the_contract() {
	let tmp = mktemp::Temp::new_dir().unwrap();
	contract(&FileBlockStore, tmp.as_path()).await;
}

/// The discard store keeps names, not bytes: everything but reading back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_store_keeps_names_and_no_bytes() {
	let store = DiscardBlockStore::default();
	let data_dir = Path::new("/nowhere/data");
	let mut written = BTreeSet::new();
	for i in 0..20u8 {
		let (dir, path) = block_path(data_dir, &hash(i), "");
		store.write(&dir, &path, Bytes::from(vec![i; 1000]), true, None).await.unwrap();
		assert!(store.exists(&path).await);
		assert!(store.read(&path).await.is_err());
		written.insert(path);
	}
	let (dir0, plain0) = block_path(data_dir, &hash(0), "");
	let (_, zst0) = block_path(data_dir, &hash(0), "zst");
	store.write(&dir0, &zst0, Bytes::new(), true, Some(&plain0)).await.unwrap();
	assert!(!store.exists(&plain0).await);
	written.remove(&plain0);
	written.insert(zst0);
	let (_, plain1) = block_path(data_dir, &hash(1), "");
	let corrupted1 = plain1.with_extension("corrupted");
	store.rename(&plain1, &corrupted1).await.unwrap();
	assert!(store.rename(&plain1, &corrupted1).await.is_err());
	written.remove(&plain1);
	written.insert(corrupted1);
	let (_, plain2) = block_path(data_dir, &hash(2), "");
	store.remove(&plain2).await.unwrap();
	assert!(store.remove(&plain2).await.is_err());
	written.remove(&plain2);

	assert_eq!(listed_blocks(&store, data_dir).await, written);
}

/// The raw store writes every block's bytes into its file's next slot and
/// keeps only the names: reads fail, listings are the discard store's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_store_writes_bytes_and_keeps_names() {
	let tmp = mktemp::Temp::new_dir().unwrap();
	let data_dir = tmp.as_path().join("data");
	let store = RawBlockStore::open(&[data_dir.clone()]).unwrap();
	let file = data_dir.join(RAW_FILE_NAME);
	assert_eq!(std::fs::metadata(&file).unwrap().len(), RAW_SLOTS * RAW_SLOT_BYTES);
	let mut written = BTreeSet::new();
	for i in 0..3u8 {
		let (dir, path) = block_path(&data_dir, &hash(i), "");
		store.write(&dir, &path, Bytes::from(vec![i + 1; 5000]), true, None).await.unwrap();
		assert!(store.exists(&path).await);
		assert!(store.read(&path).await.is_err());
		written.insert(path);
	}
	let bytes = std::fs::read(&file).unwrap();
	for i in 0..3u8 {
		let slot = &bytes[(i as u64 * RAW_SLOT_BYTES) as usize..][..5000];
		assert!(slot.iter().all(|&b| b == i + 1), "slot {} holds block {}", i, i);
	}
	let (dir, too_big) = block_path(&data_dir, &hash(9), "");
	let big = Bytes::from(vec![0u8; RAW_SLOT_BYTES as usize + 1]);
	assert!(store.write(&dir, &too_big, big, true, None).await.is_err());
	assert!(!store.exists(&too_big).await);
	assert_eq!(listed_blocks(&store, &data_dir).await, written);
}

#[cfg(feature = "larder")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn larder_store_keeps_the_contract() {
	use crate::larder_block_store::LarderBlockStore;

	let tmp = mktemp::Temp::new_dir().unwrap();
	let data_dir = tmp.as_path().to_path_buf();
	{
		let store = LarderBlockStore::open(std::slice::from_ref(&data_dir)).unwrap();
		contract(&store, &data_dir).await;
	}
	// Reopened, the store holds what was written (the durable writes and,
	// after a clean close, the buffered ones).
	let store = LarderBlockStore::open(std::slice::from_ref(&data_dir)).unwrap();
	let (_, path) = block_path(&data_dir, &hash(3), "");
	assert_eq!(store.read(&path).await.unwrap(), vec![3u8; 1000]);
	let (_, path) = block_path(&data_dir, &hash(5), "");
	assert_eq!(store.read(&path).await.unwrap(), vec![5u8; 1000 + 140_000]);
	// A path outside the data directories is refused, not guessed at.
	assert!(store.read(Path::new("/elsewhere/ab/cd/x")).await.is_err());
}

/// Flips one byte of every copy of `needle` in the files under `dir`;
/// returns how many copies it damaged.
#[cfg(feature = "larder")]
fn damage_every_copy(dir: &Path, needle: &[u8]) -> usize {
	let mut damaged = 0;
	let mut todo = vec![dir.to_path_buf()];
	while let Some(dir) = todo.pop() {
		for entry in std::fs::read_dir(&dir).unwrap() {
			let path = entry.unwrap().path();
			if path.is_dir() {
				todo.push(path);
				continue;
			}
			let mut bytes = std::fs::read(&path).unwrap();
			let mut changed = false;
			let mut at = 0;
			while let Some(found) = bytes[at..]
				.windows(needle.len())
				.position(|window| window == needle)
			{
				bytes[at + found] ^= 0xff;
				at += found + needle.len();
				changed = true;
				damaged += 1;
			}
			if changed {
				std::fs::write(&path, &bytes).unwrap();
			}
		}
	}
	damaged
}

#[cfg(feature = "larder")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn larder_store_reports_damaged_bytes_as_corrupted() {
	use crate::block_store::BlockReadError;
	use crate::larder_block_store::LarderBlockStore;
	use rand::RngCore;

	let tmp = mktemp::Temp::new_dir().unwrap();
	let data_dir = tmp.as_path().to_path_buf();
	let mut damaged_block = vec![0u8; 300_000];
	rand::rng().fill_bytes(&mut damaged_block);
	let (dir, damaged) = block_path(&data_dir, &hash(7), "");
	let (other_dir, other) = block_path(&data_dir, &hash(8), "");
	{
		let store = LarderBlockStore::open(std::slice::from_ref(&data_dir)).unwrap();
		let data = Bytes::from(damaged_block.clone());
		store.write(&dir, &damaged, data, true, None).await.unwrap();
		let data = Bytes::from(vec![8u8; 300_000]);
		store.write(&other_dir, &other, data, true, None).await.unwrap();
	}
	// One byte inside the block's bytes, wherever the store keeps them.
	let needle = &damaged_block[150_000..150_064];
	assert!(damage_every_copy(&data_dir, needle) >= 1);

	let store = LarderBlockStore::open(std::slice::from_ref(&data_dir)).unwrap();
	assert!(store.exists(&damaged).await);
	match store.read(&damaged).await {
		Err(BlockReadError::Corrupted(_)) => (),
		other => panic!("a damaged block reads as {:?}", other.map(|d| d.len())),
	}
	// Setting it aside leaves no block at its path; the other block is intact.
	let mut set_aside = damaged.clone();
	set_aside.set_extension("corrupted");
	store.rename(&damaged, &set_aside).await.unwrap();
	assert!(!store.exists(&damaged).await);
	assert_eq!(store.read(&other).await.unwrap(), vec![8u8; 300_000]);
	// Resync writes a good copy at the same path again.
	let data = Bytes::from(damaged_block.clone());
	store.write(&dir, &damaged, data, true, None).await.unwrap();
	assert_eq!(store.read(&damaged).await.unwrap(), damaged_block);
}
