//! Larder's side of the heap suite (feature `larder-heap`): a store in the
//! run's directory, one heap in it (`/bench`), and the three workloads on it.
//!
//! - locate: a hash index over front-coded paths (`larder_locate::table`)
//!   in ONE heap object named `locate-db`, sized up front and laid out in
//!   one pass (offsets inside the object, valid in any process), so a fresh
//!   process attaches the object by name and searches it in place with no
//!   other state. The fresh processes are `larder-locate` (bench/locate),
//!   the small program a heap user would ship, as plocate is one.
//! - micro: the heap object's mapping (`pointer`), read and written with the
//!   same loops as the `mmap` ceiling (super::micro's mapped functions).
//! - alloc: `alloc_in` / `free_in` in one heap object, the draws of
//!   bench/peers/alloc_common.h; durable: `sync` after every operation.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use larder_heap::{Heap, ObjectId, PPtr};
use larder_io::{CheckedStorage, RealStorage, StorageRef};
use larder_object::{CreationOptions, Store, StoreOptions};

use super::alloc::{block_size, draw, slot, FILL_SALT};
use super::locate::{phase, Inputs};
use super::micro::{self, Target};
use super::paths::path_checksum;
use super::{HeapPhase, HeapResult, HeapSpec};

/// The heap's path in the store.
const HEAP_PATH: &str = "/bench";
/// The name of the locate table's object.
const TABLE_NAME: &str = "locate-db";
/// The name of the micro workload's 1 KiB object.
const ATTACH_NAME: &str = "attach-1k";

/// This process's uid and gid, as the heap checks them.
fn credentials() -> larder_heap::Credentials {
    larder_heap::Credentials::user(rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw())
}

fn storage() -> StorageRef {
    CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref()
}

/// Creates a store in `dir/store` and opens the heap in it.
fn create(dir: &Path) -> Result<(Arc<Store>, Heap)> {
    let store = Store::create(storage(), &dir.join("store"), CreationOptions::default(), StoreOptions::default())
        .context("creating the store")?;
    let store = Arc::new(store);
    let heap = Heap::open(&store, HEAP_PATH, credentials()).context("opening the heap")?;
    Ok((store, heap))
}

/// Opens the store in `dir/store` and its heap, as a test's reopen.
#[cfg(test)]
fn open(dir: &Path) -> Result<(Arc<Store>, Heap)> {
    let store =
        Arc::new(Store::open(storage(), &dir.join("store"), StoreOptions::default()).context("opening the store")?);
    let heap = Heap::open(&store, HEAP_PATH, credentials()).context("opening the heap")?;
    Ok((store, heap))
}

/// The host file of a heap object (the store is `dir/store`).
fn heap_file(dir: &Path, obj: ObjectId) -> std::path::PathBuf {
    dir.join("store").join(larder_object::HEAP_DIR).join(obj.0.to_string())
}

/// Builds the locate table of `paths` in a new object named [`TABLE_NAME`].
fn build_table(heap: &Heap, paths: &[String]) -> Result<ObjectId> {
    Ok(larder_locate::write_table(heap, TABLE_NAME, paths)?)
}

/// Searches the table for paths whose last component is `name`: (matches,
/// checksum of the matching paths).
fn search(heap: &Heap, obj: ObjectId, name: &str) -> Result<(u64, u64)> {
    let mut checksum = 0u64;
    let matches = larder_locate::search_object(heap, obj, name.as_bytes(), |path| {
        checksum = checksum.wrapping_add(path_checksum(path));
    })?;
    Ok((matches, checksum))
}

/// The `larder-locate` program: built next to this one (C22 links it
/// statically: `cargo rustc --release -p larder-locate --bin larder-locate
/// -- -C target-feature=+crt-static`).
fn locate_program() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let program = exe.with_file_name("larder-locate");
    ensure!(
        program.exists(),
        "{} not found: build it with cargo rustc --release -p larder-locate --bin larder-locate \
         -- -C target-feature=+crt-static (or cargo build --release -p larder-locate)",
        program.display()
    );
    Ok(program)
}

/// The locate workload: build (a fresh process: this child) + sync, warm
/// searches, then fresh processes that open the store, attach the table by
/// name and search one name each.
pub fn locate(spec: &HeapSpec, inputs: &Inputs) -> Result<(String, Vec<HeapPhase>)> {
    let paths = inputs.paths()?;
    let (store, heap) = create(&spec.dir)?;
    let start = Instant::now();
    let obj = build_table(&heap, &paths)?;
    let insert_secs = start.elapsed().as_secs_f64();
    heap.sync()?;
    let build_secs = start.elapsed().as_secs_f64();
    let db_bytes = std::fs::metadata(heap_file(&spec.dir, obj)).map(|m| m.len() as f64);
    let build = phase(
        "build",
        paths.len() as u64,
        build_secs,
        crate::sys::status_kib("VmHWM"),
        &[("db_bytes", db_bytes.unwrap_or(f64::NAN)), ("sync_secs", build_secs - insert_secs)],
    );
    for name in &inputs.names {
        search(&heap, obj, name)?;
    }
    let start = Instant::now();
    let (mut matches, mut checksum) = (0u64, 0u64);
    for name in &inputs.names {
        let (m, c) = search(&heap, obj, name)?;
        matches += m;
        checksum = checksum.wrapping_add(c);
    }
    let secs = start.elapsed().as_secs_f64();
    inputs.check("larder", matches, checksum)?;
    let warm = phase(
        "search",
        inputs.names.len() as u64,
        secs,
        crate::sys::status_kib("VmHWM"),
        &[("matches", matches as f64)],
    );
    heap.close_object(obj)?;
    // A clean close, as a program that built a database ends: the heap's
    // (its syncs' page images written back and deleted), then the store's,
    // so the fresh processes open the store from the log's clean-close
    // marker with nothing to replay.
    heap.close().context("closing the heap")?;
    let store = Arc::try_unwrap(store).map_err(|_| anyhow::anyhow!("the heap still holds the store"))?;
    store.close().context("closing the store")?;
    let program = locate_program()?;
    let store_dir = spec.dir.join("store").to_string_lossy().into_owned();
    let search_one = |name: &str| -> Result<(f64, serde_json::Value, u64, u64)> {
        let args = ["--heap", HEAP_PATH, "--table", TABLE_NAME, "--timings", &store_dir, name];
        let ran = super::child::run_program_to(&program, &args, None, None, &[0, 1])?;
        let v = super::child::json_line(&ran.stderr)?;
        let (mut matches, mut checksum) = (0u64, 0u64);
        for line in ran.stdout.lines().filter(|l| !l.is_empty()) {
            matches += 1;
            checksum = checksum.wrapping_add(path_checksum(line.as_bytes()));
        }
        ensure!(super::child::field(&v, "matches")? as u64 == matches, "larder-locate printed a wrong count");
        Ok((ran.secs, v, matches, checksum))
    };
    // Warm the program's own files, as the peers' first search does.
    if let Some(first) = inputs.fresh_names.first() {
        search_one(first)?;
    }
    let (mut secs, mut inner, mut opening, mut matches, mut checksum) = (0.0, 0.0, 0.0, 0u64, 0u64);
    for name in &inputs.fresh_names {
        let (s, v, m, c) = search_one(name)?;
        secs += s;
        inner += super::child::field(&v, "secs")?;
        opening += super::child::field(&v, "open_secs")?;
        matches += m;
        checksum = checksum.wrapping_add(c);
    }
    inputs.check_fresh("larder (fresh processes)", matches, checksum)?;
    let fresh = phase(
        "fresh-search",
        inputs.fresh_names.len() as u64,
        secs,
        super::child::children_max_rss_kib(),
        &[("matches", matches as f64), ("attach_search_secs", inner), ("open_secs", opening)],
    );
    let info = "larder-heap: a hash index over front-coded paths in one heap object, sized up front and \
                laid out in one pass, synced after the build; fresh process = the larder-locate program (bench/locate; C22 links it statically): open store + heap, get_by_name, search, print"
        .to_string();
    Ok((info, vec![build, warm, fresh]))
}

/// The micro workload's target: heap objects and their mappings.
pub struct MicroHeap {
    _store: Arc<Store>,
    heap: Heap,
    object: Option<(ObjectId, *mut u8, usize)>,
    copy: Option<ObjectId>,
}

impl MicroHeap {
    /// A fresh store and heap in `dir`.
    pub fn open(dir: &Path) -> Result<MicroHeap> {
        let (store, heap) = create(dir)?;
        Ok(MicroHeap { _store: store, heap, object: None, copy: None })
    }

    fn current(&self) -> Result<(ObjectId, *mut u8, usize)> {
        self.object.context("no object is attached")
    }
}

#[allow(unsafe_code)]
impl Target for MicroHeap {
    fn describe(&self) -> String {
        "larder-heap: the object's MAP_SHARED mapping (Heap::pointer), read and written in place; copy is Heap::copy (mfcopy)".to_string()
    }

    fn create(&mut self, data: &[u8]) -> Result<()> {
        let obj = self.heap.alloc(data.len() as u64)?;
        let p = self.heap.pointer(obj)?;
        // SAFETY: the object's user bytes are data.len() long and mapped.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.object = Some((obj, p, data.len()));
        Ok(())
    }

    fn read_pass(&mut self, buf: &mut [u8]) -> Result<()> {
        let (_, p, len) = self.current()?;
        // SAFETY: the object stays attached (and its base fixed) until remove.
        unsafe { micro::mapped_read_pass(p, len, buf) };
        Ok(())
    }

    fn write_pass(&mut self, buf: &[u8]) -> Result<()> {
        let (_, p, len) = self.current()?;
        // SAFETY: as read_pass; no Rust reference aliases the mapping.
        unsafe { micro::mapped_write_pass(p, len, buf) };
        Ok(())
    }

    fn random_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (_, p, len) = self.current()?;
        ensure!(offset as usize + buf.len() <= len, "read past the object");
        // SAFETY: checked in bounds just above.
        unsafe { micro::mapped_read_at(p, offset, buf) };
        Ok(())
    }

    /// `Heap::copy` (PSHFS's mfcopy), the heap's own copy call as
    /// `std::fs::copy` is the file system's: the bytes go file to file in
    /// the kernel, so the buffer size does not apply.
    fn copy(&mut self, _chunk: usize) -> Result<()> {
        let (obj, _, _) = self.current()?;
        self.copy = Some(self.heap.copy(obj)?);
        Ok(())
    }

    fn remove_copy(&mut self) -> Result<()> {
        if let Some(obj) = self.copy.take() {
            self.heap.free(obj)?;
        }
        Ok(())
    }

    fn remove(&mut self) -> Result<()> {
        if let Some((obj, _, _)) = self.object.take() {
            self.heap.free(obj)?;
        }
        Ok(())
    }

    fn create_named(&mut self, data: &[u8]) -> Result<()> {
        let obj = self.heap.alloc(data.len() as u64)?;
        let p = self.heap.pointer(obj)?;
        // SAFETY: the object's user bytes are data.len() long and mapped.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.heap.add_name(obj, ATTACH_NAME)?;
        self.heap.sync()?;
        self.heap.close_object(obj)?;
        Ok(())
    }

    fn attach_read_close(&mut self, buf: &mut [u8]) -> Result<()> {
        let obj = self.heap.get_by_name(ATTACH_NAME)?;
        let p = self.heap.pointer(obj)?;
        // SAFETY: the object is buf.len() bytes and attached until close_object.
        unsafe { micro::mapped_read_pass(p, buf.len(), buf) };
        self.heap.close_object(obj)?;
        Ok(())
    }
}

/// The allocator workload on one heap object: each thread owns live /
/// threads slots of `PPtr`s, fills them, then frees and refills by the draws.
#[allow(unsafe_code)]
pub fn alloc(spec: &HeapSpec) -> Result<HeapResult> {
    let (_store, heap) = create(&spec.dir)?;
    let heap = &heap;
    let obj = heap.alloc(8)?;
    let slots = spec.live / spec.threads;
    let ops = spec.ops / spec.threads;
    let place = |thread: u64, d: u64| -> Result<(PPtr<u8>, u64)> {
        let size = block_size(d);
        let p = heap.alloc_in(obj, size, 8)?;
        // SAFETY: a fresh block of at least 16 bytes, 8-aligned.
        unsafe { heap.deref(p)?.cast::<u64>().write(d ^ thread) };
        if spec.durable {
            heap.sync()?;
        }
        Ok((p, size))
    };
    let barrier = std::sync::Barrier::new(spec.threads as usize + 1);
    let fill_start = Instant::now();
    let (fill_secs, secs, live_bytes) = std::thread::scope(|s| -> Result<(f64, f64, u64)> {
        let workers: Vec<_> = (0..spec.threads)
            .map(|t| {
                let (place, barrier) = (&place, &barrier);
                s.spawn(move || -> Result<u64> {
                    let mut live: Vec<(PPtr<u8>, u64)> = Vec::with_capacity(slots as usize);
                    let mut failed = None;
                    for i in 0..slots {
                        match place(t, draw(spec.seed, t, FILL_SALT + i)) {
                            Ok(b) => live.push(b),
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    barrier.wait();
                    barrier.wait();
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    for i in 0..ops {
                        let d = draw(spec.seed, t, i);
                        let k = slot(d, slots) as usize;
                        heap.free_in(live[k].0)?;
                        live[k] = place(t, d)?;
                    }
                    Ok(live.iter().map(|b| b.1).sum())
                })
            })
            .collect();
        barrier.wait();
        let fill_secs = fill_start.elapsed().as_secs_f64();
        let start = Instant::now();
        barrier.wait();
        let mut live_bytes = 0;
        for w in workers {
            live_bytes += w.join().map_err(|_| anyhow::anyhow!("an allocator thread panicked"))??;
        }
        Ok((fill_secs, start.elapsed().as_secs_f64(), live_bytes))
    })?;
    let sync_start = Instant::now();
    heap.sync()?;
    let sync_secs = sync_start.elapsed().as_secs_f64();
    let file = std::fs::metadata(heap_file(&spec.dir, obj))?;
    let allocated = std::os::unix::fs::MetadataExt::blocks(&file) * 512;
    let extra = [
        ("live_bytes", live_bytes as f64),
        ("live_blocks", (slots * spec.threads) as f64),
        ("file_apparent_bytes", file.len() as f64),
        ("file_allocated_bytes", allocated as f64),
        ("fill_secs", fill_secs),
        ("sync_secs", sync_secs),
        ("threads", spec.threads as f64),
    ];
    let phase = HeapPhase {
        name: "alloc".to_string(),
        ops: ops * spec.threads,
        secs,
        bytes: live_bytes,
        vmhwm_kib: crate::sys::status_kib("VmHWM"),
        extra: extra.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    let info = format!(
        "larder-heap: alloc_in(obj, size, 8) / free_in in one heap object{}",
        if spec.durable { ", sync after every operation" } else { ", one sync at the end (not timed)" }
    );
    Ok(super::child::result(spec, info, vec![phase]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap_suite::paths::{self, base_name};

    /// What a plain scan of `paths` answers for `name`.
    fn scan(paths: &[String], name: &str) -> (u64, u64) {
        paths
            .iter()
            .filter(|p| base_name(p) == name)
            .fold((0, 0), |(m, c): (u64, u64), p| (m + 1, c.wrapping_add(path_checksum(p.as_bytes()))))
    }

    #[test]
    fn the_table_answers_as_a_scan_before_and_after_a_reopen() {
        let dir = std::env::temp_dir().join(format!("larder-bench-heap-table-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let tree = paths::tree(3000, 5);
        let names = paths::queries(&tree, 40, 5);
        {
            let (_store, heap) = create(&dir).expect("create");
            let obj = build_table(&heap, &tree).expect("build");
            heap.sync().expect("sync");
            for name in &names {
                assert_eq!(search(&heap, obj, name).expect("search"), scan(&tree, name), "{name}");
            }
        }
        let (_store, heap) = open(&dir).expect("reopen");
        let obj = heap.get_by_name(TABLE_NAME).expect("attach by name");
        for name in &names {
            assert_eq!(search(&heap, obj, name).expect("search"), scan(&tree, name), "{name} after reopening");
        }
        drop(heap);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
