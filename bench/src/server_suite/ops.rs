//! The single operations, timed one kind at a time on any [`Target`].

use std::ffi::CString;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::targets::Target;

/// Bytes of the file the reads and writes go to: written whole and read
/// once before the timed reads, so every read finds it cached.
pub const FILE_BYTES: u64 = 16 << 20;
/// Bytes of the small file read by `read4k-small`: it fits the
/// larder-client lease cache (256 pages of 4 KiB), so a leased client
/// reads it from its own memory once it has read it whole.
pub const SMALL_FILE_BYTES: u64 = 512 << 10;
/// Files of the directory that stat, open+close and listdir work in.
pub const DIRECTORY_FILES: usize = 1_000;
/// Bytes of an append.
pub const APPEND_BYTES: usize = 16 << 10;

/// One operation kind's timing: the whole loop's, and each operation's
/// latency (the median stays put when the shared machine preempts a
/// spinning client or server now and then; the mean does not).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Timed {
    pub op: String,
    pub ops: u64,
    pub secs: f64,
    /// Median latency of one operation, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
}

/// How many of each operation one run does (`--scale` multiplies them).
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Counts {
    pub io: u64,
    pub appends: u64,
    pub meta: u64,
    pub listings: u64,
    pub creates: u64,
}

impl Counts {
    pub fn scaled(scale: f64) -> Counts {
        let n = |base: f64| ((base * scale).round() as u64).max(1);
        Counts { io: n(20_000.0), appends: n(4_000.0), meta: n(20_000.0), listings: n(200.0), creates: n(5_000.0) }
    }
}

/// Every operation kind, in the order they run.
pub const OPS: [&str; 25] = [
    "read4k-seq",
    "read4k-rand",
    "read16k-seq",
    "read16k-rand",
    "read4k-small",
    "write4k-seq",
    "write4k-rand",
    "write16k-seq",
    "write16k-rand",
    "append16k",
    "append16k-posted",
    "stat",
    "open-close",
    "listdir",
    "create",
    "rename",
    "unlink",
    "append16k-zc",
    "read4k-cold-seq",
    "read4k-cold-rand",
    "write4k-cold-rand",
    "read4k-shared",
    "write4k-shared",
    "read4k-private2",
    "write4k-private2",
];

/// A seeded xorshift.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn name(prefix: &str, i: u64) -> Result<CString> {
    Ok(CString::new(format!("{prefix}{i:06}"))?)
}

/// Runs `body(i)` for i in 0..ops, timing each call and the whole loop.
fn timed(op: &str, ops: u64, mut body: impl FnMut(usize) -> Result<()>) -> Result<Timed> {
    let mut latencies = Vec::with_capacity(ops as usize);
    let start = Instant::now();
    for i in 0..ops as usize {
        let one = Instant::now();
        body(i)?;
        latencies.push(one.elapsed().as_nanos() as u64);
    }
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
    Ok(Timed { op: op.to_string(), ops, secs, p50_ns: at(0.5), p99_ns: at(0.99) })
}

/// Sets up the files (not timed), then times each operation kind in turn
/// (all but the zero-copy append, which only a client has), of those
/// `wanted` names (all when empty). A rename or unlink needs the files
/// the creates made: those run, untimed, for them.
pub fn run<T: Target>(t: &T, counts: Counts, seed: u64, wanted: &[String]) -> Result<Vec<Timed>> {
    let want = |op: &str| wanted.is_empty() || wanted.iter().any(|w| w == op);
    let mut timings = Vec::new();
    let mut random = Random::new(seed);
    let io = ["read", "write", "append16k"];
    if OPS.iter().any(|op| want(op) && io.iter().any(|p| op.starts_with(p))) {
        io_ops(t, counts, &mut random, &want, &mut timings)?;
    }
    if want("stat") || want("open-close") || want("listdir") {
        directory_ops(t, counts, &mut random, &want, &mut timings)?;
    }
    if want("create") || want("rename") || want("unlink") {
        namespace_ops(t, counts, &mut timings)?;
    }
    timings.retain(|timing| want(&timing.op));
    Ok(timings)
}

/// Reads, writes and appends of a cached file.
fn io_ops<T: Target>(
    t: &T,
    counts: Counts,
    random: &mut Random,
    want: &dyn Fn(&str) -> bool,
    out: &mut Vec<Timed>,
) -> Result<()> {
    // The cached file: written whole, then read whole once.
    let rw = t.mkdir("rw")?;
    let data = t.open_file(&rw, &name("data", 0)?, false)?;
    let chunk = vec![0x5a_u8; 1 << 20];
    for i in 0..FILE_BYTES / chunk.len() as u64 {
        if t.write_at(&data, &chunk, i * chunk.len() as u64)? != chunk.len() {
            bail!("short write while filling the file");
        }
    }
    let mut buf = vec![0u8; 16 << 10];
    let step = buf.len() as u64;
    for i in 0..FILE_BYTES / step {
        t.read_at(&data, &mut buf, i * step)?;
    }
    for (size, kb) in [(4096usize, 4), (16384, 16)] {
        let blocks = FILE_BYTES / size as u64;
        for sequential in [true, false] {
            let offsets: Vec<u64> = (0..counts.io)
                .map(|i| if sequential { i % blocks } else { random.below(blocks) } * size as u64)
                .collect();
            let op = format!("read{kb}k-{}", if sequential { "seq" } else { "rand" });
            if !want(&op) {
                continue;
            }
            out.push(timed(&op, counts.io, |i| {
                if t.read_at(&data, &mut buf[..size], offsets[i])? != size {
                    bail!("{op}: a short read at {}", offsets[i]);
                }
                Ok(())
            })?);
        }
    }
    if want("read4k-small") {
        small_file_reads(t, &rw, counts, random, out)?;
    }
    let bytes = vec![0xa5_u8; 16 << 10];
    for (size, kb) in [(4096usize, 4), (16384, 16)] {
        let blocks = FILE_BYTES / size as u64;
        for sequential in [true, false] {
            let offsets: Vec<u64> = (0..counts.io)
                .map(|i| if sequential { i % blocks } else { random.below(blocks) } * size as u64)
                .collect();
            let op = format!("write{kb}k-{}", if sequential { "seq" } else { "rand" });
            if !want(&op) {
                continue;
            }
            out.push(timed(&op, counts.io, |i| {
                if t.write_at(&data, &bytes[..size], offsets[i])? != size {
                    bail!("{op}: a short write at {}", offsets[i]);
                }
                Ok(())
            })?);
        }
    }
    drop(data);
    if want("append16k") {
        let log = t.open_file(&rw, &name("log", 0)?, true)?;
        out.push(timed("append16k", counts.appends, |_| {
            if t.write_at(&log, &bytes, 0)? != bytes.len() {
                bail!("append16k: a short append");
            }
            Ok(())
        })?);
    }
    if want("append16k-posted") {
        // Each append is `write_buffered` (posted by a client: it returns
        // once queued), but the last, which waits: a client's waiting
        // write first reads the answers of the writes posted before it, so
        // the run's time covers every append's execution. Read its mean
        // (time over appends), not its median (a queueing's cost).
        let log = t.open_file(&rw, &name("log", 1)?, true)?;
        let last = counts.appends.saturating_sub(1) as usize;
        out.push(timed("append16k-posted", counts.appends, |i| {
            let n = if i == last { t.write_at(&log, &bytes, 0)? } else { t.write_buffered(&log, &bytes, 0)? };
            if n != bytes.len() {
                bail!("append16k-posted: a short append");
            }
            Ok(())
        })?);
    }
    Ok(())
}

/// Random 4 KiB reads of a 512 KiB file written and closed, then opened
/// read-only and read whole once (cached in the page cache, and in a
/// leased client's own cache).
fn small_file_reads<T: Target>(
    t: &T,
    dir: &T::Dir,
    counts: Counts,
    random: &mut Random,
    out: &mut Vec<Timed>,
) -> Result<()> {
    let small_name = name("small", 0)?;
    let writer = t.open_file(dir, &small_name, false)?;
    let chunk = vec![0x3c_u8; 64 << 10];
    for i in 0..SMALL_FILE_BYTES / chunk.len() as u64 {
        if t.write_at(&writer, &chunk, i * chunk.len() as u64)? != chunk.len() {
            bail!("short write while filling the small file");
        }
    }
    t.close(writer)?;
    let small = t.open_read(dir, &small_name)?;
    let mut buf = vec![0u8; 4096];
    for i in 0..SMALL_FILE_BYTES / 4096 {
        t.read_at(&small, &mut buf, i * 4096)?;
    }
    let offsets: Vec<u64> = (0..counts.io).map(|_| random.below(SMALL_FILE_BYTES / 4096) * 4096).collect();
    out.push(timed("read4k-small", counts.io, |i| {
        if t.read_at(&small, &mut buf, offsets[i])? != buf.len() {
            bail!("read4k-small: a short read at {}", offsets[i]);
        }
        Ok(())
    })?);
    t.close(small)
}

/// Stats, opens and listings in a directory of 1,000 empty files.
fn directory_ops<T: Target>(
    t: &T,
    counts: Counts,
    random: &mut Random,
    want: &dyn Fn(&str) -> bool,
    out: &mut Vec<Timed>,
) -> Result<()> {
    let st = t.mkdir("st")?;
    let names: Vec<CString> = (0..DIRECTORY_FILES as u64).map(|i| name("f", i)).collect::<Result<_>>()?;
    for n in &names {
        t.create(&st, n)?;
    }
    let picks: Vec<usize> = (0..counts.meta).map(|_| random.below(DIRECTORY_FILES as u64) as usize).collect();
    if want("stat") {
        out.push(timed("stat", counts.meta, |i| {
            std::hint::black_box(t.stat(&st, &names[picks[i]])?);
            Ok(())
        })?);
    }
    if want("open-close") {
        out.push(timed("open-close", counts.meta, |i| t.open_close(&st, &names[picks[i]]))?);
    }
    if want("listdir") {
        out.push(timed("listdir", counts.listings, |_| {
            let n = t.list(&st)?;
            if n != DIRECTORY_FILES {
                bail!("listdir: {n} entries, {DIRECTORY_FILES} expected");
            }
            Ok(())
        })?);
    }
    Ok(())
}

/// Creates, then renames of those files, then unlinks of the new names.
fn namespace_ops<T: Target>(t: &T, counts: Counts, out: &mut Vec<Timed>) -> Result<()> {
    let cr = t.mkdir("cr")?;
    let created: Vec<CString> = (0..counts.creates).map(|i| name("c", i)).collect::<Result<_>>()?;
    let renamed: Vec<CString> = (0..counts.creates).map(|i| name("r", i)).collect::<Result<_>>()?;
    out.push(timed("create", counts.creates, |i| t.create(&cr, &created[i]))?);
    out.push(timed("rename", counts.creates, |i| t.rename(&cr, &created[i], &renamed[i]))?);
    out.push(timed("unlink", counts.creates, |i| t.unlink(&cr, &renamed[i]))?);
    Ok(())
}

/// The zero-copy append: 16 KiB from a buffer in the client's data area
/// (`File::write_buffer`), filled once, against `append16k`'s copied
/// write (`File::write_at`: the bytes copied into the request record).
pub fn zero_copy_append(served: &super::targets::Served, counts: Counts) -> Result<Timed> {
    let dir = served.mkdir("zc")?;
    let file = served.open_file(&dir, &name("log", 0)?, true)?;
    let mut buffer = served.client.alloc_buffer(APPEND_BYTES)?;
    buffer.as_mut_slice().fill(0xa5);
    timed("append16k-zc", counts.appends, |_| {
        if file.write_buffer(&buffer, 0)? != APPEND_BYTES {
            bail!("append16k-zc: a short append");
        }
        Ok(())
    })
}
