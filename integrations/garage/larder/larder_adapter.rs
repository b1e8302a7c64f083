//! The Larder metadata engine (`db_engine = "larder"`): Garage's trees as
//! Larder's transactional trees (`larder-trees`), one Larder store in
//! `<metadata_dir>/db.larder`.
//!
//! Every write, a single `insert` as much as a transaction, is one Larder
//! write transaction committed through the store's intent log: with
//! `metadata_fsync` on it is durable when it returns (concurrent commits
//! share one log sync); with it off it is visible at once and durable within
//! the log's buffered interval, a crash losing at most the latest commits,
//! never corrupting the store. Write transactions run one at a time (as in
//! LMDB), so they never conflict; reads and iterators see stable snapshots
//! and never wait for writers.

use core::ops::Bound;

use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;

use larder_trees::{Durability, Tree, Trees, TreesError, TreesOptions, WriteTransaction};

use crate::{
	open::{Engine, OpenOpt},
	Db, DbError, DbResult, IDb, ITx, ITxFn, OnCommit, TxError, TxFnResult, TxResult, TxValueIter,
	Value, ValueIter,
};

pub use larder_trees;

// --

pub(crate) fn open_db(path: &Path, opt: &OpenOpt) -> DbResult<Db> {
	info!("Opening Larder database at: {}", path.display());
	let durability = if opt.fsync {
		Durability::Durable
	} else {
		Durability::Buffered
	};
	let options = TreesOptions {
		durability,
		..TreesOptions::default()
	};
	let trees = Trees::open_dir_with(path, &options)?;
	Ok(LarderDb::init(trees, durability))
}

// -- err

impl From<TreesError> for DbError {
	fn from(e: TreesError) -> DbError {
		DbError(format!("Larder: {}", e).into())
	}
}

// -- db

pub struct LarderDb {
	trees: Trees,
	durability: Durability,
	/// The trees opened so far, by the index Garage knows them by (an
	/// `Arc` so a transaction takes them without copying).
	handles: RwLock<Arc<Vec<Tree>>>,
}

impl LarderDb {
	pub fn init(trees: Trees, durability: Durability) -> Db {
		let s = Self {
			trees,
			durability,
			handles: RwLock::new(Arc::new(Vec::new())),
		};
		Db(Arc::new(s))
	}

	fn get_tree(&self, i: usize) -> DbResult<Tree> {
		self.handles
			.read()
			.get(i)
			.cloned()
			.ok_or_else(|| DbError("invalid tree id".into()))
	}

	/// Runs `f` in one write transaction of the configured durability.
	fn write<R>(
		&self,
		f: impl FnOnce(&mut WriteTransaction<'_>) -> Result<R, TreesError>,
	) -> DbResult<R> {
		let mut tx = self.trees.write(self.durability)?;
		let r = f(&mut tx)?;
		tx.commit()?;
		Ok(r)
	}
}

impl IDb for LarderDb {
	fn engine(&self) -> String {
		"Larder".into()
	}

	fn open_tree(&self, name: &str) -> DbResult<usize> {
		let mut handles = self.handles.write();
		if let Some(i) = handles.iter().position(|t| t.name() == name) {
			Ok(i)
		} else {
			let tree = self.trees.open_tree(name)?;
			let mut more = Vec::clone(&handles);
			more.push(tree);
			*handles = Arc::new(more);
			Ok(handles.len() - 1)
		}
	}

	fn list_trees(&self) -> DbResult<Vec<String>> {
		Ok(self.trees.list_trees()?)
	}

	fn snapshot(&self, base_path: &Path) -> DbResult<()> {
		std::fs::create_dir_all(base_path)?;
		let path = Engine::Larder.db_path(base_path);
		self.trees.snapshot(&path)?;
		Ok(())
	}

	// ----

	fn get(&self, tree: usize, key: &[u8]) -> DbResult<Option<Value>> {
		Ok(self.get_tree(tree)?.get(key)?)
	}

	fn approximate_len(&self, tree: usize) -> DbResult<usize> {
		Ok(self.get_tree(tree)?.approximate_len()? as usize)
	}

	fn is_empty(&self, tree: usize) -> DbResult<bool> {
		Ok(self.get_tree(tree)?.is_empty()?)
	}

	fn insert(&self, tree: usize, key: &[u8], value: &[u8]) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		self.write(|tx| tx.insert(&tree, key, value))
	}

	fn remove(&self, tree: usize, key: &[u8]) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		self.write(|tx| tx.remove(&tree, key))
	}

	fn clear(&self, tree: usize) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		self.write(|tx| tx.clear(&tree))
	}

	fn iter(&self, tree: usize) -> DbResult<ValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(tree.iter()?.map(|r| r.map_err(DbError::from))))
	}

	fn iter_rev(&self, tree: usize) -> DbResult<ValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(tree.iter_rev()?.map(|r| r.map_err(DbError::from))))
	}

	fn range<'r>(
		&self,
		tree: usize,
		low: Bound<&'r [u8]>,
		high: Bound<&'r [u8]>,
	) -> DbResult<ValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			tree.range((low, high), true)?
				.map(|r| r.map_err(DbError::from)),
		))
	}

	fn range_rev<'r>(
		&self,
		tree: usize,
		low: Bound<&'r [u8]>,
		high: Bound<&'r [u8]>,
	) -> DbResult<ValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			tree.range((low, high), false)?
				.map(|r| r.map_err(DbError::from)),
		))
	}

	// ----

	fn transaction(&self, f: &dyn ITxFn) -> TxResult<OnCommit, ()> {
		let handles = self.handles.read().clone();
		let tx = self
			.trees
			.write(self.durability)
			.map_err(|e| TxError::Db(DbError::from(e).into()))?;
		let mut tx = LarderTx {
			handles: &handles[..],
			tx,
		};

		match f.try_on(&mut tx) {
			TxFnResult::Ok(on_commit) => {
				tx.tx
					.commit()
					.map_err(|e| TxError::Db(DbError::from(e).into()))?;
				Ok(on_commit)
			}
			TxFnResult::Abort => {
				tx.tx.abort();
				Err(TxError::Abort(()))
			}
			TxFnResult::DbErr => {
				tx.tx.abort();
				Err(TxError::Db(
					DbError("(this message will be discarded)".into()).into(),
				))
			}
		}
	}
}

// ----

struct LarderTx<'a> {
	handles: &'a [Tree],
	tx: WriteTransaction<'a>,
}

impl<'a> LarderTx<'a> {
	fn get_tree(&self, i: usize) -> DbResult<&'a Tree> {
		self.handles.get(i).ok_or_else(|| {
			DbError(
				"invalid tree id (it might have been opened after the transaction started)".into(),
			)
		})
	}
}

impl<'a> ITx for LarderTx<'a> {
	fn get(&self, tree: usize, key: &[u8]) -> DbResult<Option<Value>> {
		let tree = self.get_tree(tree)?;
		Ok(self.tx.get(tree, key)?)
	}

	fn len(&self, tree: usize) -> DbResult<usize> {
		let tree = self.get_tree(tree)?;
		Ok(self.tx.len(tree)? as usize)
	}

	fn insert(&mut self, tree: usize, key: &[u8], value: &[u8]) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		Ok(self.tx.insert(tree, key, value)?)
	}

	fn remove(&mut self, tree: usize, key: &[u8]) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		Ok(self.tx.remove(tree, key)?)
	}

	fn clear(&mut self, tree: usize) -> DbResult<()> {
		let tree = self.get_tree(tree)?;
		Ok(self.tx.clear(tree)?)
	}

	fn iter(&self, tree: usize) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx
				.iter(tree, true)?
				.map(|r| r.map_err(DbError::from)),
		))
	}

	fn iter_rev(&self, tree: usize) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx
				.iter(tree, false)?
				.map(|r| r.map_err(DbError::from)),
		))
	}

	fn range<'r>(
		&self,
		tree: usize,
		low: Bound<&'r [u8]>,
		high: Bound<&'r [u8]>,
	) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx
				.range(tree, (low, high), true)?
				.map(|r| r.map_err(DbError::from)),
		))
	}

	fn range_rev<'r>(
		&self,
		tree: usize,
		low: Bound<&'r [u8]>,
		high: Bound<&'r [u8]>,
	) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx
				.range(tree, (low, high), false)?
				.map(|r| r.map_err(DbError::from)),
		))
	}
}

impl Drop for LarderDb {
	fn drop(&mut self) {
		// Buffered commits reach the disk before the store closes.
		if let Err(e) = self.trees.sync() {
			error!("Larder database: final sync failed: {}", e);
		}
	}
}

#[cfg(test)]
mod tests {
	use std::collections::BTreeMap;

	use crate::{open_db, Db, Engine, OpenOpt};

	type Contents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

	fn contents(db: &Db) -> Contents {
		let mut all = Contents::new();
		for name in db.list_trees().unwrap() {
			let tree = db.open_tree(&name).unwrap();
			let entries = tree
				.iter()
				.unwrap()
				.map(|kv| kv.unwrap())
				.collect::<BTreeMap<_, _>>();
			all.insert(name, entries);
		}
		all
	}

	/// Three trees, about 10 MiB in all (several import chunks each), with
	/// keys over LMDB's 511-byte limit in the Larder-only tree.
	fn fill(db: &Db, long_keys: bool) {
		for (t, name) in ["object:table", "version:merkle_tree", "block_local_rc"]
			.iter()
			.enumerate()
		{
			let tree = db.open_tree(name).unwrap();
			db.transaction::<_, (), _>(|tx| {
				for i in 0..1200u32 {
					let mut key = format!("{}/{:08}", t, i).into_bytes();
					if long_keys && i % 7 == 0 {
						key.extend(std::iter::repeat(b'k').take(1000));
					}
					let value = vec![(i % 251) as u8; 100 + (i as usize * 37) % 6000];
					tx.insert(&tree, key, value)?;
				}
				Ok(())
			})
			.unwrap();
		}
	}

	fn open(dir: &std::path::Path, engine: Engine, fsync: bool) -> Db {
		let opt = OpenOpt {
			fsync,
			..Default::default()
		};
		open_db(&engine.db_path(dir), engine, &opt).unwrap()
	}

	#[test]
	fn reopened_database_holds_every_commit() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let expected = {
			let db = open(&dir, Engine::Larder, false);
			fill(&db, true);
			let tree = db.open_tree("object:table").unwrap();
			tree.remove(format!("0/{:08}", 1)).unwrap();
			tree.insert(b"extra", b"value").unwrap();
			contents(&db)
		};
		assert_eq!(expected.len(), 3);
		assert_eq!(expected["object:table"].len(), 1200);
		let db = open(&dir, Engine::Larder, true);
		assert_eq!(contents(&db), expected);
		assert_eq!(
			db.open_tree("object:table").unwrap().approximate_len().unwrap(),
			1200
		);
	}

	#[test]
	fn snapshot_opens_as_a_database_with_the_same_trees() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let snapshots = mktemp::Temp::new_dir().unwrap();
		let db = open(&dir, Engine::Larder, true);
		fill(&db, true);
		db.snapshot(&snapshots).unwrap();
		// Writes after the snapshot are not in it.
		db.open_tree("object:table").unwrap().insert(b"later", b"x").unwrap();
		let copy = open(&snapshots, Engine::Larder, true);
		let mut expected = contents(&db);
		expected
			.get_mut("object:table")
			.unwrap()
			.remove(&b"later"[..]);
		assert_eq!(contents(&copy), expected);
	}

	#[test]
	#[cfg(all(feature = "lmdb", feature = "sqlite"))]
	fn convert_between_lmdb_larder_and_sqlite_keeps_every_entry() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let lmdb = open(&dir, Engine::Lmdb, false);
		fill(&lmdb, false);
		let expected = contents(&lmdb);

		let larder = open(&dir, Engine::Larder, true);
		larder.import(&lmdb).unwrap();
		assert_eq!(contents(&larder), expected);
		// Importing into a database holding data is refused.
		assert!(larder.import(&lmdb).is_err());

		let sqlite = open(&dir, Engine::Sqlite, false);
		sqlite.import(&larder).unwrap();
		assert_eq!(contents(&sqlite), expected);
	}
}
