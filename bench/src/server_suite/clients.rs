//! The workloads' processes: a coordinator child per peer and run (it
//! starts the server, if any, then one process per client), and the
//! client processes. Every client sets up its files, says `ready`, waits
//! for `go` on its stdin (so all clients start their timed steps
//! together), runs its timed steps and prints a JSON line.

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use larder_client::Durability;
use serde::{Deserialize, Serialize};

use super::targets::{Served, Syscalls, Target};
use super::workloads::{plan, replay, Sizes, Step, Workload};
use super::{connect, connect_with, ServerProcess};

/// Workload peers: ext4 by syscalls, `larder serve` through larder-client
/// without and with leases, and `kv`: the same steps by larder-client's
/// KV calls (with leases) on one bucket per client (a file is a key; a
/// create or the log append a put, a whole-file read a get, a delete a
/// delete; fsyncs are durable puts, the sync a store sync).
pub const WORKLOAD_PEERS: [&str; 4] = ["ext4", "served", "leased", "kv"];

/// What one coordinator does.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct WorkloadSpec {
    pub peer: String,
    /// The fresh file system's mount point.
    pub dir: PathBuf,
    pub workload: Workload,
    pub clients: usize,
    pub sizes: Sizes,
    pub seed: u64,
    pub larder: PathBuf,
    /// `larder serve --workers` for this run.
    pub workers: String,
}

/// What one client process measured.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct ClientResult {
    /// Timed steps run.
    pub steps: u64,
    /// Seconds from `go` to the last step's end.
    pub secs: f64,
}

/// What one coordinator measured: each client's result.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct WorkloadResult {
    pub clients: Vec<ClientResult>,
}

impl WorkloadResult {
    /// Steps per second of all clients together: every step over the
    /// slowest client's time (all start at once).
    pub fn steps_per_second(&self) -> f64 {
        let steps: u64 = self.clients.iter().map(|c| c.steps).sum();
        let secs = self.clients.iter().map(|c| c.secs).fold(0.0, f64::max);
        if secs > 0.0 {
            steps as f64 / secs
        } else {
            0.0
        }
    }
}

/// One client process's spec.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct ClientSpec {
    peer: String,
    dir: PathBuf,
    socket: PathBuf,
    index: usize,
    workload: Workload,
    sizes: Sizes,
    seed: u64,
}

/// The coordinator child: starts the server (for `served` and
/// `leased`), the clients, lets them go together, prints a JSON line.
pub fn run_coordinator(spec: &str) -> Result<()> {
    let spec: WorkloadSpec = serde_json::from_str(spec)?;
    let socket = spec.dir.join("server.sock");
    let server = match spec.peer.as_str() {
        "ext4" => {
            std::fs::create_dir(spec.dir.join("bench"))?;
            None
        }
        "served" | "leased" | "kv" => {
            let store = spec.dir.join("store");
            larder_fs::Fs::create(&store, larder_fs::FsOptions::default())?.close()?;
            let child = Command::new(&spec.larder)
                .arg("serve")
                .arg(&store)
                .arg("--socket")
                .arg(&socket)
                .arg("--workers")
                .arg(&spec.workers)
                // As a careful user serving a web server's 10,000 files
                // would raise `ulimit -n`: a caching client keeps seven
                // eighths of these open after close.
                .arg("--max-open-handles")
                .arg(MAX_OPEN_HANDLES.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .context("starting larder serve")?;
            let server = ServerProcess(child);
            // Wait until it listens, so no client times out on a slow start.
            drop(connect(&socket, false, Duration::from_secs(30))?);
            Some(server)
        }
        p => bail!("unknown workload peer {p:?}: {}", WORKLOAD_PEERS.join(", ")),
    };
    let mut children = Vec::new();
    for index in 0..spec.clients {
        let client = ClientSpec {
            peer: spec.peer.clone(),
            dir: spec.dir.clone(),
            socket: socket.clone(),
            index,
            workload: spec.workload,
            sizes: spec.sizes,
            seed: spec.seed.wrapping_add(index as u64 * 7919),
        };
        children.push(spawn_client("server-client", &serde_json::to_string(&client)?)?);
    }
    for (index, (_, stdout)) in children.iter_mut().enumerate() {
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("client {index} did not get ready (it said {:?})", line.trim());
        }
    }
    for (child, _) in &mut children {
        let stdin = child.stdin.as_mut().context("a client's stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
    }
    let mut clients = Vec::new();
    for (index, (mut child, mut stdout)) in children.into_iter().enumerate() {
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let status = child.wait()?;
        if !status.success() {
            bail!("client {index} exited with {status}");
        }
        clients.push(serde_json::from_str::<ClientResult>(line.trim()).with_context(|| format!("client {index}"))?);
    }
    drop(server);
    println!("{}", serde_json::to_string(&WorkloadResult { clients })?);
    Ok(())
}

/// A client process: its plan on its own directory.
pub fn run_client(spec: &str) -> Result<()> {
    let spec: ClientSpec = serde_json::from_str(spec)?;
    let plan = plan(spec.workload, spec.sizes, spec.seed);
    // The sizes every whole-file read must return, in order.
    let mut model = std::collections::BTreeMap::new();
    let setup_reads = replay(&mut model, &plan.setup)?;
    let timed_reads = replay(&mut model, &plan.timed)?;
    let name = format!("c{}", spec.index);
    let result = match spec.peer.as_str() {
        "ext4" => {
            let target = Syscalls::new(&spec.dir.join("bench"))?;
            client_steps(&target, &name, &plan.setup, &plan.timed, (&setup_reads, &timed_reads))?
        }
        "served" | "leased" => {
            let options = larder_client::ClientOptions {
                leases: spec.peer == "leased",
                cache_page_bytes: cache_page_bytes(spec.workload, spec.sizes),
            };
            let client = connect_with(&spec.socket, &options, Duration::from_secs(30))?;
            let target = Served::new(client, &name)?;
            let result = client_steps(&target, "files", &plan.setup, &plan.timed, (&setup_reads, &timed_reads))?;
            if options.leases {
                let counters = target.client.cache_counters();
                eprintln!(
                    "{} client {}: opens kept {}, reads cached {}, revocations {}",
                    spec.peer, spec.index, counters.cached_opens, counters.cached_reads, counters.revocations
                );
            }
            result
        }
        "kv" => {
            let client = connect(&spec.socket, true, Duration::from_secs(30))?;
            kv_steps(&client, name.as_bytes(), &plan.setup, &plan.timed, (&setup_reads, &timed_reads))?
        }
        p => bail!("unknown workload peer {p:?}"),
    };
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// `larder serve --max-open-handles` of the workload runs.
const MAX_OPEN_HANDLES: u32 = 16_384;

/// The leased client's page cache: the workload's set of files, as a user
/// who knows it would size it (at least the client's default, 128 MiB).
fn cache_page_bytes(workload: Workload, sizes: Sizes) -> usize {
    let files = match workload {
        Workload::Varmail => sizes.varmail_files,
        Workload::Webserver => sizes.webserver_files,
        Workload::Smallfile => sizes.smallfile_files,
        Workload::Webproxy => sizes.webproxy_files,
    };
    let set = files as usize * super::workloads::FILE_BYTES as usize;
    set.next_power_of_two().max(128 << 20)
}

/// Sets up, says ready, waits for go, runs the timed steps.
fn client_steps<T: Target>(
    target: &T,
    dir: &str,
    setup: &[Step],
    timed: &[Step],
    reads: (&[u64], &[u64]),
) -> Result<ClientResult> {
    let dir = target.mkdir(dir)?;
    let log = target.open_file(&dir, &CString::new("log")?, true)?;
    let mut run = Runner { target, dir: &dir, log: &log, data: vec![0x6d; 64 << 10], buf: vec![0; 64 << 10] };
    run.steps(setup, reads.0)?;
    ready_then_go()?;
    let start = Instant::now();
    run.steps(timed, reads.1)?;
    let secs = start.elapsed().as_secs_f64();
    target.close(log)?;
    Ok(ClientResult { steps: timed.len() as u64, secs })
}

/// Runs steps on one target's directory.
struct Runner<'a, T: Target> {
    target: &'a T,
    dir: &'a T::Dir,
    log: &'a T::File,
    data: Vec<u8>,
    buf: Vec<u8>,
}

impl<T: Target> Runner<'_, T> {
    /// Runs `steps`; each whole-file read must return the next of `reads`.
    fn steps(&mut self, steps: &[Step], reads: &[u64]) -> Result<()> {
        let mut reads = reads.iter();
        for step in steps {
            match *step {
                Step::Create { file, bytes, fsync } => {
                    let f = self.target.open_file(self.dir, &file_name(file)?, false)?;
                    self.write_all(&f, bytes)?;
                    if fsync {
                        self.target.sync_file(&f)?;
                    }
                    self.target.close(f)?;
                }
                Step::Append { file, bytes, fsync } => {
                    let f = self.target.open_file(self.dir, &file_name(file)?, true)?;
                    self.write_all(&f, bytes)?;
                    if fsync {
                        self.target.sync_file(&f)?;
                    }
                    self.target.close(f)?;
                }
                Step::ReadWhole { file } => {
                    let f = self.target.open_read(self.dir, &file_name(file)?)?;
                    let mut offset = 0u64;
                    loop {
                        let n = self.target.read_at(&f, &mut self.buf, offset)?;
                        offset += n as u64;
                        if n < self.buf.len() {
                            break;
                        }
                    }
                    self.target.close(f)?;
                    let expected = reads.next().copied().unwrap_or(u64::MAX);
                    if offset != expected {
                        bail!("file {file}: read {offset} bytes whole, {expected} expected");
                    }
                }
                Step::Delete { file } => self.target.unlink(self.dir, &file_name(file)?)?,
                Step::LogAppend { bytes } => self.write_all(self.log, bytes)?,
                Step::SyncAll => self.target.sync_all()?,
            }
        }
        Ok(())
    }

    /// Writes `bytes` at offset 0 (at the end for a file opened to append).
    fn write_all(&self, file: &T::File, bytes: u32) -> Result<()> {
        let bytes = bytes as usize;
        if bytes > self.data.len() {
            bail!("a write of {bytes} bytes, more than {}", self.data.len());
        }
        let n = self.target.write_buffered(file, &self.data[..bytes], 0)?;
        if n != bytes {
            bail!("a short write: {n} of {bytes} bytes");
        }
        Ok(())
    }
}

fn file_name(file: u32) -> Result<CString> {
    Ok(CString::new(format!("m{file:06}"))?)
}

/// Waits for `go` on stdin, after saying `ready` on stdout.
fn ready_then_go() -> Result<()> {
    println!("ready");
    std::io::stdout().flush()?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    if go.trim() != "go" {
        bail!("expected go, got {:?}", go.trim());
    }
    Ok(())
}

/// The steps by KV calls on bucket `bucket`: set up, ready, go, timed.
fn kv_steps(
    client: &larder_client::Client,
    bucket: &[u8],
    setup: &[Step],
    timed: &[Step],
    reads: (&[u64], &[u64]),
) -> Result<ClientResult> {
    client.create_bucket(bucket)?;
    let data = vec![0x6d_u8; 64 << 10];
    let mut log_records = 0u64;
    let mut run = |steps: &[Step], reads: &[u64]| -> Result<()> {
        let mut reads = reads.iter();
        for step in steps {
            match *step {
                Step::Create { file, bytes, fsync } => {
                    let durability = if fsync { Durability::Durable } else { Durability::Buffered };
                    client.put(bucket, file_name(file)?.as_bytes(), &data[..bytes as usize], durability)?;
                }
                Step::Append { file, bytes, fsync } => {
                    // A KV value is replaced whole: the append is a get and a put of the longer value.
                    let key = file_name(file)?;
                    let mut value = client.get(bucket, key.as_bytes())?.context("an append to a missing key")?;
                    value.extend_from_slice(&data[..bytes as usize]);
                    let durability = if fsync { Durability::Durable } else { Durability::Buffered };
                    client.put(bucket, key.as_bytes(), &value, durability)?;
                }
                Step::ReadWhole { file } => {
                    let got = client.get(bucket, file_name(file)?.as_bytes())?.map_or(0, |v| v.len() as u64);
                    let expected = reads.next().copied().unwrap_or(u64::MAX);
                    if got != expected {
                        bail!("key {file}: got {got} bytes, {expected} expected");
                    }
                }
                Step::Delete { file } => {
                    if !client.delete(bucket, file_name(file)?.as_bytes(), Durability::Buffered)? {
                        bail!("key {file}: deleted, but it was not there");
                    }
                }
                Step::LogAppend { bytes } => {
                    // A log record: a new key per append.
                    log_records += 1;
                    let key = format!("log{log_records:08}");
                    client.put(bucket, key.as_bytes(), &data[..bytes as usize], Durability::Buffered)?;
                }
                Step::SyncAll => client.sync()?,
            }
        }
        Ok(())
    };
    run(setup, reads.0)?;
    ready_then_go()?;
    let start = Instant::now();
    run(timed, reads.1)?;
    Ok(ClientResult { steps: timed.len() as u64, secs: start.elapsed().as_secs_f64() })
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;

/// Starts this program's `subcommand` as a client process given `spec`
/// (JSON) on its command line, with its stdin and stdout piped (the
/// harness and the client talk by lines).
pub(super) fn spawn_client(subcommand: &str, spec: &str) -> Result<(Child, BufReader<ChildStdout>)> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg(subcommand)
        .arg("--spec")
        .arg(spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a client")?;
    let stdout = BufReader::new(child.stdout.take().context("a client's stdout")?);
    Ok((child, stdout))
}
