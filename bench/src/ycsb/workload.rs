//! YCSB's core workloads and what one child does: load the records, then
//! run its workloads in order, timing every operation.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::generators::{key_name, scan_length, InsertCounter, KeyChooser, Rng, ScrambledZipfian, SkewedLatest};
use super::stores::{self, RecordStore};
use super::YcsbSpec;
use crate::sys;

/// Records per batch of the load phase.
pub const LOAD_BATCH: u64 = 1000;

/// The operations of the core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// Where a workload's reads, updates and scans go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Scrambled zipfian (YCSB's `requestdistribution=zipfian`).
    Zipfian,
    /// Skewed towards the latest insert (`requestdistribution=latest`).
    Latest,
}

/// One core workload: its operation mix (proportions summing to 1) and
/// request distribution, as in YCSB's `workloads/workload[a-f]` files.
#[derive(Clone, Debug)]
pub struct Workload {
    pub letter: char,
    pub title: &'static str,
    pub mix: &'static [(Op, f64)],
    pub distribution: Distribution,
}

/// The six core workloads, in YCSB's recommended order (D and E insert,
/// so they come last; E on a fresh load).
pub const CORE: [Workload; 6] = [
    Workload {
        letter: 'a',
        title: "A: update heavy (50% read, 50% update)",
        mix: &[(Op::Read, 0.5), (Op::Update, 0.5)],
        distribution: Distribution::Zipfian,
    },
    Workload {
        letter: 'b',
        title: "B: read mostly (95% read, 5% update)",
        mix: &[(Op::Read, 0.95), (Op::Update, 0.05)],
        distribution: Distribution::Zipfian,
    },
    Workload { letter: 'c', title: "C: read only", mix: &[(Op::Read, 1.0)], distribution: Distribution::Zipfian },
    Workload {
        letter: 'f',
        title: "F: read-modify-write (50% read, 50% RMW)",
        mix: &[(Op::Read, 0.5), (Op::ReadModifyWrite, 0.5)],
        distribution: Distribution::Zipfian,
    },
    Workload {
        letter: 'd',
        title: "D: read latest (95% read, 5% insert)",
        mix: &[(Op::Read, 0.95), (Op::Insert, 0.05)],
        distribution: Distribution::Latest,
    },
    Workload {
        letter: 'e',
        title: "E: short ranges (95% scan of 1-100, 5% insert)",
        mix: &[(Op::Scan, 0.95), (Op::Insert, 0.05)],
        distribution: Distribution::Zipfian,
    },
];

/// The core workload named by `letter`.
pub fn by_letter(letter: char) -> Option<&'static Workload> {
    CORE.iter().find(|w| w.letter == letter)
}

impl Workload {
    /// The share of inserts in the mix.
    fn insert_proportion(&self) -> f64 {
        self.mix.iter().filter(|(op, _)| *op == Op::Insert).map(|(_, p)| p).sum()
    }

    /// The operation for a uniform draw `u` in [0, 1).
    fn pick(&self, u: f64) -> Op {
        let mut acc = 0.0;
        for (op, p) in self.mix {
            acc += p;
            if u < acc {
                return *op;
            }
        }
        self.mix.last().map_or(Op::Read, |(op, _)| *op)
    }
}

/// Latencies of one operation type in one workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// From the operations' durations in nanoseconds (sorted here).
    pub fn of(nanos: &mut [u64]) -> Latency {
        if nanos.is_empty() {
            return Latency::default();
        }
        nanos.sort_unstable();
        let at = |q: f64| nanos[((nanos.len() as f64 * q).ceil() as usize).clamp(1, nanos.len()) - 1] as f64 / 1e3;
        Latency { count: nanos.len() as u64, p50_us: at(0.50), p99_us: at(0.99), max_us: at(1.0) }
    }
}

/// One timed phase: the load or a workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PhaseResult {
    /// `load` or the workload's letter.
    pub name: String,
    pub ops: u64,
    pub secs: f64,
    /// Over every operation of the phase.
    pub latency: Latency,
    /// Per operation type.
    pub by_op: BTreeMap<String, Latency>,
    /// Records read by scans.
    pub scanned: u64,
    /// Reads that found nothing or a value of the wrong size.
    pub errors: u64,
    /// CPU seconds of the client thread over the phase (the engine's work
    /// on the caller's thread, and the suite's own per-operation work).
    #[serde(default)]
    pub client_cpu_secs: f64,
    /// CPU seconds of the whole process over the phase (with the engine's
    /// background threads): against the client's, what competed with it.
    #[serde(default)]
    pub process_cpu_secs: f64,
}

impl PhaseResult {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs
    }

    /// Operations per CPU-second of the client thread (0 when not measured).
    pub fn ops_per_client_cpu_sec(&self) -> f64 {
        if self.client_cpu_secs > 0.0 {
            self.ops as f64 / self.client_cpu_secs
        } else {
            0.0
        }
    }
}

/// The JSON line a child prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    pub engine: String,
    pub engine_info: String,
    pub phases: Vec<PhaseResult>,
    /// The child's peak resident memory (VmHWM), KiB.
    pub vmhwm_kib: u64,
    /// Bytes the child wrote to storage (/proc/self/io).
    pub io_write_bytes: u64,
}

/// Values: `value_bytes` windows of a pool of pseudo-random bytes.
struct Values {
    pool: Vec<u8>,
    len: usize,
}

impl Values {
    fn new(len: usize, rng: &mut Rng) -> Values {
        let pool = (0..len + 8192).map(|_| rng.next_u64() as u8).collect();
        Values { pool, len }
    }

    fn next(&self, rng: &mut Rng) -> &[u8] {
        let offset = (rng.next_u64() % (self.pool.len() - self.len) as u64) as usize;
        &self.pool[offset..offset + self.len]
    }
}

/// Runs one child: open, load, the workloads of the spec in order, close.
pub fn run_child(spec_json: &str) -> Result<()> {
    let spec: YcsbSpec = serde_json::from_str(spec_json).context("parsing the child spec")?;
    std::fs::create_dir_all(&spec.dir).with_context(|| format!("creating {}", spec.dir.display()))?;
    let io_start = sys::io_write_bytes();
    let mut store = stores::open(&spec)?;
    let mut result = ChildResult { engine: spec.engine.clone(), engine_info: store.describe(), ..Default::default() };
    let mut rng = Rng::new(spec.seed);
    let values = Values::new(spec.value_bytes, &mut rng);

    // Load: records 0..N in record order (keys in hash order), in batches.
    let mut nanos = Vec::with_capacity(spec.records.div_ceil(LOAD_BATCH) as usize);
    let start = Instant::now();
    let mut batch: Vec<(String, &[u8])> = Vec::with_capacity(LOAD_BATCH as usize);
    let mut keynum = 0;
    while keynum < spec.records {
        let end = (keynum + LOAD_BATCH).min(spec.records);
        batch.clear();
        batch.extend((keynum..end).map(|k| (key_name(k), values.next(&mut rng))));
        let at = Instant::now();
        store.load(&batch).with_context(|| format!("loading records {keynum}..{end}"))?;
        nanos.push(at.elapsed().as_nanos() as u64);
        keynum = end;
    }
    let secs = start.elapsed().as_secs_f64();
    result.phases.push(PhaseResult {
        name: "load".to_string(),
        ops: spec.records,
        secs,
        latency: Latency::of(&mut nanos),
        ..Default::default()
    });
    eprintln!("    {} load {:.0} ops/s", spec.engine, spec.records as f64 / secs);
    print_counters(&spec.engine, "load", &*store);

    let mut counter = InsertCounter::new(spec.records);
    for letter in spec.workloads.chars() {
        let Some(workload) = by_letter(letter) else { bail!("unknown workload {letter:?}") };
        let phase = run_workload(&spec, workload, &mut *store, &values, &mut counter)
            .with_context(|| format!("workload {letter}"))?;
        eprintln!(
            "    {} {letter} {:.0} ops/s, {:.0} per client CPU-second; CPU s client {:.3}, process {:.3}, wall {:.3}",
            spec.engine,
            phase.ops_per_sec(),
            phase.ops_per_client_cpu_sec(),
            phase.client_cpu_secs,
            phase.process_cpu_secs,
            phase.secs
        );
        print_counters(&spec.engine, &letter.to_string(), &*store);
        result.phases.push(phase);
    }
    store.close()?;
    result.vmhwm_kib = sys::status_kib("VmHWM");
    result.io_write_bytes = sys::io_write_bytes().saturating_sub(io_start);
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// The engine's counters after `phase` (cumulative since the open), on
/// stderr: they say whether a phase's tail was the engine's own stalls.
fn print_counters(engine: &str, phase: &str, store: &dyn RecordStore) {
    if let Some(counters) = store.counters() {
        eprintln!("    {engine} after {phase}: {counters}");
    }
}

/// One workload of `spec.operations` operations.
fn run_workload(
    spec: &YcsbSpec,
    workload: &Workload,
    store: &mut dyn RecordStore,
    values: &Values,
    counter: &mut InsertCounter,
) -> Result<PhaseResult> {
    let mut rng = Rng::new(spec.seed ^ (u64::from(workload.letter as u32) << 32) ^ 0x7963_7362);
    // YCSB sizes the zipfian chooser for the records plus twice the inserts expected.
    let expected_new = (spec.operations as f64 * workload.insert_proportion() * 2.0) as u64;
    let mut chooser = match workload.distribution {
        Distribution::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::new(0, spec.records + expected_new)),
        Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(counter)),
    };
    let mut out = Vec::with_capacity(spec.value_bytes * 2);
    let mut nanos: BTreeMap<Op, Vec<u64>> = BTreeMap::new();
    let (mut errors, mut scanned) = (0u64, 0u64);
    let (client_cpu, process_cpu) = (sys::thread_cpu_secs(), sys::process_cpu_secs());
    let start = Instant::now();
    let operations = if workload.letter == 'e' { spec.scan_operations } else { spec.operations };
    for _ in 0..operations {
        let op = workload.pick(rng.next_f64());
        let at;
        match op {
            Op::Read => {
                let key = key_name(chooser.next(counter, &mut rng));
                at = Instant::now();
                if !store.read(key.as_bytes(), &mut out)? || out.len() != spec.value_bytes {
                    errors += 1;
                }
            }
            Op::Update => {
                let key = key_name(chooser.next(counter, &mut rng));
                let value = values.next(&mut rng);
                at = Instant::now();
                store.put(key.as_bytes(), value)?;
            }
            Op::Insert => {
                let key = key_name(counter.next_insert());
                let value = values.next(&mut rng);
                at = Instant::now();
                store.put(key.as_bytes(), value)?;
            }
            Op::Scan => {
                let key = key_name(chooser.next(counter, &mut rng));
                let len = scan_length(spec.max_scan_length, &mut rng);
                at = Instant::now();
                let read = store.scan(key.as_bytes(), len as usize, &mut out)?;
                scanned += read as u64;
                if read == 0 {
                    errors += 1;
                }
            }
            Op::ReadModifyWrite => {
                let key = key_name(chooser.next(counter, &mut rng));
                let value = values.next(&mut rng);
                at = Instant::now();
                if !store.read(key.as_bytes(), &mut out)? || out.len() != spec.value_bytes {
                    errors += 1;
                }
                store.put(key.as_bytes(), value)?;
            }
        }
        nanos.entry(op).or_default().push(at.elapsed().as_nanos() as u64);
    }
    let secs = start.elapsed().as_secs_f64();
    let client_cpu_secs = sys::thread_cpu_secs() - client_cpu;
    let process_cpu_secs = sys::process_cpu_secs() - process_cpu;
    let mut all: Vec<u64> = nanos.values().flatten().copied().collect();
    let by_op = nanos
        .iter_mut()
        .map(|(op, n)| {
            let name = serde_json::to_value(op).ok().and_then(|v| v.as_str().map(str::to_string));
            (name.unwrap_or_else(|| format!("{op:?}")), Latency::of(n))
        })
        .collect();
    Ok(PhaseResult {
        name: workload.letter.to_string(),
        ops: operations,
        secs,
        latency: Latency::of(&mut all),
        by_op,
        scanned,
        errors,
        client_cpu_secs,
        process_cpu_secs,
    })
}
