//! locate on Larder's persistent heap: a path list as one table in one
//! heap object ([`table`]), built by [`write_table`] and searched in place
//! by any process that attaches the object ([`Database`]); the program
//! `larder-locate` is that search as a command, a small binary of its own
//! as plocate and GNU locate are (the benchmark's fresh-process rows run
//! it).

mod database;
mod error;
pub mod table;

pub use database::{search_object, write_table, Database, ReadOptions};
pub use error::{LocateError, TableError};

/// What this crate's functions return.
pub type Result<T> = std::result::Result<T, LocateError>;
