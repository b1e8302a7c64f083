//! The storage every byte goes through ([`larder_io`]): the real file
//! system, or a simulated one that crashes and injects faults on demand,
//! for testing a program's recovery ([`crate::Store::open_with`]).

pub use larder_io::{sim, IoError, RealStorage, SimStorage, Storage, StorageRef};
