//! Dereferencing persistent pointers: object, bounds, alignment and
//! generation checked before an address is handed out.

use crate::error::{HeapError, Result};
use crate::{Heap, PPtr};

impl Heap {
    /// The address `pointer` names in this process, attaching its object if
    /// needed. Checks that it is not null, that a whole `T` at its offset
    /// lies inside the object and is aligned for `T`, and its generation:
    /// 0 for user bytes, else the live generation of an `alloc_in` block
    /// (a freed block gives [`HeapError::Stale`]). Valid as
    /// [`Heap::pointer`]'s address is; writable only if the object is
    /// mapped writable.
    pub fn deref<T>(&self, pointer: PPtr<T>) -> Result<*mut T> {
        let bad = |reason: &str| HeapError::BadPointer {
            object: pointer.object,
            offset: pointer.offset,
            reason: reason.to_string(),
        };
        if pointer.is_null() {
            return Err(bad("null"));
        }
        let attached = self.attach(pointer.object)?;
        let len = std::mem::size_of::<T>() as u64;
        attached.check(pointer.offset, len)?;
        if !pointer.offset.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(bad("misaligned for its type"));
        }
        self.check_generation(pointer.object, pointer.offset, len, pointer.generation)?;
        let base = attached.base();
        #[allow(unsafe_code)]
        // SAFETY: `offset + size_of::<T>()` is inside the object (checked),
        // so the result stays inside the mapping `base` starts.
        let address = unsafe { base.add(pointer.offset as usize) };
        Ok(address.cast::<T>())
    }

    /// Checks a pointer's generation against the object's allocator: 0 is
    /// user bytes (not inside a span the allocator claimed); any other is a
    /// block the allocator handed out and has not taken back.
    pub(crate) fn check_generation(&self, object: u64, offset: u64, len: u64, generation: u64) -> Result<()> {
        let stale = HeapError::Stale { object, offset, generation };
        match self.arena_check(object, offset, len, generation)? {
            crate::arena_glue::Check::Live => Ok(()),
            crate::arena_glue::Check::Stale => Err(stale),
        }
    }
}
