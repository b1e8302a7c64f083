//! Larder's io layer: every byte the engine reads or writes goes through the
//! [`Storage`] trait defined here.
//!
//! Two backends implement it:
//! - [`RealStorage`]: pread / pwrite / fdatasync / fallocate on the local file system;
//! - [`SimStorage`]: an in-memory simulation for tests that keeps, per file, a
//!   durable image and the writes not yet synced, and on demand "crashes":
//!   drops any subset of unsynced writes, tears writes at 512-byte sectors,
//!   forgets directory operations whose directory was not synced, and injects
//!   faults (EIO, ENOSPC, short writes, lost pages after a failed sync, bit
//!   flips on reads), all driven by a seed so every run replays exactly.
//!
//! [`CheckedStorage`] wraps any backend and latches the first failed sync:
//! after it every mutating call fails with [`IoError::Poisoned`], because the
//! kernel may already have dropped the pages that failed (DESIGN.md, ordering
//! rule 6).
//!
//! The media assumptions that the simulation enforces (DESIGN.md, "On disk"):
//! bytes are durable only after a sync of their file returns; a write in
//! flight at a crash may be torn at any 512-byte sector boundary, its sectors
//! reaching disk in any order; bytes outside a write's range never change; a
//! create, rename or remove is durable only after its directory is synced; a
//! failed sync may have dropped the file's dirty pages while a later sync
//! reports success. One addition: a write over blocks already written (no
//! hole, inside the synced length) that was written back
//! (`File::write_back`, sync_file_range) is durable once a later sync of any
//! file returns, as that sync flushes the device cache (real backend: only
//! where `Storage::shares_flush` says so).
#![deny(missing_docs)]

mod checked;
pub mod codec;
mod direct;
mod error;
mod mapping;
mod priority;
mod rangeset;
mod real;
mod shared;
pub mod sim;
mod storage;
mod write_back;
mod zeros;

pub use checked::CheckedStorage;
pub use error::{IoError, IoResult};
pub use mapping::Mapping;
pub use priority::lowest_thread_priority;
pub use rangeset::RangeSet;
pub use real::RealStorage;
pub use shared::{page_size, FileIdentity, FileStatus, MapAccess, SharedRegion};
pub use sim::SimStorage;
pub use storage::{
    read_exact_at, write_all_at, Directory, DirectoryRef, File, FileRef, Lock, OpenOptions, Storage, StorageRef,
    DIRECT_ALIGN,
};
pub use zeros::{zeros, ZEROS_BYTES};
