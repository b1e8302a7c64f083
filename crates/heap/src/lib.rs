//! Larder's persistent shared heap (DESIGN.md layer 7, docs/heap.md): named objects mapped into memory, persistent pointers, allocation inside an object, types and deep clone.
#![deny(missing_docs)]

pub mod arena;
