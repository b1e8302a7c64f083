//! Larder's space layer (DESIGN.md layer 4): where object data lives.
//!
//! Data lives in *containers*: fixed-size files `<id:016x>.ctr`, created
//! ahead of need, filled with zeros once and synced (file, then directory)
//! before any extent points into them, and never resized, so overwriting
//! them changes no file-system metadata (in-file shadowing: new data goes
//! to free blocks, never over live ones).
//!
//! An [`Extent`] is a run of 4 KiB blocks in one container. A buddy
//! allocator per container hands out exactly the blocks asked for,
//! contiguous when it can. A free is *deferred*: the space is reused only
//! once the freeing transaction is durable and no reader that may still
//! see the old extent map remains ([`SpaceManager::free`],
//! [`SpaceManager::set_durable_lsn`], [`SpaceManager::register_reader`]).
//! Released space is punched out of the files ([`SpaceManager::punch_some`])
//! when free space is plentiful, coalesced and rate-limited; allocation
//! prefers space that was never punched.
//!
//! Nothing about free space is stored: [`SpaceManager::open`] rebuilds it
//! as container space minus the extents the object layer's extent map
//! lists, and [`SpaceManager::verify`] compares a live allocator against
//! such a list (fsck). The formats are in format.md, section 12.
#![deny(missing_docs)]

mod buddy;
mod container;
mod deferred;
mod error;
mod extent;
mod manager;
mod options;
mod punch;
mod rebuild;
mod room;
mod state;
mod stats;

pub mod fuzzing;

pub use container::{file_name as container_file_name, parse_file_name as parse_container_file_name};
pub use error::{Result, SpaceError};
pub use extent::{Extent, EXTENT_BYTES};
pub use manager::{ReaderGuard, SpaceManager, ROOM_CHECK_EVERY, ROOM_CHECK_LONGEST, ROOM_CHECK_NEAR};
pub use options::{Options, GROWTH_MAX_BYTES};
pub use rebuild::VerifyReport;
pub use stats::SpaceStats;

/// The allocation unit: every extent offset and length is a multiple.
pub const BLOCK_BYTES: u64 = 4096;
