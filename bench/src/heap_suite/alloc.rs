//! The allocator workload in a child: the peer programs of bench/peers
//! (bench/peers/alloc_common.h says the steps) or Larder's `alloc_in` /
//! `free_in` doing the same steps with the same draws ([`draw`], [`slot`],
//! [`block_size`] are alloc_common.h's functions).

use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::child::{self, field, json_line, run_program};
use super::{HeapPhase, HeapResult, HeapSpec};
use crate::workload::mix64;

/// Smallest block, bytes.
pub const MIN_BLOCK: u64 = 16;
/// Largest block, bytes.
pub const MAX_BLOCK: u64 = 4096;
/// Draws of the fill phase are apart from the timed phase's.
pub const FILL_SALT: u64 = 1 << 40;

/// The draw of operation `op` of thread `thread` (alloc_common.h: peer_draw).
#[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
pub fn draw(seed: u64, thread: u64, op: u64) -> u64 {
    mix64(seed ^ (thread << 48) ^ op ^ 0x61_6c6c_6f63)
}

/// The slot a draw frees and refills.
#[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
pub fn slot(draw: u64, slots: u64) -> u64 {
    draw % slots
}

/// The block size of a draw, in [MIN_BLOCK, MAX_BLOCK].
#[cfg_attr(not(feature = "larder-heap"), allow(dead_code))] // Larder's side uses it.
pub fn block_size(draw: u64) -> u64 {
    MIN_BLOCK + (draw >> 32) % (MAX_BLOCK - MIN_BLOCK + 1)
}

/// The bytes a fixed-size peer (Boost's file, SPHDE's heap, libpmemobj's
/// pool) is given: the expected live bytes and half again, plus 8 MiB.
pub fn capacity(live: u64) -> u64 {
    let mean = (MIN_BLOCK + MAX_BLOCK) / 2;
    live * mean * 3 / 2 + (8 << 20)
}

/// Runs the allocator case of `spec.engine`.
pub fn run(spec: &HeapSpec) -> Result<HeapResult> {
    let (program, mode, target) = match spec.engine.as_str() {
        "boost" => ("alloc_boost", "default", spec.dir.join("boost.heap")),
        "sphde" => ("alloc_sphde", "default", spec.dir.join("sphde-store")),
        "pmemobj" => ("alloc_pmemobj", "atomic", spec.dir.join("pmemobj.pool")),
        "pmemobj-tx" => ("alloc_pmemobj", "tx", spec.dir.join("pmemobj.pool")),
        "fdatasync" => return ceiling(spec),
        #[cfg(feature = "larder-heap")]
        "larder" => return super::larder::alloc(spec),
        other => bail!("{other} does not run the allocator workload"),
    };
    if spec.engine == "sphde" {
        std::fs::create_dir_all(&target)?;
    }
    let args: Vec<String> = vec![
        target.to_string_lossy().into_owned(),
        spec.ops.to_string(),
        spec.live.to_string(),
        spec.threads.to_string(),
        spec.seed.to_string(),
        capacity(spec.live).to_string(),
        mode.to_string(),
    ];
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run_program(&spec.peers.join(program), &arg_refs)?;
    let v = json_line(&ran.stdout)?;
    let extra = |names: &[&str]| -> Result<Vec<(String, f64)>> {
        names.iter().map(|n| Ok((n.to_string(), field(&v, n)?))).collect()
    };
    let mut figures: std::collections::BTreeMap<String, f64> = extra(&[
        "live_bytes",
        "live_blocks",
        "file_apparent_bytes",
        "file_allocated_bytes",
        "fill_secs",
        "setup_secs",
    ])?
    .into_iter()
    .collect();
    figures.insert("threads".to_string(), spec.threads as f64);
    let phase = HeapPhase {
        name: "alloc".to_string(),
        ops: field(&v, "ops")? as u64,
        secs: field(&v, "secs")?,
        bytes: field(&v, "live_bytes")? as u64,
        vmhwm_kib: field(&v, "vmhwm_kib")? as u64,
        extra: figures,
    };
    let info = match spec.engine.as_str() {
        "boost" => format!(
            "Boost.Interprocess {} managed_mapped_file (default rbtree best-fit allocator, its mutex), \
             a file of {} MiB made at start",
            child::package_version("libboost-dev"),
            capacity(spec.live) >> 20
        ),
        "sphde" => format!(
            "SPHDE {} SASSimpleHeapAlloc/Free (locking) on one SAS simple heap of {} MiB (rounded up to a power of two)",
            child::package_version("libsphde-dev"),
            capacity(spec.live) >> 20
        ),
        e => format!(
            "libpmemobj {} on a plain file (not pmem: each durable step is an msync), pool of {} MiB, {}",
            child::package_version("libpmemobj-dev"),
            capacity(spec.live) >> 20,
            if e == "pmemobj" { "pmemobj_alloc/pmemobj_free" } else { "one transaction per op: pmemobj_tx_free + pmemobj_tx_alloc" }
        ),
    };
    Ok(child::result(spec, info, vec![phase]))
}

/// Bytes the ceiling writes per operation: one page, the least a durable
/// record costs on a 4 KiB-sector device.
pub const CEILING_WRITE_BYTES: usize = 4096;

/// The durable case's ceiling: what any durable operation must at least do
/// on this disk, one write and one device flush (a 4 KiB overwrite of an
/// already-written, already-synced file at sequential offsets, then
/// fdatasync, which on ext4 flushes the device and commits no metadata).
fn ceiling(spec: &HeapSpec) -> Result<HeapResult> {
    use std::os::unix::fs::FileExt;
    if !spec.durable {
        bail!("the fdatasync ceiling is only for the durable case");
    }
    let path = spec.dir.join("ceiling");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let page = |i: u64| -> Vec<u8> { (0..CEILING_WRITE_BYTES).map(|b| mix64(i ^ b as u64) as u8).collect() };
    // Written and synced whole first, so the timed writes allocate nothing
    // and change no metadata.
    for i in 0..spec.ops {
        file.write_all_at(&page(i), i * CEILING_WRITE_BYTES as u64)?;
    }
    file.sync_all().with_context(|| format!("syncing {}", path.display()))?;
    let pages: Vec<Vec<u8>> = (0..spec.ops).map(|i| page(i ^ FILL_SALT)).collect();
    let start = Instant::now();
    for (i, bytes) in pages.iter().enumerate() {
        file.write_all_at(bytes, i as u64 * CEILING_WRITE_BYTES as u64)?;
        file.sync_data()?;
    }
    let secs = start.elapsed().as_secs_f64();
    let phase = HeapPhase {
        name: "alloc".to_string(),
        ops: spec.ops,
        secs,
        bytes: spec.ops * CEILING_WRITE_BYTES as u64,
        vmhwm_kib: crate::sys::status_kib("VmHWM"),
        extra: [("threads".to_string(), 1.0)].into_iter().collect(),
    };
    let info = format!(
        "ceiling: a {CEILING_WRITE_BYTES} B overwrite of an already-written file at sequential offsets + fdatasync \
         per op ({}): one write and one device flush, the least a durable operation does",
        crate::sys::filesystem_of(&spec.dir)
    );
    Ok(child::result(spec, info, vec![phase]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_in_range_and_cover_it() {
        let sizes: Vec<u64> = (0..100_000).map(|i| block_size(draw(42, 0, i))).collect();
        assert!(sizes.iter().all(|s| (MIN_BLOCK..=MAX_BLOCK).contains(s)));
        assert!(sizes.iter().any(|&s| s < 64) && sizes.iter().any(|&s| s > 4000));
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((mean - 2056.0).abs() < 30.0, "{mean}");
    }

    #[test]
    fn draws_match_the_c_peers() {
        // Printed by bench/peers/common.h's peer_draw(42, 1, 7), peer_size and
        // peer_slot(.., 1000), compiled with cc: the C and Rust sides must draw alike.
        let d = draw(42, 1, 7);
        assert_eq!(d, 2_914_721_849_736_731_493);
        assert_eq!(block_size(d), 3009);
        assert_eq!(slot(d, 1000), 493);
    }
}
