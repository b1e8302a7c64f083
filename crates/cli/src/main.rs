//! `larder`: the command-line tool.
//!
//! The store commands work on a store directory through the KV API:
//! `init`, `put`, `get`, `cat`, `rm`, `ls`, `import`, `export`, `stats` and
//! `fsck`; `larder heap` looks into the store's heaps; `larder tree` reads and
//! writes its transactional trees; `mount` serves one through FUSE. `larder bench` is the main job: it measures an embedded store
//! with its defaults. `larder bench index` and `larder index ...` drive a
//! standalone index store, the layer below.

mod bench_index;
mod bench_store;
mod crash_pattern;
mod crash_writer;
mod export;
mod fsck_cmd;
mod heap_cmd;
mod heap_find;
mod import;
mod index_cmd;
mod init;
mod mount;
mod objects;
mod progress;
mod serve;
mod serve_writer;
mod stats;
mod store;
mod target;
mod tree_cmd;
mod walk;

use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Create a store in a directory (refused if one is there).
    Init(init::InitArgs),
    /// Store a file's bytes, or stdin's, under a key.
    Put(objects::PutArgs),
    /// Write a key's value to stdout or a file.
    Get(objects::GetArgs),
    /// Write a key's value to stdout.
    Cat(objects::CatArgs),
    /// Delete a key, or with --bucket an empty bucket.
    Rm(objects::RmArgs),
    /// List the buckets, or the keys (with sizes) of a bucket under a prefix.
    Ls(objects::LsArgs),
    /// Import a directory tree into a bucket, in durable batches.
    Import(import::ImportArgs),
    /// Write keys back as files under a directory.
    Export(export::ExportArgs),
    /// Print the store's counters.
    Stats(stats::StatsArgs),
    /// Mount a store as a file system (FUSE) until unmounted or signalled.
    Mount(mount::MountArgs),
    /// Serve a store to other processes (and, with --mount, through FUSE)
    /// until signalled; the store commands follow a store to its server.
    Serve(serve::ServeArgs),
    /// Check the store (with --repair, first rewrite damaged redundant
    /// copies); exit 0 when clean, 1 on problems, 2 if the check could not run.
    Fsck(fsck_cmd::FsckArgs),
    /// Measure the engine: with no argument (or `store`), a store through
    /// the KV API; `index`, the index layer alone.
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        what: Option<BenchWhat>,
        #[command(flatten)]
        store: bench_store::Args,
    },
    /// Look into the store's heaps: list heaps and objects, print an
    /// object's record or bytes, free an object (names, records, file).
    Heap {
        #[command(subcommand)]
        op: heap_cmd::HeapOp,
    },
    /// Read and write the store's transactional trees: list them, get,
    /// put, remove and scan keys, drop a tree.
    Tree(tree_cmd::TreeArgs),
    /// Read and write a standalone index store.
    Index {
        #[command(subcommand)]
        op: index_cmd::IndexOp,
    },
    /// Write keys or files until killed, printing each step before it
    /// starts and once it is durable: the writer the crash-loop test kills.
    #[command(hide = true)]
    CrashWriter(crash_writer::CrashWriterArgs),
    /// Write keys and files through a server until killed or the server
    /// goes, printing each step before it starts and once it is durable,
    /// and holding files, readers, writers and buffers open between steps:
    /// the client the server's kill tests kill.
    #[command(hide = true)]
    ServeWriter(serve_writer::ServeWriterArgs),
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Put, get, scan and delete small objects in a new store (the default).
    Store(bench_store::Args),
    /// Load random keys into an index store, then query it: point gets
    /// (hits and misses) and prefix scans. Prints throughput and counters.
    Index(bench_index::Args),
}

/// Exit code of a command that failed (fsck has its own).
const FAILED: u8 = 1;
/// Exit code of an fsck that could not finish its check.
const FSCK_STOPPED: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let failed = if matches!(cli.command, Command::Fsck(_)) { FSCK_STOPPED } else { FAILED };
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("larder: {e:#}");
            ExitCode::from(failed)
        }
    }
}

fn run(command: Command) -> Result<ExitCode> {
    let done = match command {
        Command::Fsck(args) => return fsck_cmd::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Put(args) => objects::put(&args),
        Command::Get(args) => objects::get(&args),
        Command::Cat(args) => objects::cat(&args),
        Command::Rm(args) => objects::rm(&args),
        Command::Ls(args) => objects::ls(&args),
        Command::Import(args) => import::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Mount(args) => mount::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Bench { what: None, store } | Command::Bench { what: Some(BenchWhat::Store(store)), .. } => {
            bench_store::run(&store)
        }
        Command::Bench { what: Some(BenchWhat::Index(args)), .. } => bench_index::run(&args),
        Command::Index { op } => index_cmd::run(op),
        Command::Heap { op } => heap_cmd::run(&op),
        Command::Tree(args) => tree_cmd::run(&args),
        Command::CrashWriter(args) => crash_writer::run(&args),
        Command::ServeWriter(args) => serve_writer::run(&args),
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// The default store directory for `bench index`.
pub(crate) fn default_dir() -> PathBuf {
    std::env::temp_dir().join("larder-demo")
}
