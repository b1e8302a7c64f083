//! The lookup workloads of issue 24, item 1: random lookups over `--files`
//! names in one directory, with the native API (Larder: `Fs::lookup`;
//! ext4 and XFS: `statat(2)` of the name relative to the open directory).
//!
//! - `stat-warm`: after the creates, an untimed pass looks every name up
//!   once (both sides), then the random lookups are timed. Larder's
//!   metadata-cache budget is `--meta-cache-mb` (sized to hold the names);
//!   the child reports its budget, occupancy and hit counts, and on every
//!   engine the kernel's dentry and ext4 inode caches from /proc/slabinfo
//!   (active objects x object size) before the creates and after the
//!   timed lookups. Before the timed part Larder waits until its
//!   containers stop growing (a spare is made in the background after
//!   many creates; ext4 made its inode tables at mkfs).
//! - `stat-cold`: a prepare child creates the files and closes (Larder:
//!   the store closed; ext4: syncfs); the parent then syncs, unmounts the
//!   image, drops the page cache and mounts it again (for every engine, so
//!   Larder's store is as cold as ext4); a measure child then opens the
//!   store (Larder; the open is timed and reported apart) or the directory
//!   (ext4) and times the random lookups. The parent keeps the image.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::time::Instant;

use anyhow::{bail, Result};

use super::{create_timed, name, picks, syncfs, FsSpec};

/// What a lookup child measured: operations, their seconds, and named
/// figures the report lists beside the rates.
pub(crate) struct Measured {
    pub(crate) ops: u64,
    pub(crate) secs: f64,
    pub(crate) details: BTreeMap<String, f64>,
}

/// Runs a lookup workload's child (`stat-warm`, `stat-cold-prepare`,
/// `stat-cold`) for `spec.engine`.
pub(crate) fn child(spec: &FsSpec, workload: &str) -> Result<Measured> {
    match spec.engine.as_str() {
        "larder" => larder(spec, workload),
        "ext4" | "xfs" => native(spec, workload),
        e => bail!("no lookup workload for engine {e}"),
    }
}

const MIB: f64 = (1 << 20) as f64;

/// Larder's options for the lookup workloads: the store's defaults with
/// the metadata-cache budget of `--meta-cache-mb` when given.
fn larder_options(spec: &FsSpec) -> larder_fs::FsOptions {
    let mut o = larder_fs::FsOptions::default();
    if let Some(mb) = spec.meta_cache_mb {
        o.store.meta_cache_bytes = mb << 20;
    }
    o
}

fn larder(spec: &FsSpec, workload: &str) -> Result<Measured> {
    use larder_fs::{Cred, Fs};
    let mut details = BTreeMap::new();
    if workload == "stat-warm" {
        slab_details(&mut details, "before");
    }
    let options = larder_options(spec);
    details.insert("meta_cache_budget_mib".to_string(), options.store.meta_cache_bytes as f64 / MIB);
    let r = Cred::root();
    let names: Vec<String> = (0..spec.files).map(name).collect();
    let store = spec.dir.join("store");
    let (fs, d) = if workload == "stat-cold" {
        let start = Instant::now();
        let fs = Fs::open(&store, options)?;
        details.insert("open_secs".to_string(), start.elapsed().as_secs_f64());
        let d = fs.lookup(&r, fs.root(), b"d")?.ino;
        wait_for_containers_to_settle(&fs)?;
        (fs, d)
    } else {
        let fs = Fs::create(&store, options)?;
        let d = fs.mkdir(&r, fs.root(), b"d", 0o755)?.ino;
        fs.sync()?;
        let create_secs = create_timed(&fs, &r, d, &names)?;
        if workload == "stat-cold-prepare" {
            fs.close()?;
            return Ok(Measured { ops: spec.files, secs: create_secs, details });
        }
        for n in &names {
            std::hint::black_box(fs.lookup(&r, d, n.as_bytes())?.size);
        }
        wait_for_containers_to_settle(&fs)?;
        (fs, d)
    };
    let picks = picks(spec.seed, spec.files, spec.stats);
    let (hits_before, misses_before, _) = fs.store().meta_cache_stats();
    let (start, cpu_start) = (Instant::now(), crate::sys::thread_cpu_secs());
    for &i in &picks {
        let a = fs.lookup(&r, d, names[i as usize].as_bytes())?;
        std::hint::black_box(a.size);
    }
    let secs = start.elapsed().as_secs_f64();
    // The lookups' CPU time, beside the wall time: on a busy machine the
    // wall time counts the turns other processes had too.
    details.insert("lookup_cpu_ns".to_string(), (crate::sys::thread_cpu_secs() - cpu_start) * 1e9 / picks.len() as f64);
    let (hits, misses, bytes) = fs.store().meta_cache_stats();
    details.insert("meta_cache_mib".to_string(), bytes as f64 / MIB);
    details.insert("meta_cache_hits".to_string(), (hits - hits_before) as f64);
    details.insert("meta_cache_misses".to_string(), (misses - misses_before) as f64);
    if workload == "stat-warm" {
        slab_details(&mut details, "after");
    }
    drop(fs);
    Ok(Measured { ops: spec.stats, secs, details })
}

/// Waits until the store's containers stop growing (one second without a
/// change, at most two minutes): after many creates, or an open, the
/// store makes its next spare (a container, or the growth of one) in the
/// background, disk and CPU work that belongs to making the store (ext4
/// made its inode tables at mkfs), not to the lookups timed next.
fn wait_for_containers_to_settle(fs: &larder_fs::Fs) -> Result<()> {
    let space = fs.store().space();
    let size = || {
        let s = space.stats();
        (s.containers, s.bytes_total, s.spare_containers)
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    let (mut last, mut since) = (size(), Instant::now());
    while since.elapsed() < std::time::Duration::from_secs(1) && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = size();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    Ok(())
}

fn native(spec: &FsSpec, workload: &str) -> Result<Measured> {
    let mut details = BTreeMap::new();
    let d = spec.dir.join("d");
    let names: Vec<CString> = (0..spec.files).map(|i| CString::new(name(i))).collect::<Result<_, _>>()?;
    if workload != "stat-cold" {
        if workload == "stat-warm" {
            slab_details(&mut details, "before");
        }
        std::fs::create_dir(&d)?;
        let start = Instant::now();
        let dir = std::fs::File::open(&d)?;
        for n in &names {
            let flags = rustix::fs::OFlags::CREATE | rustix::fs::OFlags::EXCL | rustix::fs::OFlags::WRONLY;
            drop(rustix::fs::openat(&dir, n.as_c_str(), flags, rustix::fs::Mode::from_raw_mode(0o644))?);
        }
        syncfs(&d)?;
        let create_secs = start.elapsed().as_secs_f64();
        if workload == "stat-cold-prepare" {
            return Ok(Measured { ops: spec.files, secs: create_secs, details });
        }
        for n in &names {
            let st = rustix::fs::statat(&dir, n.as_c_str(), rustix::fs::AtFlags::empty())?;
            std::hint::black_box(st.st_size);
        }
    }
    let dir = std::fs::File::open(&d)?;
    let picks = picks(spec.seed, spec.files, spec.stats);
    let (start, cpu_start) = (Instant::now(), crate::sys::thread_cpu_secs());
    for &i in &picks {
        let st = rustix::fs::statat(&dir, names[i as usize].as_c_str(), rustix::fs::AtFlags::empty())?;
        std::hint::black_box(st.st_size);
    }
    let secs = start.elapsed().as_secs_f64();
    details.insert("lookup_cpu_ns".to_string(), (crate::sys::thread_cpu_secs() - cpu_start) * 1e9 / picks.len() as f64);
    if workload == "stat-warm" {
        slab_details(&mut details, "after");
    }
    Ok(Measured { ops: spec.stats, secs, details })
}

/// The kernel caches that hold what a warm `statat` reads: (slab name,
/// the name its figure gets in the report).
const SLABS: [(&str, &str); 2] = [("dentry", "dentry"), ("ext4_inode_cache", "ext4_inode")];

/// Adds the slab caches' sizes (MiB of active objects) at `when`.
fn slab_details(details: &mut BTreeMap<String, f64>, when: &str) {
    let text = std::fs::read_to_string("/proc/slabinfo").unwrap_or_default();
    for (slab, label) in SLABS {
        if let Some(bytes) = slab_bytes(&text, slab) {
            details.insert(format!("slab_{label}_mib_{when}"), bytes as f64 / MIB);
        }
    }
}

/// Bytes of the active objects of cache `slab` in /proc/slabinfo's text
/// (version 2.1: name, active objects, objects, object size, ...).
pub(crate) fn slab_bytes(slabinfo: &str, slab: &str) -> Option<u64> {
    slabinfo.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? != slab {
            return None;
        }
        let active: u64 = fields.next()?.parse().ok()?;
        let _total = fields.next()?;
        let size: u64 = fields.next()?.parse().ok()?;
        Some(active * size)
    })
}

/// Writes dirty pages, then drops the page cache, dentries and inodes of
/// the whole machine (needs root).
pub(crate) fn drop_caches() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3")?;
    Ok(())
}
