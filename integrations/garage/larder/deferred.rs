//! Durable commits whose wait for the disk is taken after the commit, by
//! awaiting, instead of inside it (a Larder addition to `garage_db`).
//!
//! Garage calls its database from async tasks on a runtime with one worker
//! per core. A durable commit that waits for the disk inside the call holds
//! its worker (or hands the worker's other tasks to another thread, as the
//! Larder engine's `block_in_place` does, at the cost of a thread switch
//! each way). Inside [`Db::deferring_durability`] an engine that can may
//! return from a durable commit once it is visible and leave the wait in
//! the returned [`DeferredDurability`], which the caller awaits before it
//! tells anyone the writes are durable (a table's RPC handler, before its
//! answer). Until then the commit is like a buffered one: later
//! transactions read it, and a crash may lose it, together with every
//! commit after it. Engines that wait inside the commit (LMDB, SQLite,
//! fjall) owe nothing, and outside a scope every engine waits as before.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;

use crate::{Db, Result};

/// A wait for the disk owed by a durable commit made inside
/// [`Db::deferring_durability`].
pub(crate) type DurableWait = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

thread_local! {
	/// The waits owed by commits made on this thread inside the innermost
	/// deferring scope; `None` outside every scope.
	static OWED: RefCell<Option<Vec<DurableWait>>> = const { RefCell::new(None) };
}

/// The waits for the disk owed by the durable commits made inside
/// [`Db::deferring_durability`]: the commits are durable once
/// [`DeferredDurability::wait`] returns `Ok`.
#[must_use = "the commits are durable only once `wait` returns"]
pub struct DeferredDurability(Vec<DurableWait>);

impl DeferredDurability {
	/// Whether nothing is owed: every commit of the scope was durable when
	/// it returned (or none was durable).
	pub fn is_empty(&self) -> bool {
		self.0.is_empty()
	}

	/// Returns once every owed commit is durable, or with the first error
	/// of a wait (the commit is then visible but perhaps not durable, as
	/// after a failed durable commit).
	pub async fn wait(self) -> Result<()> {
		for wait in self.0 {
			wait.await?;
		}
		Ok(())
	}
}

impl Db {
	/// Runs `f`; a durable commit it makes on this thread, with any
	/// database, may return once visible and leave its wait for the disk
	/// in the returned [`DeferredDurability`] (see the module doc). A
	/// scope inside another owes its own commits, not the outer's.
	pub fn deferring_durability<R>(f: impl FnOnce() -> R) -> (R, DeferredDurability) {
		/// Puts back the outer scope's state when the scope ends, by
		/// return or by panic.
		struct Restore(Option<Vec<DurableWait>>);
		impl Drop for Restore {
			fn drop(&mut self) {
				let outer = self.0.take();
				OWED.with(|owed| *owed.borrow_mut() = outer);
			}
		}
		let _restore = Restore(OWED.with(|owed| owed.replace(Some(Vec::new()))));
		let result = f();
		let owed = OWED.with(|owed| owed.borrow_mut().take()).unwrap_or_default();
		(result, DeferredDurability(owed))
	}
}

/// Whether a deferring scope is open on this thread: a durable commit may
/// then leave its wait to [`owe`].
pub(crate) fn deferring() -> bool {
	OWED.with(|owed| owed.borrow().is_some())
}

/// Leaves `wait` to the innermost deferring scope on this thread. Outside
/// every scope (which [`deferring`] tells first) it is returned, for the
/// caller to wait itself.
pub(crate) fn owe(wait: DurableWait) -> std::result::Result<(), DurableWait> {
	OWED.with(|owed| match owed.borrow_mut().as_mut() {
		Some(waits) => {
			waits.push(wait);
			Ok(())
		}
		None => Err(wait),
	})
}

#[cfg(test)]
mod tests {
	use super::*;

	fn ready(fail: bool) -> DurableWait {
		Box::pin(async move {
			if fail {
				Err(crate::DbError("disk gone".into()).into())
			} else {
				Ok(())
			}
		})
	}

	/// The output of `f`, which must be ready at its first poll (every
	/// wait here is).
	fn ready_output<F: Future>(f: F) -> F::Output {
		let mut f = std::pin::pin!(f);
		let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
		match f.as_mut().poll(&mut cx) {
			std::task::Poll::Ready(output) => output,
			std::task::Poll::Pending => panic!("not ready at its first poll"),
		}
	}

	#[test]
	fn a_scope_collects_what_is_owed_inside_it_only() {
		assert!(!deferring());
		assert!(owe(ready(false)).is_err(), "owed outside a scope");
		let ((), outer) = Db::deferring_durability(|| {
			assert!(deferring());
			assert!(owe(ready(false)).is_ok());
			let ((), inner) = Db::deferring_durability(|| {
				assert!(owe(ready(true)).is_ok());
			});
			assert_eq!(inner.0.len(), 1, "the inner scope owes its own");
			assert!(ready_output(inner.wait()).is_err(), "a failed wait is reported");
			assert!(deferring(), "the outer scope is back");
		});
		assert!(!deferring());
		assert_eq!(outer.0.len(), 1);
		assert!(ready_output(outer.wait()).is_ok());
	}

	#[test]
	fn a_panic_inside_a_scope_closes_it() {
		let panicked = std::panic::catch_unwind(|| {
			let _unreached = Db::deferring_durability(|| panic!("inside"));
		});
		assert!(panicked.is_err());
		assert!(!deferring());
	}
}
