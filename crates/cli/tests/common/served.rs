//! Helpers of the server tests: a `larder serve` child that is ready when
//! it says so on stderr, signals, the `server:` section of `stats`, and
//! what /proc says about the server process.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};

/// Longest wait for a server to say it serves (a debug build recovering a
/// store after a kill can take seconds on a loaded machine).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A `larder serve` child, killed when dropped unless it was stopped.
pub struct Served {
    pub child: Child,
    pub store: PathBuf,
    /// Every line of its stderr so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
    /// Sends once its stderr closes (it exited).
    stderr_closed: mpsc::Receiver<()>,
}

impl Served {
    /// Starts `larder serve STORE ARGS...` and returns once it printed
    /// `larder: serving ...` (its listener is bound then); panics with its
    /// stderr if it exits first.
    pub fn start(store: &Path, args: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
            .arg("serve")
            .arg(store)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready) = mpsc::channel();
        let (closed_tx, stderr_closed) = mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                let serving = line.starts_with("larder: serving ");
                kept.lock().unwrap().push(line);
                if serving {
                    let _ = ready_tx.send(());
                }
            }
            let _ = closed_tx.send(());
        });
        match ready.recv_timeout(READY_WITHIN) {
            Ok(()) => {}
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!("larder serve did not say it serves ({e:?}); exit {status}: {:?}", stderr.lock().unwrap());
            }
        }
        Served { child, store: store.to_path_buf(), stderr, stderr_closed }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: Signal) {
        kill_process(Pid::from_raw(self.child.id() as i32).unwrap(), signal).unwrap();
    }

    /// Waits for it to exit (at most `within`); its status and stderr.
    pub fn wait(mut self, within: Duration) -> (ExitStatus, Vec<String>) {
        assert!(self.stderr_closed.recv_timeout(within).is_ok(), "the server did not exit within {within:?}");
        let status = self.child.wait().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        (status, stderr)
    }

    /// SIGKILL, and waits for it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `server:` section of a `stats` text: each `name: value` line, by
/// name; panics if there is none.
pub fn server_section(stats: &str) -> BTreeMap<String, String> {
    let mut lines = stats.lines().skip_while(|l| *l != "server:");
    assert!(lines.next().is_some(), "no server: section in the stats:\n{stats}");
    lines
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(name, value)| (name.to_string(), value.trim().to_string()))
        .collect()
}

/// The first number of `name`'s value in a server section.
pub fn number(section: &BTreeMap<String, String>, name: &str) -> u64 {
    let value = section.get(name).unwrap_or_else(|| panic!("no {name:?} in the server section {section:?}"));
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{name}: {value:?} does not start with a number"))
}

/// Fails, saying why, on a machine without /proc (these tests read the
/// server's descriptors, mappings and memory there; Linux has it).
pub fn require_proc() {
    assert!(
        Path::new("/proc/self/fd").is_dir() && Path::new("/proc/self/maps").is_file(),
        "no /proc on this machine: the server tests read the server's descriptors, mappings and memory from \
         /proc/PID (Linux)"
    );
}

/// Descriptors process `pid` has open.
pub fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Memory mappings of process `pid` (each client's region is one).
pub fn mappings(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap().lines().count()
}

/// Resident memory of process `pid`, in KiB.
pub fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
