//! What an object-suite child does: open one engine (or the ceiling's file)
//! in a fresh directory, run one workload, print one JSON line. Objects are
//! named `obj/0000123` (a counter, in increasing order; with `--per-dir N`,
//! `obj/0000/0000123` with N objects per level) and their bytes are windows
//! of a pseudo-random pool (incompressible), derived from the seed.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};

use super::stores::{self, Store};
use super::{ObjPhase, ObjResult, ObjSpec, Workload, CEILING, LARGE_BYTES};
use crate::sys;
use crate::workload::mix64;

/// Values are windows of this many pseudo-random bytes.
const POOL_BYTES: usize = 8 << 20;
/// Objects per call of [`Store::load`] in the bulk loads.
const LOAD_BATCH: u64 = 1000;
/// The key of the large object of the delete workload.
const LARGE_KEY: &str = "large";
/// Offsets the value indices of the large object's chunks from the objects'.
const LARGE_SALT: u64 = 1 << 40;

/// The names and bytes of every object; the bytes are windows of one pool.
pub struct Values {
    pool: Vec<u8>,
    seed: u64,
    per_dir: u64,
}

impl Values {
    /// The pool of `seed`; `per_dir` objects per directory level (0: one level).
    pub fn new(seed: u64, per_dir: u64) -> Values {
        let pool = (0..(POOL_BYTES / 8) as u64).flat_map(|i| mix64(seed ^ 0x6f62_6a65_6374 ^ (i << 24)).to_le_bytes());
        Values { pool: pool.collect(), seed, per_dir }
    }

    /// The key of object `i`.
    pub fn key(&self, i: u64) -> String {
        match self.per_dir {
            0 => format!("obj/{i:07}"),
            n => format!("obj/{:04}/{i:07}", i / n),
        }
    }

    /// The `len` bytes of object `i` (`len` at most the pool's size).
    pub fn get(&self, i: u64, len: usize) -> &[u8] {
        let span = (self.pool.len() - len) as u64 + 1;
        let offset = (mix64(i ^ self.seed.rotate_left(29)) % span) as usize;
        &self.pool[offset..offset + len]
    }

    /// The `q`-th object to read, below `n`.
    fn draw(&self, q: u64, n: u64) -> u64 {
        mix64(mix64(self.seed ^ 0x6765_7473) ^ q) % n.max(1)
    }
}

/// Runs one child's work and prints its result as one JSON line.
pub fn run_child(spec_json: &str) -> Result<()> {
    let spec: ObjSpec = serde_json::from_str(spec_json).context("parsing the child spec")?;
    std::fs::create_dir_all(&spec.dir).with_context(|| format!("creating {}", spec.dir.display()))?;
    let values = Values::new(spec.seed, spec.per_dir);
    let result = if spec.store == CEILING { ceiling(&spec, &values)? } else { engine(&spec, &values)? };
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// The start of a phase: its time and the I/O counter.
struct Clock {
    at: Instant,
    io: u64,
}

impl Clock {
    fn start() -> Clock {
        Clock { at: Instant::now(), io: sys::io_write_bytes() }
    }

    /// Closes the phase; `lat_ns` are per-operation latencies (may be empty).
    fn finish(&self, name: &str, ops: u64, bytes: u64, mut lat_ns: Vec<u64>) -> ObjPhase {
        let secs = self.at.elapsed().as_secs_f64();
        lat_ns.sort_unstable();
        let at = |p: f64| match lat_ns.len() {
            0 => 0.0,
            n => lat_ns[((n - 1) as f64 * p).round() as usize] as f64 / 1e3,
        };
        ObjPhase {
            name: name.to_string(),
            ops,
            secs,
            bytes,
            p50_us: at(0.5),
            p99_us: at(0.99),
            max_us: at(1.0),
            vmhwm_kib: sys::status_kib("VmHWM"),
            io_write_bytes: sys::io_write_bytes().saturating_sub(self.io),
            ..ObjPhase::default()
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn engine(spec: &ObjSpec, values: &Values) -> Result<ObjResult> {
    let store = stores::open(spec)?;
    let info = store.describe();
    let phases = match spec.workload {
        Workload::Put1 | Workload::Put8 | Workload::Big => vec![parallel_puts(&*store, values, spec)?],
        Workload::Delete => delete(&*store, values, spec)?,
        Workload::Gets => gets(&*store, values, spec)?,
        // The space workload closes the store itself.
        Workload::Space => return space(store, values, spec, info),
    };
    store.close().context("closing")?;
    Ok(ObjResult { store: spec.store.clone(), workload: Some(spec.workload), info, phases })
}

/// Durable puts of objects `first..first + count`, one after the other; for
/// each, (its end since `origin`, its latency) in ns. Counts them in `done`.
fn timed_puts(
    store: &dyn Store,
    values: &Values,
    (first, count, len): (u64, u64, usize),
    origin: Instant,
    done: &AtomicU64,
) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::with_capacity(count as usize);
    for i in first..first + count {
        let k = values.key(i);
        let t = Instant::now();
        store.put(&k, values.get(i, len), true).with_context(|| format!("durable put of {k}"))?;
        let end = Instant::now();
        out.push((nanos(end - origin), nanos(end - t)));
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(out)
}

/// Workloads a, b and c: `threads` writers, each doing `ops` durable puts.
fn parallel_puts(store: &dyn Store, values: &Values, spec: &ObjSpec) -> Result<ObjPhase> {
    let barrier = Barrier::new(spec.threads + 1);
    let done = AtomicU64::new(0);
    let (clock, lat) = std::thread::scope(|s| -> Result<(Clock, Vec<u64>)> {
        let handles: Vec<_> = (0..spec.threads as u64)
            .map(|t| {
                let (barrier, done) = (&barrier, &done);
                s.spawn(move || {
                    barrier.wait();
                    timed_puts(store, values, (t * spec.ops, spec.ops, spec.value_bytes), Instant::now(), done)
                })
            })
            .collect();
        barrier.wait();
        let clock = Clock::start();
        let mut lat = Vec::new();
        for h in handles {
            let puts = h.join().map_err(|_| anyhow!("a writer thread panicked"))??;
            lat.extend(puts.into_iter().map(|(_, l)| l));
        }
        Ok((clock, lat))
    })?;
    let total = spec.ops * spec.threads as u64;
    let mut phase = clock.finish("puts", total, total * spec.value_bytes as u64, lat);
    phase.extra.extend(store.counters());
    Ok(phase)
}

/// Workload d: durable puts alone, then the same number while another
/// thread deletes a large object written (durably) beforehand.
fn delete(store: &dyn Store, values: &Values, spec: &ObjSpec) -> Result<Vec<ObjPhase>> {
    let chunks = spec.big_bytes.div_ceil(LARGE_BYTES as u64);
    let clock = Clock::start();
    let mut source = (0..chunks).map(|c| values.get(LARGE_SALT + c, LARGE_BYTES));
    store.put_stream(LARGE_KEY, &mut source).context("writing the large object")?;
    let write = clock.finish("write-large", 1, chunks * LARGE_BYTES as u64, Vec::new());
    let _ = Command::new("sync").status();

    let (n, len) = (spec.ops, spec.value_bytes);
    let done = AtomicU64::new(0);
    let clock = Clock::start();
    let alone = timed_puts(store, values, (0, n, len), clock.at, &done)?;
    let alone = clock.finish("puts-alone", n, n * len as u64, alone.into_iter().map(|(_, l)| l).collect());

    let done = AtomicU64::new(0);
    let clock = Clock::start();
    let origin = clock.at;
    let (puts, (del_start, del_end, existed)) = std::thread::scope(|s| -> Result<_> {
        let done = &done;
        let deleter = s.spawn(move || -> Result<(u64, u64, bool)> {
            // Start once a tenth of the puts are done, so the delete lands in a steady stream.
            while done.load(Ordering::Relaxed) < n / 10 {
                std::thread::sleep(Duration::from_micros(100));
            }
            let start = nanos(origin.elapsed());
            let existed = store.delete(LARGE_KEY).context("deleting the large object")?;
            Ok((start, nanos(origin.elapsed()), existed))
        });
        let puts = timed_puts(store, values, (n, n, len), origin, done);
        // Release the deleter even if the puts failed early.
        done.store(u64::MAX, Ordering::Relaxed);
        let deleted = deleter.join().map_err(|_| anyhow!("the deleting thread panicked"))??;
        Ok((puts?, deleted))
    })?;
    ensure!(existed, "the large object was not there to delete");
    let last_end = puts.iter().map(|(end, _)| *end).max().unwrap_or(0);
    let mut during = clock.finish("puts-during-delete", n, n * len as u64, puts.iter().map(|(_, l)| *l).collect());
    // The phase is the puts' time, not the delete's if that outlasts them.
    during.secs = last_end as f64 / 1e9;
    let window_end = del_end.min(last_end);
    let in_window = puts.iter().filter(|(end, _)| (del_start..=window_end).contains(end)).count();
    let extra = &mut during.extra;
    extra.insert("delete_secs".to_string(), (del_end - del_start) as f64 / 1e9);
    extra.insert("delete_start_secs".to_string(), del_start as f64 / 1e9);
    extra.insert("puts_in_delete_window".to_string(), in_window as f64);
    extra.insert("delete_window_secs".to_string(), window_end.saturating_sub(del_start) as f64 / 1e9);
    Ok(vec![write, alone, during])
}

/// Writes objects `0..n` of `len` bytes through the engine's non-durable path.
fn load(store: &dyn Store, values: &Values, n: u64, len: usize) -> Result<()> {
    let mut i = 0;
    while i < n {
        let end = (i + LOAD_BATCH).min(n);
        let items: Vec<(String, &[u8])> = (i..end).map(|j| (values.key(j), values.get(j, len))).collect();
        store.load(&items).with_context(|| format!("loading objects {i}..{end}"))?;
        i = end;
    }
    Ok(())
}

/// Workload e: load, one checked warm-up pass in key order, then timed passes of random gets.
fn gets(store: &dyn Store, values: &Values, spec: &ObjSpec) -> Result<Vec<ObjPhase>> {
    let (n, len) = (spec.ops, spec.value_bytes);
    let clock = Clock::start();
    load(store, values, n, len)?;
    store.sync().context("syncing the load")?;
    let _ = Command::new("sync").status();
    let loaded = clock.finish("load", n, n * len as u64, Vec::new());
    let keys: Vec<String> = (0..n).map(|i| values.key(i)).collect();
    let mut buf = Vec::with_capacity(len * 2);
    let mut errors = 0;
    for (i, k) in keys.iter().enumerate() {
        if !store.get(k, &mut buf)? || buf != values.get(i as u64, len) {
            errors += 1;
        }
    }
    let order: Vec<u64> = (0..spec.passes * n).map(|q| values.draw(q, n)).collect();
    let clock = Clock::start();
    let mut bytes = 0;
    for (q, &i) in order.iter().enumerate() {
        let found = store.get(&keys[i as usize], &mut buf)?;
        bytes += buf.len() as u64;
        if !found || !spot_check(&buf, values.get(i, len), q) {
            errors += 1;
        }
    }
    let mut phase = clock.finish("gets", order.len() as u64, bytes, Vec::new());
    phase.errors = errors;
    Ok(vec![loaded, phase])
}

/// Whether a timed get's value `got` matches `want`: its length and its
/// first and last 16 bytes always (values are windows at random offsets
/// of one pool, so another object's bytes differ there), all of it for
/// every 64th get (`q`). Comparing all 4 KiB of every get against the
/// pool, a read the engines do not make, was about a quarter of Larder's
/// time per get (2.24 against 1.71 µs) and compressed every ratio; the
/// untimed pass before compares every value in full.
fn spot_check(got: &[u8], want: &[u8], q: usize) -> bool {
    const EDGE: usize = 16;
    if got.len() != want.len() {
        return false;
    }
    if q.is_multiple_of(64) || got.len() <= 2 * EDGE {
        return got == want;
    }
    got[..EDGE] == want[..EDGE] && got[got.len() - EDGE..] == want[want.len() - EDGE..]
}

/// Workload f: load, clean close, then the allocated bytes of the directory.
fn space(store: Box<dyn Store>, values: &Values, spec: &ObjSpec, info: String) -> Result<ObjResult> {
    let (n, len) = (spec.ops, spec.value_bytes);
    let clock = Clock::start();
    load(&*store, values, n, len)?;
    let load_secs = clock.at.elapsed().as_secs_f64();
    let closing = Instant::now();
    store.close().context("closing")?;
    let close_secs = closing.elapsed().as_secs_f64();
    let _ = Command::new("sync").status();
    let (allocated, files) = allocated_bytes(&spec.dir)?;
    if std::env::var_os("LARDER_BENCH_SPACE_PARTS").is_some() {
        // Where the bytes are, by directory two levels down (diagnosis).
        for top in std::fs::read_dir(&spec.dir)? {
            let top = top?.path();
            for part in std::fs::read_dir(&top).into_iter().flatten() {
                let part = part?.path();
                if !part.is_dir() {
                    continue;
                }
                let (bytes, n) = allocated_bytes(&part)?;
                eprintln!("space: {} {} files {:.1} MiB", part.display(), n, bytes as f64 / 1048576.0);
            }
        }
    }
    let mut phase = clock.finish("space", n, n * len as u64, Vec::new());
    phase.secs = load_secs;
    phase.extra.insert("allocated_bytes".to_string(), allocated as f64);
    phase.extra.insert("files".to_string(), files as f64);
    phase.extra.insert("close_secs".to_string(), close_secs);
    Ok(ObjResult { store: spec.store.clone(), workload: Some(spec.workload), info, phases: vec![phase] })
}

/// Sum of `st_blocks * 512` over `dir` and everything under it (symlinks
/// not followed), and the number of non-directories.
fn allocated_bytes(dir: &Path) -> Result<(u64, u64)> {
    let (mut total, mut files) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        total += std::fs::symlink_metadata(&d).with_context(|| format!("stat {}", d.display()))?.blocks() * 512;
        for entry in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
                files += 1;
            }
        }
    }
    Ok((total, files))
}

/// The physical ceiling: the same operations on one already-written file.
fn ceiling(spec: &ObjSpec, values: &Values) -> Result<ObjResult> {
    let len = spec.value_bytes;
    let slots = match spec.workload {
        Workload::Put1 | Workload::Put8 | Workload::Big => spec.ops * spec.threads as u64,
        Workload::Gets => spec.ops,
        other => bail!("no ceiling for the {} workload", other.name()),
    };
    let path = spec.dir.join("ceiling");
    let file = File::options().create(true).truncate(false).read(true).write(true).open(&path)?;
    // Write all of it and sync, so the timed writes allocate nothing.
    for i in 0..slots {
        file.write_all_at(values.get(LARGE_SALT ^ i, len), i * len as u64)?;
    }
    file.sync_all().context("syncing the ceiling file")?;
    let (phase, info) = if spec.workload == Workload::Gets {
        (ceiling_reads(&file, values, spec)?, format!("gets: pread of {len} B at random offsets of a cached file"))
    } else {
        let info = format!(
            "{}: overwrite of an already-written file, {len} B per op at sequential offsets + fdatasync per op, \
             {} thread(s)",
            spec.workload.name(),
            spec.threads
        );
        (ceiling_writes(&file, values, spec, slots)?, info)
    };
    Ok(ObjResult { store: CEILING.to_string(), workload: Some(spec.workload), info, phases: vec![phase] })
}

fn ceiling_writes(file: &File, values: &Values, spec: &ObjSpec, slots: u64) -> Result<ObjPhase> {
    let len = spec.value_bytes;
    let next = AtomicU64::new(0);
    let barrier = Barrier::new(spec.threads + 1);
    let (clock, lat) = std::thread::scope(|s| -> Result<(Clock, Vec<u64>)> {
        let handles: Vec<_> = (0..spec.threads)
            .map(|_| {
                let (next, barrier) = (&next, &barrier);
                s.spawn(move || -> Result<Vec<u64>> {
                    barrier.wait();
                    let mut lat = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= slots {
                            return Ok(lat);
                        }
                        let t = Instant::now();
                        file.write_all_at(values.get(i, len), i * len as u64)?;
                        file.sync_data()?;
                        lat.push(nanos(t.elapsed()));
                    }
                })
            })
            .collect();
        barrier.wait();
        let clock = Clock::start();
        let mut lat = Vec::new();
        for h in handles {
            lat.extend(h.join().map_err(|_| anyhow!("a writer thread panicked"))??);
        }
        Ok((clock, lat))
    })?;
    Ok(clock.finish("puts", slots, slots * len as u64, lat))
}

fn ceiling_reads(file: &File, values: &Values, spec: &ObjSpec) -> Result<ObjPhase> {
    let (n, len) = (spec.ops, spec.value_bytes);
    let mut buf = vec![0u8; len];
    for i in 0..n {
        file.read_exact_at(&mut buf, i * len as u64)?;
    }
    let order: Vec<u64> = (0..spec.passes * n).map(|q| values.draw(q, n)).collect();
    let clock = Clock::start();
    let mut errors = 0;
    for (q, &i) in order.iter().enumerate() {
        file.read_exact_at(&mut buf, i * len as u64)?;
        if !spot_check(&buf, values.get(LARGE_SALT ^ i, len), q) {
            errors += 1;
        }
    }
    let mut phase = clock.finish("gets", order.len() as u64, order.len() as u64 * len as u64, Vec::new());
    phase.errors = errors;
    Ok(phase)
}
