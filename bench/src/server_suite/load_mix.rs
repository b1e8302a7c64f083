//! The load manager's mixes (uFS, paper 002, section 4.4): client
//! processes with different demands, some changing over time, against
//! `larder serve` placed three ways. This file holds the mixes, the
//! client processes and the coordinator of one configuration; the parent
//! loop and the report are in [`super::load_suite`].
//!
//! A client works on files of its own (uFS's clients each own their
//! inodes), through larder-client without leases, so every call is a
//! request a worker serves. Its plan is a list of phases: from a moment
//! to another of the timeline, one kind of call with a think time after
//! each (a sleep: a light client leaves the CPU to others).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use larder_client::{Client, OpenOptions};
use serde::{Deserialize, Serialize};

use super::ops::Random;
use super::{connect, ServerProcess};

/// Bytes of each client's data file (its reads and overwrites land in
/// it; written whole first, so reads find it in the server's caches).
pub const DATA_BYTES: u64 = 4 << 20;
/// Bytes of an append.
pub const APPEND_BYTES: usize = 256;

/// One kind of call a client repeats.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A random 16 KiB read of its data file.
    Read16k,
    /// A random 4 KiB read of its data file.
    Read4k,
    /// A random 4 KiB overwrite of its data file.
    Write4k,
    /// A 256-byte append to its log.
    Append,
    /// The metadata of its data file, by path (a path resolution).
    Stat,
}

impl Call {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Call::Read16k => "read16k",
            Call::Read4k => "read4k",
            Call::Write4k => "write4k",
            Call::Append => "append",
            Call::Stat => "stat",
        }
    }
}

/// From `from` to `to` (thousandths of the timeline), `call` repeated
/// with `think_us` of sleep after each.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub from: u32,
    pub to: u32,
    pub call: Call,
    pub think_us: u32,
}

/// A mix: each client's phases.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub name: String,
    pub clients: Vec<Vec<Phase>>,
}

const fn phase(from: u32, to: u32, call: Call, think_us: u32) -> Phase {
    Phase { from, to, call, think_us }
}

/// The mixes, by name:
///
/// - `uneven` (uFS's load-balancing benchmarks, read-abc and write-efg
///   together): six clients for the whole run, each with its own cost
///   per call: two 16 KiB readers, a 4 KiB reader and a 4 KiB writer
///   without think time, a stat client and an append client that think
///   100 µs after each call.
/// - `dynamic` (uFS's figure 12): clients join one after another, two
///   raise their think time midway and leave, others come back heavier.
/// - `skewed`: `uneven`'s demands ordered so that a round-robin placement
///   over two workers puts every heavy client on one of them (each new
///   client takes the next worker, after the coordinator's first probe
///   took one): heavy and light clients alternate, as uFS's
///   load-balancing benchmarks make per-inode costs that round-robin
///   does not see.
pub fn mix(name: &str) -> Result<Mix> {
    use Call::*;
    let clients: Vec<Vec<Phase>> = match name {
        "uneven" => vec![
            vec![phase(0, 1000, Read16k, 0)],
            vec![phase(0, 1000, Read16k, 0)],
            vec![phase(0, 1000, Read4k, 0)],
            vec![phase(0, 1000, Write4k, 0)],
            vec![phase(0, 1000, Stat, 100)],
            vec![phase(0, 1000, Append, 100)],
        ],
        "dynamic" => vec![
            vec![phase(0, 1000, Read16k, 0)],
            vec![phase(100, 750, Write4k, 0), phase(750, 875, Write4k, 200)],
            vec![phase(200, 625, Read4k, 0), phase(625, 750, Read4k, 200)],
            vec![phase(300, 1000, Stat, 50)],
            vec![phase(400, 1000, Append, 100)],
            vec![phase(500, 1000, Read16k, 0)],
        ],
        "skewed" => vec![
            vec![phase(0, 1000, Read16k, 0)],
            vec![phase(0, 1000, Stat, 100)],
            vec![phase(0, 1000, Read16k, 0)],
            vec![phase(0, 1000, Append, 100)],
            vec![phase(0, 1000, Write4k, 0)],
            vec![phase(0, 1000, Stat, 100)],
        ],
        other => bail!("unknown load mix {other:?}: uneven, dynamic, skewed"),
    };
    Ok(Mix { name: name.to_string(), clients })
}

/// The three placements compared.
pub const CONFIGS: [&str; 3] = ["max", "managed", "round-robin"];

/// What one coordinator does: one mix under one placement.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct MixSpec {
    pub dir: PathBuf,
    pub larder: PathBuf,
    pub mix: Mix,
    /// `max`: one worker per client (round-robin over as many workers
    /// as clients); `managed`: the load manager over 1..`workers`;
    /// `round-robin`: a fixed round-robin placement over `workers`.
    pub config: String,
    pub workers: u32,
    /// Length of the timeline.
    pub secs: f64,
    pub seed: u64,
    /// How often the coordinator reads the server's workers and load
    /// manager counters.
    pub sample_ms: u64,
}

/// One reading of the server's `stats` during the run.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the clients were let go.
    pub at: f64,
    /// Workers active.
    pub workers: u32,
    /// The load manager's counters: windows, added, parked, balanced,
    /// clients moved, files moved.
    pub manager: [u64; 6],
}

/// What one client process did.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct MixClientResult {
    /// Calls completed in each phase.
    pub calls: Vec<u64>,
}

/// What one coordinator measured.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct MixResult {
    pub clients: Vec<MixClientResult>,
    /// Seconds of the timeline (the slowest client's, from go to its end).
    pub secs: f64,
    pub samples: Vec<Sample>,
}

impl MixResult {
    /// Calls of all clients per second of the timeline.
    pub fn throughput(&self) -> f64 {
        let calls: u64 = self.clients.iter().flat_map(|c| c.calls.iter()).sum();
        if self.secs > 0.0 {
            calls as f64 / self.secs
        } else {
            0.0
        }
    }

    /// Workers active on average over the samples.
    pub fn mean_workers(&self) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.iter().map(|s| f64::from(s.workers)).sum::<f64>() / self.samples.len() as f64
    }

    /// The worker count the samples show most often (the larger on a tie).
    pub fn settled_workers(&self) -> u32 {
        let mut counts = std::collections::BTreeMap::<u32, usize>::new();
        for s in &self.samples {
            *counts.entry(s.workers).or_default() += 1;
        }
        counts.into_iter().max_by_key(|&(workers, n)| (n, workers)).map_or(1, |(workers, _)| workers.max(1))
    }

    /// The last sample's load manager counters.
    pub fn manager(&self) -> [u64; 6] {
        self.samples.last().map_or([0; 6], |s| s.manager)
    }
}

/// Reads `workers:` and `load manager:` out of a server's stats text.
pub fn parse_stats(text: &str) -> Option<(u32, [u64; 6])> {
    let field = |name: &str| text.lines().find_map(|l| l.trim_start().strip_prefix(name).map(str::trim));
    let workers = field("workers:")?.split_whitespace().next()?.parse().ok()?;
    let manager_text = field("load manager:")?;
    let numbers: Vec<u64> =
        manager_text.split(',').filter_map(|part| part.split_whitespace().next()?.parse().ok()).collect();
    let manager: [u64; 6] = numbers.get(..6)?.try_into().ok()?;
    Some((workers, manager))
}

/// `larder serve` arguments of `config` over `workers`.
pub fn serve_arguments(config: &str, clients: usize, workers: u32) -> Result<Vec<String>> {
    let (range, placement) = match config {
        "max" => (clients.max(1).to_string(), "round-robin"),
        "managed" => (format!("1..{}", workers.max(1)), "managed"),
        "round-robin" => (workers.max(1).to_string(), "round-robin"),
        other => bail!("unknown placement {other:?}: {}", CONFIGS.join(", ")),
    };
    Ok(vec!["--workers".into(), range, "--placement".into(), placement.into()])
}

/// One client process's spec.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct MixClientSpec {
    socket: PathBuf,
    index: usize,
    phases: Vec<Phase>,
    secs: f64,
    seed: u64,
}

/// The coordinator: starts the server, the clients, lets them go
/// together, reads the server's stats every `sample_ms` until they end,
/// prints a JSON line.
pub fn run_coordinator(spec: &str) -> Result<()> {
    let spec: MixSpec = serde_json::from_str(spec)?;
    let socket = spec.dir.join("server.sock");
    let store = spec.dir.join("store");
    larder_fs::Fs::create(&store, larder_fs::FsOptions::default())?.close()?;
    let server = ServerProcess(
        Command::new(&spec.larder)
            .arg("serve")
            .arg(&store)
            .arg("--socket")
            .arg(&socket)
            .args(serve_arguments(&spec.config, spec.mix.clients.len(), spec.workers)?)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting larder serve")?,
    );
    drop(connect(&socket, false, Duration::from_secs(30))?);
    let mut children = Vec::new();
    for (index, phases) in spec.mix.clients.iter().enumerate() {
        let client = MixClientSpec {
            socket: socket.clone(),
            index,
            phases: phases.clone(),
            secs: spec.secs,
            seed: spec.seed.wrapping_add(index as u64 * 7919),
        };
        children.push(super::clients::spawn_client("server-mix-client", &serde_json::to_string(&client)?)?);
        // One at a time: each takes its home in the order of the mix.
        let (_, stdout) = children.last_mut().context("the client just started")?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("client {index} did not get ready (it said {:?})", line.trim());
        }
    }
    // The watcher connects last, so the clients' homes are the first ones.
    let watcher = connect(&socket, false, Duration::from_secs(30))?;
    let start = Instant::now();
    for (child, _) in &mut children {
        let stdin = child.stdin.as_mut().context("a client's stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
    }
    let mut samples = Vec::new();
    let end = Duration::from_secs_f64(spec.secs);
    while start.elapsed() < end {
        std::thread::sleep(Duration::from_millis(spec.sample_ms));
        let text = watcher.stats()?;
        let (workers, manager) =
            parse_stats(&text).context("the server's stats have no workers or load manager line")?;
        samples.push(Sample { at: start.elapsed().as_secs_f64(), workers, manager });
    }
    let mut clients = Vec::new();
    for (index, (mut child, mut stdout)) in children.into_iter().enumerate() {
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let status = child.wait()?;
        if !status.success() {
            bail!("client {index} exited with {status}");
        }
        clients.push(serde_json::from_str::<MixClientResult>(line.trim()).with_context(|| format!("client {index}"))?);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(watcher);
    drop(server);
    println!("{}", serde_json::to_string(&MixResult { clients, secs, samples })?);
    Ok(())
}

/// A client process: sets up its files, says ready, waits for go, runs
/// its phases, prints a JSON line.
pub fn run_client(spec: &str) -> Result<()> {
    let spec: MixClientSpec = serde_json::from_str(spec)?;
    let client = connect(&spec.socket, false, Duration::from_secs(30))?;
    let dir = format!("/c{}", spec.index);
    client.create_dir(&dir, 0o755)?;
    let files = ClientFiles::create(&client, &dir)?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    if go.trim() != "go" {
        bail!("expected go, got {:?}", go.trim());
    }
    let start = Instant::now();
    let mut random = Random::new(spec.seed);
    let mut calls = Vec::new();
    for p in &spec.phases {
        let at = |thousandths: u32| Duration::from_secs_f64(spec.secs * f64::from(thousandths) / 1000.0);
        let (from, to) = (at(p.from), at(p.to));
        if let Some(wait) = from.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let mut n = 0u64;
        while start.elapsed() < to {
            files.call(&client, p.call, &mut random)?;
            n += 1;
            if p.think_us > 0 {
                std::thread::sleep(Duration::from_micros(u64::from(p.think_us)));
            }
        }
        calls.push(n);
    }
    if let Some(rest) = Duration::from_secs_f64(spec.secs).checked_sub(start.elapsed()) {
        std::thread::sleep(rest);
    }
    println!("{}", serde_json::to_string(&MixClientResult { calls })?);
    Ok(())
}

/// A client's files: its data file (written whole, then read whole once)
/// and its log, both kept open.
struct ClientFiles {
    data_path: String,
    data: larder_client::File,
    log: larder_client::File,
    bytes: Vec<u8>,
}

impl ClientFiles {
    fn create(client: &Client, dir: &str) -> Result<ClientFiles> {
        let data_path = format!("{dir}/data");
        let data = OpenOptions::new().read(true).write(true).create(true).open(client, &data_path)?;
        let chunk = vec![0x5a_u8; 256 << 10];
        let mut buf = vec![0u8; 256 << 10];
        for i in 0..DATA_BYTES / chunk.len() as u64 {
            if data.write_at(&chunk, i * chunk.len() as u64)? != chunk.len() {
                bail!("a short write filling {data_path}");
            }
        }
        let step = buf.len() as u64;
        for i in 0..DATA_BYTES / step {
            data.read_at(&mut buf, i * step)?;
        }
        let log = OpenOptions::new().append(true).create(true).open(client, format!("{dir}/log"))?;
        Ok(ClientFiles { data_path, data, log, bytes: vec![0xa5; 4096] })
    }

    fn call(&self, client: &Client, call: Call, random: &mut Random) -> Result<()> {
        let mut buf = [0u8; 16 << 10];
        let random_at = |random: &mut Random, size: u64| random.below(DATA_BYTES / size) * size;
        match call {
            Call::Read16k | Call::Read4k => {
                let size = if call == Call::Read16k { 16 << 10 } else { 4096 };
                let at = random_at(random, size as u64);
                if self.data.read_at(&mut buf[..size], at)? != size {
                    bail!("a short read of {} at {at}", self.data_path);
                }
            }
            Call::Write4k => {
                let at = random_at(random, 4096);
                if self.data.write_at(&self.bytes, at)? != self.bytes.len() {
                    bail!("a short write of {} at {at}", self.data_path);
                }
            }
            Call::Append => {
                if self.log.write_at(&self.bytes[..APPEND_BYTES], 0)? != APPEND_BYTES {
                    bail!("a short append");
                }
            }
            Call::Stat => {
                std::hint::black_box(client.metadata(&self.data_path)?);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_lines_are_read() {
        let text =
            "kv: 3 objects\nserver:\n  pid:              12\n  workers:          3 running (1..6), 4 placed files\n  \
                    load manager:     120 windows, 4 added, 2 parked, 7 balanced, 9 clients moved, 3 files moved\n  \
                    clients:          7 connected (limit 1024)\n";
        assert_eq!(parse_stats(text), Some((3, [120, 4, 2, 7, 9, 3])));
        let off = text.replace("3 files moved", "3 files moved (off: a fixed round-robin placement)");
        assert_eq!(parse_stats(&off), Some((3, [120, 4, 2, 7, 9, 3])));
        assert_eq!(parse_stats("server:\n  workers: 2 running\n"), None, "no load manager line");
    }

    #[test]
    fn each_configuration_serves_as_named() {
        let args = |c: &str, w: u32| serve_arguments(c, 6, w).map(|a| a.join(" ")).ok();
        assert_eq!(args("max", 3).as_deref(), Some("--workers 6 --placement round-robin"));
        assert_eq!(args("managed", 6).as_deref(), Some("--workers 1..6 --placement managed"));
        assert_eq!(args("round-robin", 3).as_deref(), Some("--workers 3 --placement round-robin"));
        assert!(args("other", 3).is_none());
    }

    #[test]
    fn workers_used_come_from_the_samples() {
        let sample = |workers: u32| Sample { at: 0.0, workers, manager: [0; 6] };
        let r = MixResult {
            clients: vec![MixClientResult { calls: vec![300, 100] }, MixClientResult { calls: vec![200] }],
            secs: 2.0,
            samples: [1, 2, 2, 3, 3, 3, 2, 2].into_iter().map(sample).collect(),
        };
        assert_eq!(r.throughput(), 300.0);
        assert_eq!(r.mean_workers(), 18.0 / 8.0);
        assert_eq!(r.settled_workers(), 2, "two is the count seen most often");
        let tie = MixResult { samples: [1, 3].into_iter().map(sample).collect(), ..MixResult::default() };
        assert_eq!(tie.settled_workers(), 3, "a tie takes the larger");
        assert_eq!(MixResult::default().settled_workers(), 1);
    }

    #[test]
    fn every_mix_has_phases_in_order_within_the_timeline() {
        for name in ["uneven", "dynamic", "skewed"] {
            let m = mix(name).ok().filter(|m| !m.clients.is_empty());
            let Some(m) = m else { panic!("{name}: no mix") };
            for phases in &m.clients {
                let mut at = 0;
                for p in phases {
                    assert!(p.from >= at && p.from < p.to && p.to <= 1000, "{name}: {phases:?}");
                    at = p.to;
                }
            }
        }
        assert!(mix("nothing").is_err());
    }
}
