//! uFS's uncached ("on-disk") and shared-file single operations:
//!
//! - `read4k-cold-seq`, `read4k-cold-rand`, `write4k-cold-rand`: 4 KiB
//!   reads or overwrites of a 16 MiB file nobody has cached. Before each
//!   kind the peer is shut (the store closed: the server stopped, the
//!   mount unmounted, the embedded store closed), the machine's caches are
//!   dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`), and the peer
//!   opened again; each block is then touched once (in order, or in a
//!   random permutation), so every call finds it uncached.
//! - `read4k-shared`, `write4k-shared`: two clients (two connections to
//!   the server; two descriptors of the file on ext4 and the mount; two
//!   threads on one embedded store), each doing random 4 KiB reads or
//!   writes of one cached 16 MiB file at once; and `read4k-private2`,
//!   `write4k-private2`: the same with a file each. The timing is of both
//!   together: the wall time over the operations of both.

use std::ffi::CString;
use std::time::Instant;

use anyhow::{bail, Result};

use super::ops::{Counts, Random, Timed, FILE_BYTES};
use super::targets::Target;

/// The uncached operations.
pub const COLD_OPS: [&str; 3] = ["read4k-cold-seq", "read4k-cold-rand", "write4k-cold-rand"];
/// The two-client operations.
pub const SHARED_OPS: [&str; 4] = ["read4k-shared", "write4k-shared", "read4k-private2", "write4k-private2"];

const BLOCK: usize = 4096;

/// A peer that can be shut and opened again on the same store (or
/// directory), so that nothing of it stays cached in its own memory.
pub trait Reopen {
    /// The peer's target.
    type T: Target;
    /// Opens the peer (the first call makes its base directory).
    fn open(&mut self) -> Result<Self::T>;
    /// Shuts it: everything written is durable, nothing of it stays in
    /// this process's or a server's memory.
    fn shut(&mut self, target: Self::T) -> Result<()>;
}

fn file_name() -> Result<CString> {
    Ok(CString::new("data")?)
}

/// Writes the file the uncached operations use, then times each of
/// `wanted`'s uncached operations on a peer opened after the caches were
/// dropped.
pub fn cold_ops<R: Reopen>(
    peer: &mut R,
    counts: Counts,
    seed: u64,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<Timed>> {
    let mut out = Vec::new();
    if !COLD_OPS.iter().any(|op| wanted(op)) {
        return Ok(out);
    }
    let t = peer.open()?;
    let dir = t.mkdir("cold")?;
    let file = t.open_file(&dir, &file_name()?, false)?;
    let chunk = vec![0x5a_u8; 1 << 20];
    for i in 0..FILE_BYTES / chunk.len() as u64 {
        if t.write_at(&file, &chunk, i * chunk.len() as u64)? != chunk.len() {
            bail!("a short write while filling the uncached file");
        }
    }
    t.sync_file(&file)?;
    t.close(file)?;
    t.sync_all()?;
    drop(dir);
    peer.shut(t)?;
    let blocks = FILE_BYTES / BLOCK as u64;
    let ops = counts.io.min(blocks);
    let mut random = Random::new(seed ^ 0xc01d);
    for op in COLD_OPS {
        if !wanted(op) {
            continue;
        }
        let offsets: Vec<u64> = if op == "read4k-cold-seq" {
            (0..ops).map(|b| b * BLOCK as u64).collect()
        } else {
            permutation(blocks, &mut random).into_iter().take(ops as usize).map(|b| b * BLOCK as u64).collect()
        };
        crate::fs_suite::drop_caches()?;
        let t = peer.open()?;
        let dir = t.open_dir("cold")?;
        let file = t.open_file(&dir, &file_name()?, false)?;
        let mut buf = vec![0u8; BLOCK];
        let bytes = vec![0xa5_u8; BLOCK];
        let timing = timed_each(op, &offsets, |offset| {
            let n = if op.starts_with("read") {
                t.read_at(&file, &mut buf, offset)?
            } else {
                t.write_at(&file, &bytes, offset)?
            };
            if n != BLOCK {
                bail!("{op}: {n} bytes at {offset}, {BLOCK} expected");
            }
            Ok(())
        })?;
        out.push(timing);
        t.close(file)?;
        drop(dir);
        peer.shut(t)?;
    }
    Ok(out)
}

/// The numbers 0..n in a random order (Fisher-Yates).
pub fn permutation(n: u64, random: &mut Random) -> Vec<u64> {
    let mut all: Vec<u64> = (0..n).collect();
    for i in (1..all.len()).rev() {
        let j = random.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    all
}

/// Times `body` once per offset.
fn timed_each(op: &str, offsets: &[u64], mut body: impl FnMut(u64) -> Result<()>) -> Result<Timed> {
    let mut latencies = Vec::with_capacity(offsets.len());
    let start = Instant::now();
    for &offset in offsets {
        let one = Instant::now();
        body(offset)?;
        latencies.push(one.elapsed().as_nanos() as u64);
    }
    Ok(summary(op, latencies, start.elapsed().as_secs_f64()))
}

fn summary(op: &str, mut latencies: Vec<u64>, secs: f64) -> Timed {
    latencies.sort_unstable();
    let at = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
    Timed { op: op.to_string(), ops: latencies.len() as u64, secs, p50_ns: at(0.5), p99_ns: at(0.99) }
}

/// The two-client operations of `wanted`: `first` and `second` are the
/// two clients (they may be one target for a peer without clients, the
/// embedded store); each is used by a thread of its own.
pub fn shared_ops<T: Target + Sync>(
    first: &T,
    second: &T,
    counts: Counts,
    seed: u64,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<Timed>> {
    let mut out = Vec::new();
    if !SHARED_OPS.iter().any(|op| wanted(op)) {
        return Ok(out);
    }
    let dir = first.mkdir("two")?;
    let names = [CString::new("shared")?, CString::new("own0")?, CString::new("own1")?];
    let chunk = vec![0x5a_u8; 1 << 20];
    for name in &names {
        let file = first.open_file(&dir, name, false)?;
        for i in 0..FILE_BYTES / chunk.len() as u64 {
            if first.write_at(&file, &chunk, i * chunk.len() as u64)? != chunk.len() {
                bail!("a short write while filling a two-client file");
            }
        }
        first.close(file)?;
    }
    drop(dir);
    let blocks = FILE_BYTES / BLOCK as u64;
    for (i, op) in SHARED_OPS.into_iter().enumerate() {
        if !wanted(op) {
            continue;
        }
        let write = op.starts_with("write");
        let shared = op.contains("shared");
        let start = std::sync::Barrier::new(2);
        let run = |client: usize, target: &T| -> Result<(Vec<u64>, Instant, Instant)> {
            let dir = target.open_dir("two")?;
            let name = if shared { &names[0] } else { &names[1 + client] };
            let file = target.open_file(&dir, name, false)?;
            let mut buf = vec![0u8; BLOCK];
            // Read once first, so the reads find it cached.
            for b in 0..blocks {
                target.read_at(&file, &mut buf, b * BLOCK as u64)?;
            }
            let bytes = vec![0xa5_u8 ^ client as u8; BLOCK];
            let mut random = Random::new(seed.wrapping_add((i * 2 + client) as u64 * 7919));
            let offsets: Vec<u64> = (0..counts.io).map(|_| random.below(blocks) * BLOCK as u64).collect();
            let mut latencies = Vec::with_capacity(offsets.len());
            start.wait();
            let began = Instant::now();
            for offset in offsets {
                let one = Instant::now();
                let n = if write {
                    target.write_at(&file, &bytes, offset)?
                } else {
                    target.read_at(&file, &mut buf, offset)?
                };
                if n != BLOCK {
                    bail!("{op}: {n} bytes at {offset}, {BLOCK} expected");
                }
                latencies.push(one.elapsed().as_nanos() as u64);
            }
            let ended = Instant::now();
            target.close(file)?;
            Ok((latencies, began, ended))
        };
        let (a, b) = std::thread::scope(|scope| {
            let one = scope.spawn(|| run(0, first));
            let two = run(1, second);
            (one.join(), two)
        });
        let a = match a {
            Ok(r) => r?,
            Err(_) => bail!("{op}: the first client's thread panicked"),
        };
        let b = b?;
        let secs = a.2.max(b.2).duration_since(a.1.min(b.1)).as_secs_f64();
        let mut latencies = a.0;
        latencies.extend(b.0);
        out.push(summary(op, latencies, secs));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permutation_holds_every_block_once() {
        let mut random = Random::new(9);
        let mut p = permutation(1000, &mut random);
        assert_ne!(p, (0..1000).collect::<Vec<u64>>(), "shuffled");
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<u64>>());
    }
}
