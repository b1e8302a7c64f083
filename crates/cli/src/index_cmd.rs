//! `larder index ...`: put, get, delete, scan and stats on a standalone
//! index store (each write is its own batch, made durable before exit).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use larder_index::{Index, Options, WriteBatch};
use larder_io::{CheckedStorage, RealStorage, StorageRef};

/// Operations on an index store.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum IndexOp {
    /// Set KEY to VALUE (made durable before returning).
    Put { dir: PathBuf, key: String, value: String },
    /// Print the value of KEY.
    Get { dir: PathBuf, key: String },
    /// Remove KEY (made durable before returning).
    Delete { dir: PathBuf, key: String },
    /// Print keys and values starting with PREFIX.
    Scan {
        dir: PathBuf,
        #[arg(default_value = "")]
        prefix: String,
        /// Newest-last order reversed: largest key first.
        #[arg(long)]
        reverse: bool,
    },
    /// Print the index's counters and shape.
    Stats { dir: PathBuf },
}

fn open(dir: &Path) -> Result<Index> {
    // Through a poison latch, as a store's index is: the first failed sync
    // stops every later write.
    let storage: StorageRef = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
    Index::open(storage, dir, Options::default())
        .with_context(|| format!("opening the index store at {}", dir.display()))
}

/// Opens an existing store for reading; never creates one.
fn open_existing(dir: &Path) -> Result<Index> {
    if !dir.join("CURRENT").exists() {
        anyhow::bail!("{}: no index store here (no CURRENT file); create one with `larder index put`", dir.display());
    }
    open(dir)
}

fn write(index: &Index, batch: &WriteBatch) -> Result<()> {
    index.write(index.last_seq() + 1, batch)?;
    index.flush().context("making the write durable")
}

pub(crate) fn run(op: IndexOp) -> Result<()> {
    match op {
        IndexOp::Put { dir, key, value } => write(&open(&dir)?, WriteBatch::new().put(key, value)),
        IndexOp::Delete { dir, key } => write(&open_existing(&dir)?, WriteBatch::new().delete(key)),
        IndexOp::Get { dir, key } => match open_existing(&dir)?.get(key.as_bytes())? {
            Some(v) => {
                println!("{}", String::from_utf8_lossy(&v));
                Ok(())
            }
            None => anyhow::bail!("key {key:?} not found in {}", dir.display()),
        },
        IndexOp::Scan { dir, prefix, reverse } => {
            for kv in open_existing(&dir)?.prefix(prefix.as_bytes(), !reverse)? {
                let (k, v) = kv?;
                println!("{}\t{}", String::from_utf8_lossy(&k), String::from_utf8_lossy(&v));
            }
            Ok(())
        }
        IndexOp::Stats { dir } => {
            println!("{}", open_existing(&dir)?.stats());
            Ok(())
        }
    }
}
