//! Persistent pointers and the ids the heap hands out.

use std::marker::PhantomData;

/// A heap object's id: store-issued, never reused, never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct ObjectId(pub u64);

/// A type's id (`alloc_type`): store-issued, never reused, never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct TypeId(pub u64);

/// A persistent pointer: valid in any process, after a reboot, and
/// (rewritten) in a clone's copy, because it holds no address. 24 bytes,
/// `repr(C)`, in the machine's byte order (the heap runs only on
/// little-endian machines, so stored pointers are little-endian). All
/// zeros is the null pointer.
///
/// `generation` is 0 for a pointer to an object's user bytes, and the
/// block's generation for a block from `alloc_in`: dereferencing checks it,
/// so a freed block gives [`crate::HeapError::Stale`], never reused bytes.
#[repr(C)]
pub struct PPtr<T> {
    /// The object.
    pub object: u64,
    /// Byte offset in the object.
    pub offset: u64,
    /// The block's generation, or 0 for user bytes.
    pub generation: u64,
    _type: PhantomData<fn() -> T>,
}

impl<T> PPtr<T> {
    /// The null pointer.
    pub const NULL: PPtr<T> = PPtr::new(0, 0, 0);

    /// A pointer to `offset` in `object` with `generation`.
    pub const fn new(object: u64, offset: u64, generation: u64) -> PPtr<T> {
        PPtr { object, offset, generation, _type: PhantomData }
    }

    /// Whether this is the null pointer.
    pub fn is_null(&self) -> bool {
        self.object == 0 && self.offset == 0 && self.generation == 0
    }

    /// The object pointed into.
    pub fn object_id(&self) -> ObjectId {
        ObjectId(self.object)
    }

    /// The same pointer to another type.
    pub const fn cast<U>(self) -> PPtr<U> {
        PPtr::new(self.object, self.offset, self.generation)
    }

    /// The same pointer with another generation.
    pub const fn with_generation(self, generation: u64) -> PPtr<T> {
        PPtr::new(self.object, self.offset, generation)
    }

    /// The pointer `bytes` further into the same object (same generation).
    pub fn add_bytes(self, bytes: u64) -> Option<PPtr<T>> {
        Some(PPtr::new(self.object, self.offset.checked_add(bytes)?, self.generation))
    }

    /// The pointer's 24 bytes as stored in an object.
    pub fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&self.object.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b
    }

    /// The pointer stored as `bytes`.
    pub fn from_bytes(bytes: &[u8; 24]) -> PPtr<T> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        PPtr::new(word(0), word(8), word(16))
    }
}

// Derives would demand `T: Clone` etc.; a pointer is plain data whatever T is.
impl<T> Clone for PPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PPtr<T> {}
impl<T> PartialEq for PPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.object, self.offset, self.generation) == (other.object, other.offset, other.generation)
    }
}
impl<T> Eq for PPtr<T> {}
impl<T> std::hash::Hash for PPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.object, self.offset, self.generation).hash(state);
    }
}
impl<T> Default for PPtr<T> {
    fn default() -> Self {
        PPtr::NULL
    }
}
impl<T> std::fmt::Debug for PPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PPtr({}:{}@{})", self.object, self.offset, self.generation)
    }
}

const _: () = assert!(std::mem::size_of::<PPtr<u8>>() == 24);
