//! `larder`: the command-line tool.
//!
//! For now it drives the index layer: `larder bench index` loads and
//! queries an index store in a directory and prints what it did, how fast,
//! and the index's counters; `larder index ...` reads and writes a
//! standalone index store.

mod bench_index;
mod index_cmd;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Larder: a user-level storage engine.
#[derive(Parser, Debug)]
#[command(name = "larder", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the engine on a store in a local directory.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Read and write a standalone index store.
    Index {
        #[command(subcommand)]
        op: index_cmd::IndexOp,
    },
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Load random keys into an index store, then query it: point gets
    /// (hits and misses) and prefix scans. Prints throughput and counters.
    Index(bench_index::Args),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { what: BenchWhat::Index(args) } => bench_index::run(&args),
        Command::Index { op } => index_cmd::run(op),
    }
}

/// The default store directory for the main job.
pub(crate) fn default_dir() -> PathBuf {
    std::env::temp_dir().join("larder-demo")
}
