//! `larder heap ls|stat|cat|rm`: a heap's objects, their records and
//! bytes, and freeing them (docs/heap.md). On the store opened in this
//! process: the server protocol has no heap requests, so while a server
//! serves the store these commands refuse and say to stop it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use larder_kv::Kv;
use larder_object::meta::{heap_span_prefix, prefix_end, HEAP_OBJECT_ARENA};
use larder_object::{Durability, Store};

use crate::heap_find::{self, FoundHeap};
use crate::store::shown;
use crate::target::Target;

/// Bytes copied per read by `heap cat`.
const COPY_BYTES: usize = 1 << 20;

/// Operations on heaps.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum HeapOp {
    /// List the heaps, or the objects of HEAP (id, size, type, names).
    Ls {
        /// Store directory.
        store: PathBuf,
        /// The heap's path in the store (`/heap`).
        heap: Option<String>,
    },
    /// Print an object's record: heap, type, sizes, file, names, arena.
    Stat {
        /// Store directory.
        store: PathBuf,
        /// The heap's path in the store.
        heap: String,
        /// The object: its id, or one of its names.
        #[arg(value_name = "OBJECT|NAME")]
        object: String,
    },
    /// Write an object's bytes to stdout.
    Cat {
        /// Store directory.
        store: PathBuf,
        /// The heap's path in the store.
        heap: String,
        /// The object: its id, or one of its names.
        #[arg(value_name = "OBJECT|NAME")]
        object: String,
    },
    /// Free an object: drop all its names, its records and its file.
    Rm {
        /// Store directory.
        store: PathBuf,
        /// The heap's path in the store.
        heap: String,
        /// The object: its id, or one of its names.
        #[arg(value_name = "OBJECT|NAME")]
        object: String,
    },
}

/// Runs `op`.
pub(crate) fn run(op: &HeapOp) -> Result<()> {
    let dir = match op {
        HeapOp::Ls { store, .. }
        | HeapOp::Stat { store, .. }
        | HeapOp::Cat { store, .. }
        | HeapOp::Rm { store, .. } => store,
    };
    let kv = open(dir)?;
    let done = match op {
        HeapOp::Ls { heap: None, .. } => list_heaps(kv.store()),
        HeapOp::Ls { heap: Some(heap), .. } => list_objects(kv.store(), &heap_find::heap(kv.store(), heap)?),
        HeapOp::Stat { heap, object, .. } => stat(kv.store(), &heap_find::heap(kv.store(), heap)?, object),
        HeapOp::Cat { heap, object, .. } => cat(kv.store(), &heap_find::heap(kv.store(), heap)?, object),
        HeapOp::Rm { heap, object, .. } => rm(kv.store(), &heap_find::heap(kv.store(), heap)?, object),
    };
    let d = dir.display();
    done.with_context(|| format!("store at {d}"))?;
    crate::store::close(kv, dir)
}

/// The store opened here; refused while a server serves it.
fn open(dir: &Path) -> Result<Kv> {
    match Target::open(dir)? {
        Target::Embedded(kv) => Ok(kv),
        Target::Served(_) => bail!(
            "the store at {} is served by `larder serve`, and the server has no heap requests yet: \
             stop the server, then run `larder heap` again (or read heap objects through the server's \
             mount or `larder cat`)",
            dir.display()
        ),
    }
}

fn list_heaps(store: &Store) -> Result<()> {
    let objects = store.heap_objects()?;
    let mut out = io::stdout().lock();
    writeln!(out, "{:<32} {:>12} {:>10}", "HEAP", "ROOT", "OBJECTS")?;
    for (root, _) in store.heap_roots()? {
        let path = heap_find::path_of(store, root)?;
        let count = objects.iter().filter(|(_, r)| r.heap == root).count();
        writeln!(out, "{:<32} {:>12} {:>10}", shown(path.as_bytes()), root, count)?;
    }
    Ok(out.flush()?)
}

fn list_objects(store: &Store, heap: &FoundHeap) -> Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{:>12} {:>14} {:>8}  NAMES", "OBJECT", "SIZE", "TYPE")?;
    for (id, record) in store.heap_objects()?.into_iter().filter(|(_, r)| r.heap == heap.root) {
        let size = store.stat(id)?.map(|o| o.size).unwrap_or(0);
        let names: Vec<String> = store.heap_names(id)?.iter().map(|n| shown(n.as_bytes())).collect();
        writeln!(out, "{id:>12} {size:>14} {:>8}  {}", record.type_id, names.join(" "))?;
    }
    Ok(out.flush()?)
}

fn stat(store: &Store, heap: &FoundHeap, which: &str) -> Result<()> {
    let (id, record) = heap_find::object(store, heap, which)?;
    let onode = store.stat(id)?;
    let path = store.heap_file_path(id);
    let file_len = match store.open_heap_file(id, false) {
        Ok(f) => f.len()?.to_string(),
        Err(e) => format!("unreadable ({e})"),
    };
    let names: Vec<String> = store.heap_names(id)?.iter().map(|n| shown(n.as_bytes())).collect();
    let spans = span_records(store, id)?;
    let mut out = io::stdout().lock();
    writeln!(out, "object:        {id}")?;
    writeln!(out, "heap:          {} (root directory {})", heap.path, heap.root)?;
    writeln!(out, "type:          {}", if record.type_id == 0 { "none".into() } else { record.type_id.to_string() })?;
    match &onode {
        Some(o) => {
            writeln!(out, "size:          {}", o.size)?;
            writeln!(out, "mode:          {:o} uid {} gid {} links {}", o.mode & 0o7777, o.uid, o.gid, o.nlink)?;
        }
        None => writeln!(out, "size:          (no onode: run `larder fsck`)")?,
    }
    writeln!(out, "durable size:  {}", record.durable_size)?;
    writeln!(out, "file:          {} ({file_len} bytes)", path.display())?;
    writeln!(out, "names:         {}", names.join(" "))?;
    let arena = record.flags & HEAP_OBJECT_ARENA != 0;
    writeln!(
        out,
        "arena:         {} ({spans} span records; their contents are the heap's encoding, not decoded here)",
        if arena { "yes" } else { "no" }
    )?;
    Ok(out.flush()?)
}

/// How many arena span records `object` has.
fn span_records(store: &Store, object: u64) -> Result<usize> {
    let start = heap_span_prefix(object);
    let end = prefix_end(&start).unwrap_or_default();
    let range =
        store.index().range(std::ops::Bound::Included(&start[..]), std::ops::Bound::Excluded(&end[..]), true)?;
    let mut n = 0;
    for kv in range {
        kv?;
        n += 1;
    }
    Ok(n)
}

fn cat(store: &Store, heap: &FoundHeap, which: &str) -> Result<()> {
    let (id, _) = heap_find::object(store, heap, which)?;
    let mut out = io::stdout().lock();
    let mut buf = vec![0u8; COPY_BYTES];
    let mut at = 0u64;
    loop {
        let n = store.read(id, at, &mut buf).with_context(|| format!("reading heap object {id}"))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).context("writing stdout")?;
        at += n as u64;
    }
    out.flush().context("writing stdout")
}

fn rm(store: &Store, heap: &FoundHeap, which: &str) -> Result<()> {
    let (id, _) = heap_find::object(store, heap, which)?;
    let freed = store
        .free_heap_object(heap.root, id, Durability::Durable)
        .with_context(|| format!("freeing object {id} of heap {:?}", heap.path))?;
    let names: Vec<String> = freed.names.iter().map(|n| shown(n.as_bytes())).collect();
    println!(
        "freed object {id} of heap {} (names dropped: {})",
        heap.path,
        if names.is_empty() { "none".into() } else { names.join(" ") }
    );
    Ok(())
}
