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
//!
//! One kind of transaction commits buffered even with `metadata_fsync` on:
//! one whose only writes are to tables' Merkle trees (`<table>:merkle_tree`)
//! and removals from their Merkle to-do lists (`<table>:merkle_todo`), which
//! is what Garage's Merkle updater commits, two per table update. Both hold
//! state derived from the table's entries: an entry and its to-do item are
//! written by one durable transaction, and the updater removes the item only
//! after it has folded the entry into the Merkle tree. The log keeps commits
//! in order and a crash loses at most a suffix of them, so a crash can only
//! take the updater back to an earlier point with the to-do items still
//! there, which it then processes again; it never leaves an item removed
//! without its Merkle update. Every later durable commit (the next table
//! write) makes them durable too, and the log's flusher does within its
//! buffered interval. Measured on one node, 1 KiB PutObject: these are two
//! of the three transactions per object, and were two of its 2.6 log syncs.
//!
//! A durable commit made inside `Db::deferring_durability` (a table's
//! update RPC: garage_table's handler opens the scope, see deferred.rs)
//! returns once it is visible, its wait for the disk left to the scope:
//! the handler awaits it before it answers, holding no runtime worker, and
//! one waiter thread per database syncs the log up to the highest position
//! asked of it and answers every wait it covered. Elsewhere a durable
//! commit waits for the log's sync inside tokio's `block_in_place` when it
//! runs on a worker of a multi-threaded runtime (Garage calls its database
//! from async tasks): the worker's other tasks move to another thread
//! meanwhile, so the requests they serve can commit and join the same log
//! sync instead of waiting for this one to end. Garage's runtime has as
//! many workers as cores; waiting in place, two cores allowed at most two
//! commits in flight, and a log sync carried about 1.1 records.
//!
//! The writer lock does not keep durable commits apart (the trees let it
//! go before the wait, docs/trees.md): under 1 KiB PutObject from 8
//! client threads, 1.08-1.14 log syncs per put waiting in place, 0.37-0.40
//! in `block_in_place` (fdatasyncs counted by the kernel's syscall
//! tracepoint; strace slows the node too much for commits to meet).
//!
//! The log forms one group at a time here (`max_groups_in_flight` 1, not
//! the log's default 2): a commit arriving while a sync runs waits for it
//! and joins the next group instead of starting a second sync beside it.
//! Garage's node is short of CPU, not of disk, and each sync costs CPU in
//! the kernel: 0.26-0.30 syncs per 1 KiB put instead of 0.38-0.40, and
//! 2.7-2.8 per 1 MiB put instead of 3.3 (`LARDER_GARAGE_GROUPS_IN_FLIGHT`
//! sets another value; `LARDER_GARAGE_DURABLE_WAIT=block_in_place` defers
//! no wait, `in_place` waits without `block_in_place`; all for
//! measurements).
//!
//! The rule that keeps this safe is the trees' (docs/trees.md): a
//! transaction runs under the writer lock only until its record is ordered
//! in the log and applied, so the next one may read its writes before they
//! are durable; the log makes records durable in order, so a durable
//! commit that built on such writes returns only once they are durable
//! too, and a crash keeps a prefix of the commits. A read outside a
//! transaction may see a commit still waiting for its sync (as with SQLite
//! in the WAL mode Garage runs it in); it builds nothing on it.

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
	let mut options = TreesOptions {
		durability,
		..TreesOptions::default()
	};
	let tuning = Tuning::from_env()?;
	options.store.log.max_groups_in_flight = tuning.groups_in_flight;
	info!("Larder database tuning: {:?}", tuning);
	let trees = Trees::open_dir_with(path, &options)?;
	Ok(LarderDb::init_tuned(trees, durability, tuning.wait))
}

/// How a durable commit waits for the disk (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurableWait {
	/// Inside a deferring scope (`Db::deferring_durability`), on the
	/// database's waiter thread, the caller awaiting it; elsewhere as
	/// [`DurableWait::BlockInPlace`].
	Deferred,
	/// Inside `tokio::task::block_in_place` on a worker of a
	/// multi-threaded runtime, in place elsewhere.
	BlockInPlace,
	/// In place, holding the calling thread (a runtime worker included).
	InPlace,
}

/// The log's groups in flight for Garage (see the module doc).
const GROUPS_IN_FLIGHT: usize = 1;

/// Run-time tuning read from the environment at open, for measurements:
/// `LARDER_GARAGE_GROUPS_IN_FLIGHT` (the log's `max_groups_in_flight`,
/// default [`GROUPS_IN_FLIGHT`]) and `LARDER_GARAGE_DURABLE_WAIT`
/// (`deferred`, the default, `block_in_place` or `in_place`).
#[derive(Debug)]
struct Tuning {
	groups_in_flight: usize,
	wait: DurableWait,
}

impl Tuning {
	fn from_env() -> DbResult<Tuning> {
		let groups = std::env::var("LARDER_GARAGE_GROUPS_IN_FLIGHT").ok();
		let wait = std::env::var("LARDER_GARAGE_DURABLE_WAIT").ok();
		Tuning::parse(groups.as_deref(), wait.as_deref())
	}

	/// The tuning the two variables' values (if set) ask for; a value
	/// that means nothing is refused, so a typo does not pass unnoticed.
	fn parse(groups: Option<&str>, wait: Option<&str>) -> DbResult<Tuning> {
		let groups_in_flight = match groups {
			Some(v) => v.parse::<usize>().ok().filter(|&n| n >= 1).ok_or_else(|| {
				DbError(format!("LARDER_GARAGE_GROUPS_IN_FLIGHT={:?}: not a number >= 1", v).into())
			})?,
			None => GROUPS_IN_FLIGHT,
		};
		let wait = match wait {
			None | Some("deferred") => DurableWait::Deferred,
			Some("block_in_place") => DurableWait::BlockInPlace,
			Some("in_place") => DurableWait::InPlace,
			Some(other) => {
				return Err(DbError(
					format!(
						"LARDER_GARAGE_DURABLE_WAIT={:?}: expected deferred, block_in_place or in_place",
						other
					)
					.into(),
				))
			}
		};
		Ok(Tuning {
			groups_in_flight,
			wait,
		})
	}
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
	wait: DurableWait,
	/// Waits for the disk for deferred durable commits (started with a
	/// durable database whose commits may defer).
	waiter: Option<DurableWaiter>,
	/// The trees opened so far, by the index Garage knows them by (an
	/// `Arc` so a transaction takes them without copying).
	handles: RwLock<Arc<Vec<Handle>>>,
}

/// An open tree and what its name says of it.
#[derive(Clone)]
struct Handle {
	tree: Tree,
	role: Role,
}

/// What a tree holds, for the durability of the commits writing it (see
/// the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
	/// A table's Merkle tree: derived from the table, rebuilt from its
	/// to-do list.
	MerkleTree,
	/// A table's Merkle to-do list: its removals record progress that a
	/// replay of the list redoes.
	MerkleTodo,
	/// Anything else.
	Primary,
}

impl Role {
	fn of(name: &str) -> Role {
		if name.ends_with(":merkle_tree") {
			Role::MerkleTree
		} else if name.ends_with(":merkle_todo") {
			Role::MerkleTodo
		} else {
			Role::Primary
		}
	}
}

impl LarderDb {
	pub fn init(trees: Trees, durability: Durability) -> Db {
		Self::init_tuned(trees, durability, DurableWait::Deferred)
	}

	/// [`LarderDb::init`], durable commits waiting as `wait` says.
	pub fn init_tuned(trees: Trees, durability: Durability, wait: DurableWait) -> Db {
		let waiter = (durability == Durability::Durable && wait == DurableWait::Deferred)
			.then(|| DurableWaiter::start(trees.clone()));
		let s = Self {
			trees,
			durability,
			wait,
			waiter,
			handles: RwLock::new(Arc::new(Vec::new())),
		};
		Db(Arc::new(s))
	}

	fn get_tree(&self, i: usize) -> DbResult<Tree> {
		self.handles
			.read()
			.get(i)
			.map(|h| h.tree.clone())
			.ok_or_else(|| DbError("invalid tree id".into()))
	}

	/// Runs `f` in one write transaction of the configured durability.
	fn write<R>(
		&self,
		f: impl FnOnce(&mut WriteTransaction<'_>) -> Result<R, TreesError>,
	) -> DbResult<R> {
		let mut tx = self.trees.write(self.durability)?;
		let r = f(&mut tx)?;
		self.commit(tx)?;
		Ok(r)
	}

	/// Commits `tx`; a durable commit waits for the disk as `self.wait`
	/// says (see the module doc).
	fn commit(&self, tx: WriteTransaction<'_>) -> Result<(), TreesError> {
		if tx.durability() != Durability::Durable {
			return tx.commit();
		}
		if let Some(waiter) = self.waiter.as_ref().filter(|_| crate::deferred::deferring()) {
			if let Some(lsn) = tx.commit_unsynced()? {
				if self.trees.durable_lsn() < lsn
					&& crate::deferred::owe(waiter.wait(lsn)).is_err()
				{
					// Not reached (a scope is open, checked above); if it
					// were, the commit waits here rather than owe no one.
					self.trees.sync_to(lsn)?;
				}
			}
			return Ok(());
		}
		if self.wait != DurableWait::InPlace && may_block_in_place() {
			tokio::task::block_in_place(|| tx.commit())
		} else {
			tx.commit()
		}
	}
}

/// The thread that waits for the disk for deferred durable commits: each
/// time it wakes it syncs the log up to the highest position asked of it
/// (one sync, or a share of one, for every commit asked meanwhile) and
/// answers every wait it covered.
struct DurableWaiter {
	shared: Arc<WaiterShared>,
	thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct WaiterShared {
	queue: parking_lot::Mutex<WaiterQueue>,
	wake: parking_lot::Condvar,
}

#[derive(Default)]
struct WaiterQueue {
	/// (log position, where its answer goes)
	asked: Vec<(u64, tokio::sync::oneshot::Sender<Result<(), String>>)>,
	closing: bool,
}

impl DurableWaiter {
	fn start(trees: Trees) -> DurableWaiter {
		let shared = Arc::new(WaiterShared::default());
		let thread = {
			let shared = shared.clone();
			std::thread::Builder::new()
				.name("larder-durable".into())
				.spawn(move || Self::run(&trees, &shared))
		};
		match thread {
			Ok(thread) => DurableWaiter {
				shared,
				thread: Some(thread),
			},
			// No thread: every wait asked fails (its queue is closed), and
			// the commits it covers report a database error.
			Err(e) => {
				error!("Larder database: no thread for durable waits: {}", e);
				shared.queue.lock().closing = true;
				DurableWaiter {
					shared,
					thread: None,
				}
			}
		}
	}

	fn run(trees: &Trees, shared: &WaiterShared) {
		loop {
			let asked = {
				let mut queue = shared.queue.lock();
				while queue.asked.is_empty() && !queue.closing {
					shared.wake.wait(&mut queue);
				}
				if queue.asked.is_empty() {
					return;
				}
				std::mem::take(&mut queue.asked)
			};
			let to = asked.iter().map(|(lsn, _)| *lsn).max().unwrap_or(0);
			let synced = trees.sync_to(to).map_err(|e| e.to_string());
			for (_, answer) in asked {
				// A caller that stopped waiting (its request dropped) is
				// no one to tell.
				let _ = answer.send(synced.clone());
			}
		}
	}

	/// A wait that returns once every commit up to `lsn` is durable.
	fn wait(&self, lsn: u64) -> crate::deferred::DurableWait {
		let (answer, answered) = tokio::sync::oneshot::channel();
		{
			let mut queue = self.shared.queue.lock();
			if !queue.closing {
				queue.asked.push((lsn, answer));
			}
		}
		self.shared.wake.notify_one();
		Box::pin(async move {
			match answered.await {
				Ok(Ok(())) => Ok(()),
				Ok(Err(e)) => Err(DbError(format!("Larder: {}", e).into()).into()),
				Err(_) => Err(DbError("Larder: the durable-wait thread stopped".into()).into()),
			}
		})
	}
}

impl Drop for DurableWaiter {
	fn drop(&mut self) {
		self.shared.queue.lock().closing = true;
		self.shared.wake.notify_one();
		if let Some(thread) = self.thread.take() {
			if thread.join().is_err() {
				error!("Larder database: the durable-wait thread panicked");
			}
		}
	}
}

/// Whether `tokio::task::block_in_place` may be called here: on a thread of
/// a multi-threaded runtime (a worker, or one of its blocking threads, where
/// it just runs the closure), not on a current-thread runtime, where it
/// panics. Outside any runtime there is no worker to free.
fn may_block_in_place() -> bool {
	matches!(
		tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()),
		Ok(tokio::runtime::RuntimeFlavor::MultiThread)
	)
}

impl IDb for LarderDb {
	fn engine(&self) -> String {
		"Larder".into()
	}

	fn open_tree(&self, name: &str) -> DbResult<usize> {
		let mut handles = self.handles.write();
		if let Some(i) = handles.iter().position(|h| h.tree.name() == name) {
			Ok(i)
		} else {
			let tree = self.trees.open_tree(name)?;
			let mut more = Vec::clone(&handles);
			more.push(Handle {
				tree,
				role: Role::of(name),
			});
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
			derived_only: true,
		};

		match f.try_on(&mut tx) {
			TxFnResult::Ok(on_commit) => {
				if tx.derived_only {
					tx.tx.set_durability(Durability::Buffered);
				}
				self.commit(tx.tx)
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
	handles: &'a [Handle],
	tx: WriteTransaction<'a>,
	/// Whether every write so far only advanced Merkle state (see the
	/// module doc): the commit may then be buffered.
	derived_only: bool,
}

impl<'a> LarderTx<'a> {
	fn handle(&self, i: usize) -> DbResult<&'a Handle> {
		self.handles.get(i).ok_or_else(|| {
			DbError(
				"invalid tree id (it might have been opened after the transaction started)".into(),
			)
		})
	}

	fn get_tree(&self, i: usize) -> DbResult<&'a Tree> {
		Ok(&self.handle(i)?.tree)
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
		let handle = self.handle(tree)?;
		self.derived_only &= handle.role == Role::MerkleTree;
		Ok(self.tx.insert(&handle.tree, key, value)?)
	}

	fn remove(&mut self, tree: usize, key: &[u8]) -> DbResult<()> {
		let handle = self.handle(tree)?;
		self.derived_only &= handle.role != Role::Primary;
		Ok(self.tx.remove(&handle.tree, key)?)
	}

	fn clear(&mut self, tree: usize) -> DbResult<()> {
		let handle = self.handle(tree)?;
		self.derived_only = false;
		Ok(self.tx.clear(&handle.tree)?)
	}

	fn iter(&self, tree: usize) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx.iter(tree, true)?.map(|r| r.map_err(DbError::from)),
		))
	}

	fn iter_rev(&self, tree: usize) -> DbResult<TxValueIter<'_>> {
		let tree = self.get_tree(tree)?;
		Ok(Box::new(
			self.tx.iter(tree, false)?.map(|r| r.map_err(DbError::from)),
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
		let log = self.trees.store().log_stats();
		info!(
			"Larder database closing: {} log records in {} groups, {} syncs taking {} us on average",
			log.records,
			log.groups,
			log.syncs,
			log.sync_micros.checked_div(log.syncs).unwrap_or(0)
		);
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
			db.open_tree("object:table")
				.unwrap()
				.approximate_len()
				.unwrap(),
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
		db.open_tree("object:table")
			.unwrap()
			.insert(b"later", b"x")
			.unwrap();
		let copy = open(&snapshots, Engine::Larder, true);
		let mut expected = contents(&db);
		expected
			.get_mut("object:table")
			.unwrap()
			.remove(&b"later"[..]);
		assert_eq!(contents(&copy), expected);
	}

	/// A durable Larder database on `dir` without the log's background
	/// flusher, so every log sync counted comes from a commit; and its
	/// trees, for the log's counters.
	fn durable_without_flusher(dir: &std::path::Path) -> (Db, larder_trees::Trees) {
		let mut options = larder_trees::TreesOptions::default();
		options.store.log.buffered_sync_interval = None;
		let trees =
			larder_trees::Trees::open_dir_with(&Engine::Larder.db_path(dir), &options).unwrap();
		let db = super::LarderDb::init(trees.clone(), larder_trees::Durability::Durable);
		(db, trees)
	}

	#[test]
	fn merkle_updater_commits_are_buffered_and_every_other_commit_durable() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let (db, trees) = durable_without_flusher(&dir);
		let table = db.open_tree("object:table").unwrap();
		let todo = db.open_tree("object:merkle_todo").unwrap();
		let merkle = db.open_tree("object:merkle_tree").unwrap();
		let syncs = || trees.store().log_stats().syncs;
		let durable = || trees.store().durable_lsn();

		// (what the transaction writes, whether it must be durable)
		type Writes = fn(
			&mut crate::Transaction<'_>,
			&crate::Tree,
			&crate::Tree,
			&crate::Tree,
		) -> crate::TxOpResult<()>;
		let cases: [(&str, Writes, bool); 6] = [
			(
				"a table update with its to-do item",
				|tx, table, todo, _| {
					tx.insert(table, b"k1", b"v1")?;
					tx.insert(todo, b"k1", b"h1")?;
					Ok(())
				},
				true,
			),
			(
				"the updater's Merkle node writes",
				|tx, _, _, merkle| {
					tx.insert(merkle, b"node", b"n1")?;
					tx.remove(merkle, b"old-node")?;
					Ok(())
				},
				false,
			),
			(
				"the updater's removal of the to-do item",
				|tx, _, todo, _| {
					tx.remove(todo, b"k1")?;
					Ok(())
				},
				false,
			),
			(
				"a to-do item written alone",
				|tx, _, todo, _| {
					tx.insert(todo, b"k2", b"h2")?;
					Ok(())
				},
				true,
			),
			(
				"Merkle nodes with a table write",
				|tx, table, _, merkle| {
					tx.insert(merkle, b"node", b"n2")?;
					tx.remove(table, b"k1")?;
					Ok(())
				},
				true,
			),
			(
				"a cleared Merkle tree",
				|tx, _, _, merkle| {
					tx.clear(merkle)?;
					Ok(())
				},
				true,
			),
		];
		for (what, writes, must_be_durable) in cases {
			let (before_syncs, before_durable) = (syncs(), durable());
			db.transaction::<_, (), _>(|tx| {
				writes(tx, &table, &todo, &merkle)?;
				Ok(())
			})
			.unwrap();
			assert_eq!(
				syncs() > before_syncs,
				must_be_durable,
				"{}: log synced",
				what
			);
			assert_eq!(
				durable() > before_durable,
				must_be_durable,
				"{}: durable",
				what
			);
		}
		// Every commit is visible, the buffered ones included (the to-do
		// item's removal).
		assert_eq!(todo.get(b"k1").unwrap(), None);
		assert_eq!(todo.get(b"k2").unwrap().as_deref(), Some(&b"h2"[..]));
		assert_eq!(table.get(b"k1").unwrap(), None);
		assert!(merkle.is_empty().unwrap());
	}

	/// Durable commits from many tasks of a multi-threaded runtime with
	/// fewer workers than tasks (waiting for the log inside
	/// `block_in_place`), and from a current-thread runtime (waiting in
	/// place): every commit lands and is durable.
	#[test]
	fn durable_commits_from_async_tasks_of_either_runtime() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let (db, trees) = durable_without_flusher(&dir);
		let tree = db.open_tree("object:table").unwrap();
		let before = trees.store().durable_lsn();
		let multi = tokio::runtime::Builder::new_multi_thread()
			.worker_threads(2)
			.build()
			.unwrap();
		multi.block_on(async {
			let tasks: Vec<_> = (0..16u32)
				.map(|t| {
					let (db, tree) = (db.clone(), tree.clone());
					tokio::spawn(async move {
						for i in 0..20u32 {
							db.transaction::<_, (), _>(|tx| {
								tx.insert(&tree, format!("{:02}/{:02}", t, i), vec![t as u8; 100])?;
								Ok(())
							})
							.unwrap();
							tokio::task::yield_now().await;
						}
					})
				})
				.collect();
			for task in tasks {
				task.await.unwrap();
			}
		});
		let current = tokio::runtime::Builder::new_current_thread()
			.build()
			.unwrap();
		current.block_on(async {
			tree.insert(b"from-current-thread", b"x").unwrap();
		});
		assert_eq!(tree.approximate_len().unwrap(), 16 * 20 + 1);
		// Each commit has its own LSN and was durable when it returned.
		assert!(trees.store().durable_lsn() >= before + 16 * 20 + 1);
	}

	/// Durable commits inside a deferring scope return once visible and
	/// are durable once the scope's wait returns; outside one they are
	/// durable on return. Many tasks' waits share the waiter's syncs.
	#[test]
	fn deferred_commits_are_durable_once_awaited() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let (db, trees) = durable_without_flusher(&dir);
		let tree = db.open_tree("object:table").unwrap();
		let runtime = tokio::runtime::Builder::new_multi_thread()
			.worker_threads(2)
			.build()
			.unwrap();

		let before = trees.durable_lsn();
		let ((), owed) = Db::deferring_durability(|| {
			db.transaction::<_, (), _>(|tx| {
				tx.insert(&tree, b"deferred", b"1")?;
				Ok(())
			})
			.unwrap();
			tree.insert(b"deferred-single", b"2").unwrap();
		});
		assert!(!owed.is_empty(), "nothing owed");
		assert_eq!(tree.get(b"deferred").unwrap(), Some(b"1".to_vec()));
		assert_eq!(trees.durable_lsn(), before, "durable before the wait");
		runtime.block_on(owed.wait()).unwrap();
		assert!(trees.durable_lsn() >= before + 2, "not durable after the wait");

		// Outside a scope: durable on return.
		tree.insert(b"outside", b"3").unwrap();
		assert!(trees.durable_lsn() >= before + 3, "not durable on return");

		let syncs = trees.store().log_stats().syncs;
		runtime.block_on(async {
			let tasks: Vec<_> = (0..32u32)
				.map(|t| {
					let (db, tree) = (db.clone(), tree.clone());
					tokio::spawn(async move {
						let ((), owed) = Db::deferring_durability(|| {
							db.transaction::<_, (), _>(|tx| {
								tx.insert(&tree, format!("task/{:02}", t), vec![t as u8; 100])?;
								Ok(())
							})
							.unwrap()
						});
						owed.wait().await.unwrap();
					})
				})
				.collect();
			for task in tasks {
				task.await.unwrap();
			}
		});
		// Each commit is one log record.
		assert!(trees.durable_lsn() >= before + 3 + 32);
		assert_eq!(tree.approximate_len().unwrap(), 3 + 32);
		let synced = trees.store().log_stats().syncs - syncs;
		assert!((1..=32).contains(&synced), "{} syncs for 32 commits", synced);
	}

	#[test]
	fn tuning_defaults_and_refuses_values_that_mean_nothing() {
		use super::{DurableWait, Tuning, GROUPS_IN_FLIGHT};
		let default = Tuning::parse(None, None).unwrap();
		assert_eq!(default.groups_in_flight, GROUPS_IN_FLIGHT);
		assert_eq!(default.wait, DurableWait::Deferred);
		assert_eq!(
			Tuning::parse(None, Some("deferred")).unwrap().wait,
			DurableWait::Deferred
		);
		let set = Tuning::parse(Some("3"), Some("in_place")).unwrap();
		assert_eq!(set.groups_in_flight, 3);
		assert_eq!(set.wait, DurableWait::InPlace);
		assert_eq!(
			Tuning::parse(None, Some("block_in_place")).unwrap().wait,
			DurableWait::BlockInPlace
		);
		for (groups, wait) in [
			(Some("0"), None),
			(Some("two"), None),
			(Some(""), None),
			(None, Some("spin")),
		] {
			assert!(
				Tuning::parse(groups, wait).is_err(),
				"{:?} {:?}",
				groups,
				wait
			);
		}
	}

	/// Durable commits from 8 threads at once with the log forming one
	/// group at a time (the engine's setting for Garage): every commit
	/// lands and is durable when it returns, though it was ordered, and the
	/// next transaction read its writes, before its sync.
	#[test]
	fn concurrent_durable_commits_are_durable_on_return_with_one_group_in_flight() {
		let dir = mktemp::Temp::new_dir().unwrap();
		let mut options = larder_trees::TreesOptions::default();
		options.store.log.buffered_sync_interval = None;
		options.store.log.max_groups_in_flight = super::GROUPS_IN_FLIGHT;
		let trees =
			larder_trees::Trees::open_dir_with(&Engine::Larder.db_path(&dir), &options).unwrap();
		let db = super::LarderDb::init(trees.clone(), larder_trees::Durability::Durable);
		let tree = db.open_tree("object:table").unwrap();
		let (threads, each) = (8u32, 40u32);
		// Every commit below is one log record adding one key, so the one
		// that saw `n` keys has an LSN of at least `base + n + 1`.
		let base = trees.store().durable_lsn();
		std::thread::scope(|s| {
			for t in 0..threads {
				let (db, tree, trees) = (db.clone(), tree.clone(), trees.clone());
				s.spawn(move || {
					for i in 0..each {
						let seen = db
							.transaction::<_, (), _>(|tx| {
								let seen = tx.len(&tree)?;
								tx.insert(&tree, format!("{:02}/{:03}", t, i), vec![t as u8; 100])?;
								Ok(seen as u64)
							})
							.unwrap();
						// Durable on return.
						assert!(trees.store().durable_lsn() >= base + seen + 1);
					}
				});
			}
		});
		assert_eq!(tree.approximate_len().unwrap(), (threads * each) as usize);
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
