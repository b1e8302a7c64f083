//! What a child process does: the data every engine sees (keys and values
//! derived from the seed, never stored up front), the timed phases, and the
//! JSON line it prints for the parent.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::engines::{self, Kv};
use crate::sys;

pub const KEY_BYTES: usize = 16;
pub const VALUE_BYTES: usize = 100;
pub const ENTRY_BYTES: u64 = (KEY_BYTES + VALUE_BYTES) as u64;
/// Values are 100-byte windows of this many pseudo-random bytes (incompressible).
const VALUE_POOL_BYTES: usize = 8192;

/// The splitmix64 finalizer: a bijection on u64 with good mixing.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Keys and values as functions of an entry's index and the seed, so every
/// engine and every phase sees the same data.
pub struct Data {
    seed: u64,
    pool: Vec<u8>,
}

impl Data {
    pub fn new(seed: u64) -> Data {
        let pool =
            (0..(VALUE_POOL_BYTES / 8) as u64).flat_map(|i| mix64(seed ^ 0x7661_6c75_6573 ^ (i << 20)).to_le_bytes());
        Data { seed, pool: pool.collect() }
    }

    /// The random key of entry `i`. Its first 8 bytes are a bijection of `i`,
    /// so the keys of distinct entries never collide.
    pub fn random_key(&self, i: u64) -> [u8; KEY_BYTES] {
        Self::key_in_namespace(self.seed, i)
    }

    /// A key that no entry has (another namespace of the same mixer).
    pub fn missing_key(&self, i: u64) -> [u8; KEY_BYTES] {
        Self::key_in_namespace(self.seed ^ 0x6d69_7373_696e_6721, i)
    }

    fn key_in_namespace(seed: u64, i: u64) -> [u8; KEY_BYTES] {
        let a = mix64(i.wrapping_add(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let b = mix64(a ^ 0x2545_f491_4f6c_dd1d);
        let mut key = [0u8; KEY_BYTES];
        key[..8].copy_from_slice(&a.to_be_bytes());
        key[8..].copy_from_slice(&b.to_be_bytes());
        key
    }

    /// The key of entry `i` of the sequential workload: a big-endian counter.
    pub fn sequential_key(i: u64) -> [u8; KEY_BYTES] {
        u128::from(i).to_be_bytes()
    }

    /// The value of entry `i` (both workloads).
    pub fn value(&self, i: u64) -> &[u8] {
        let offset = (mix64(i ^ self.seed.rotate_left(17)) % (VALUE_POOL_BYTES - VALUE_BYTES) as u64) as usize;
        &self.pool[offset..offset + VALUE_BYTES]
    }

    /// The `q`-th pseudo-random draw of stream `stream`, below `bound`.
    pub fn draw(&self, stream: u64, q: u64, bound: u64) -> u64 {
        mix64(mix64(self.seed ^ stream.wrapping_mul(0xd6e8_feb8_6659_fd93)) ^ q) % bound.max(1)
    }
}

/// Prefix length whose expected matches per scan (n / 256^len) is nearest,
/// on a log scale, to 50.
pub fn default_prefix_len(n: u64) -> usize {
    let expected = |len: i32| n as f64 / 256f64.powi(len);
    (1..=8)
        .min_by(|a, b| {
            let da = (expected(*a) / 50.0).ln().abs();
            let db = (expected(*b) / 50.0).ln().abs();
            da.total_cmp(&db)
        })
        .unwrap_or(2) as usize
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Random ingest, then (when asked) gets, missed gets and prefix scans.
    Random,
    /// Sequential ingest.
    Sequential,
    /// The physical ceiling: sequential overwrite of a written file + fdatasync.
    Disk,
}

/// What the parent asks one child to do (passed as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildSpec {
    pub engine: String,
    pub kind: Kind,
    pub dir: PathBuf,
    pub n: u64,
    pub batch: usize,
    pub memtable_bytes: u64,
    pub cache_bytes: u64,
    pub max_immutable_memtables: usize,
    pub background_threads: usize,
    pub bloom_bits_per_key: u32,
    pub seed: u64,
    /// Point gets of each kind (hits and misses) after a random ingest; 0 skips them.
    pub gets: u64,
    /// Prefix scans after a random ingest; 0 skips them.
    pub scans: u64,
    pub prefix_len: usize,
}

/// One timed phase of a child.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    /// Operations done: puts, gets or scans.
    pub ops: u64,
    pub secs: f64,
    /// CPU time of the thread that ran the phase, seconds (0 in results
    /// written before it was recorded): on a shared machine the wall
    /// clock also measures the neighbours, this the work's own cost.
    #[serde(default)]
    pub cpu_secs: f64,
    /// User bytes written (ingest) or entries read (scans).
    pub bytes: u64,
    pub entries: u64,
    /// Part of `secs` spent in the final flush/sync (ingest).
    pub flush_secs: f64,
    /// Wrong answers: missing hits, wrong values, found misses.
    pub errors: u64,
    pub vmhwm_kib: u64,
    pub rss_anon_kib: u64,
    /// Bytes the process wrote to storage during the phase (/proc/self/io).
    pub io_write_bytes: u64,
    /// The engine's own write amplification at the end of the phase, if it reports one.
    pub engine_wa: Option<f64>,
    /// Engine counters accumulated during the phase.
    pub counters: BTreeMap<String, f64>,
    /// Engine state at the end of the phase.
    pub gauges: BTreeMap<String, String>,
}

/// The JSON line a child prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    pub engine: String,
    pub kind: Option<Kind>,
    pub engine_info: String,
    pub phases: Vec<Phase>,
}

impl ChildResult {
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// Runs one child's work and prints its result as one JSON line.
pub fn run_child(spec_json: &str) -> Result<()> {
    let spec: ChildSpec = serde_json::from_str(spec_json).context("parsing the child spec")?;
    std::fs::create_dir_all(&spec.dir).with_context(|| format!("creating {}", spec.dir.display()))?;
    let result = match spec.kind {
        Kind::Disk => disk_ceiling(&spec)?,
        Kind::Random | Kind::Sequential => engine_phases(&spec)?,
    };
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// Counters and memory at the start of a phase, to close it with.
struct PhaseStart {
    at: Instant,
    cpu: f64,
    io: u64,
    counters: BTreeMap<String, f64>,
}

impl PhaseStart {
    fn new(engine: &mut dyn engines::Engine) -> PhaseStart {
        PhaseStart {
            at: Instant::now(),
            cpu: sys::thread_cpu_secs(),
            io: sys::io_write_bytes(),
            counters: engine.counters(),
        }
    }

    fn finish(self, engine: &mut dyn engines::Engine, name: &str, ops: u64) -> Phase {
        let secs = self.at.elapsed().as_secs_f64();
        let cpu_secs = sys::thread_cpu_secs() - self.cpu;
        let now = engine.counters();
        let counters = now.iter().map(|(k, v)| (k.clone(), v - self.counters.get(k).copied().unwrap_or(0.0))).collect();
        Phase {
            name: name.to_string(),
            ops,
            secs,
            cpu_secs,
            vmhwm_kib: sys::status_kib("VmHWM"),
            rss_anon_kib: sys::status_kib("RssAnon"),
            io_write_bytes: sys::io_write_bytes().saturating_sub(self.io),
            engine_wa: engine.write_amp(),
            counters,
            gauges: engine.gauges(),
            ..Phase::default()
        }
    }
}

fn engine_phases(spec: &ChildSpec) -> Result<ChildResult> {
    let mut engine = engines::open(spec)?;
    let data = Data::new(spec.seed);
    let mut result = ChildResult { engine: spec.engine.clone(), kind: Some(spec.kind), ..ChildResult::default() };
    result.engine_info = engine.describe();

    // Ingest, timed up to and including the engine's flush to disk.
    let start = PhaseStart::new(&mut *engine);
    let mut batch: Vec<Kv> = Vec::with_capacity(spec.batch);
    let mut i = 0;
    while i < spec.n {
        let end = (i + spec.batch as u64).min(spec.n);
        batch.clear();
        for j in i..end {
            let key = if spec.kind == Kind::Random { data.random_key(j) } else { Data::sequential_key(j) };
            batch.push(Kv { key, value: data.value(j) });
        }
        engine.write(&batch).with_context(|| format!("writing entries {i}..{end}"))?;
        i = end;
    }
    let flush_start = Instant::now();
    engine.finish_ingest().context("final flush")?;
    let flush_secs = flush_start.elapsed().as_secs_f64();
    let mut ingest = start.finish(&mut *engine, "ingest", spec.n);
    ingest.bytes = spec.n * ENTRY_BYTES;
    ingest.flush_secs = flush_secs;
    result.phases.push(ingest);

    if spec.kind == Kind::Random && spec.gets > 0 {
        let mut value = Vec::with_capacity(VALUE_BYTES * 2);
        let start = PhaseStart::new(&mut *engine);
        let mut errors = 0;
        for q in 0..spec.gets {
            let j = data.draw(1, q, spec.n);
            let found = engine.get(&data.random_key(j), &mut value)?;
            if !found || value != data.value(j) {
                errors += 1;
            }
        }
        let mut hits = start.finish(&mut *engine, "gets", spec.gets);
        hits.errors = errors;
        result.phases.push(hits);

        let start = PhaseStart::new(&mut *engine);
        let mut errors = 0;
        for q in 0..spec.gets {
            if engine.get(&data.missing_key(q), &mut value)? {
                errors += 1;
            }
        }
        let mut misses = start.finish(&mut *engine, "misses", spec.gets);
        misses.errors = errors;
        result.phases.push(misses);
    }

    if spec.kind == Kind::Random && spec.scans > 0 {
        let start = PhaseStart::new(&mut *engine);
        let (mut entries, mut bytes) = (0, 0);
        for q in 0..spec.scans {
            let prefix = &data.draw(2, q, u64::MAX).to_be_bytes()[..spec.prefix_len.min(8)];
            let (e, b) = engine.scan_prefix(prefix)?;
            entries += e;
            bytes += b;
        }
        let mut scans = start.finish(&mut *engine, "scans", spec.scans);
        scans.entries = entries;
        scans.bytes = bytes;
        result.phases.push(scans);
    }

    engine.close()?;
    Ok(result)
}

/// Writes n * 116 bytes to a file, syncs it, then times writing the same
/// bytes over it again followed by fdatasync: what the disk can take.
fn disk_ceiling(spec: &ChildSpec) -> Result<ChildResult> {
    let total = spec.n * ENTRY_BYTES;
    let path = spec.dir.join("ceiling");
    let file = File::options().create(true).truncate(false).read(true).write(true).open(&path)?;
    let chunk: Vec<u8> = (0..(1u64 << 17)).flat_map(|i| mix64(spec.seed ^ i).to_le_bytes()).collect();
    let write_all = |file: &File| -> Result<()> {
        let mut offset = 0;
        while offset < total {
            let len = (total - offset).min(chunk.len() as u64) as usize;
            file.write_all_at(&chunk[..len], offset)?;
            offset += len as u64;
        }
        file.sync_data()?;
        Ok(())
    };
    write_all(&file).context("first write of the ceiling file")?;
    let io = sys::io_write_bytes();
    let at = Instant::now();
    write_all(&file).context("overwrite of the ceiling file")?;
    let secs = at.elapsed().as_secs_f64();
    let phase = Phase {
        name: "ingest".to_string(),
        ops: spec.n,
        secs,
        bytes: total,
        flush_secs: secs,
        vmhwm_kib: sys::status_kib("VmHWM"),
        rss_anon_kib: sys::status_kib("RssAnon"),
        io_write_bytes: sys::io_write_bytes().saturating_sub(io),
        engine_wa: Some(1.0),
        ..Phase::default()
    };
    Ok(ChildResult {
        engine: "disk".to_string(),
        kind: Some(Kind::Disk),
        engine_info: "sequential overwrite of an already-written file in 1 MiB pwrites, then fdatasync".to_string(),
        phases: vec![phase],
    })
}
