//! Larder's persistent shared heap (DESIGN.md, layer 7; docs/heap.md): paper
//! 003's PSHFS made durable. A heap is a directory of the store's
//! namespace; its objects are files `STORE/heap/<id>` mapped into memory
//! (`MAP_SHARED`), named by id in `objects/` and by any number of names in
//! `names/`. Programs keep persistent pointers ([`PPtr`]: object, offset,
//! generation) in objects; types list where those pointers are, so
//! [`Heap::clone`] can deep-copy a graph of objects. Every metadata change
//! is an object-layer transaction; object bytes are durable at
//! [`Heap::sync`].
//!
//! The calls mirror PSHFS: mfdopen [`Heap::open`], mfalloc [`Heap::alloc`],
//! mfdreference [`Heap::pointer`], mfaddname [`Heap::add_name`],
//! mfgetobjbyname [`Heap::get_by_name`], mfgetobj [`Heap::get`], mfnptr
//! [`Heap::nptr`], mfcloseobj [`Heap::close_object`], mffreeobj
//! [`Heap::free`], mfclose [`Heap::close`], mfcopy [`Heap::copy`],
//! mfalloctype [`Heap::alloc_type`], mftypeatt [`Heap::attach_type`],
//! mfclone [`Heap::clone`]; plus [`Heap::grow`], [`Heap::sync`], small
//! blocks inside an object ([`Heap::alloc_in`], [`Heap::free_in`], from
//! the object's allocator in [`arena`]), checked dereference
//! ([`Heap::deref`]: a freed block is [`HeapError::Stale`]) and safe copies
//! [`Heap::read_at`] / [`Heap::write_at`].
#![deny(missing_docs)]

pub mod arena;
mod arena_glue;
mod attach;
mod clone;
mod closed;
mod credentials;
mod deref;
mod error;
mod heap;
mod images;
pub mod limits;
mod names;
mod objects;
mod pointer;
mod sync;
mod types;

pub use credentials::Credentials;
pub use error::{HeapError, Result};
pub use heap::Heap;
pub use pointer::{ObjectId, PPtr, TypeId};
