//! Facts read from /proc and the system: the child's memory and I/O, and
//! the machine the benchmark ran on.

use std::path::Path;
use std::process::Command;

/// A `kB` field of /proc/self/status (VmHWM, RssAnon, ...), in KiB; 0 if absent.
pub fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
            return rest.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        }
    }
    0
}

/// Bytes this process (all its threads) caused to be written to storage:
/// `write_bytes - cancelled_write_bytes` of /proc/self/io.
pub fn io_write_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| -> u64 {
        io.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    field("write_bytes").saturating_sub(field("cancelled_write_bytes"))
}

/// Output of a command, trimmed, or None if it could not run or failed.
pub fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Lines describing the machine, for the report header.
pub fn machine_info(dir: &Path) -> Vec<(String, String)> {
    let mut info = Vec::new();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown".to_string());
    info.push(("CPU".to_string(), format!("{cpus} cores (nproc), {model}")));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    info.push(("Memory".to_string(), format!("{:.1} GiB", mem_kib as f64 / (1 << 20) as f64)));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    info.push(("Kernel".to_string(), kernel.trim().to_string()));
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        .unwrap_or_else(|| "unknown".to_string());
    info.push(("OS".to_string(), os));
    info.push(("Disk of --dir".to_string(), filesystem_of(dir)));
    info
}

/// "fstype on device (mount point)" for the mount holding `dir`.
pub fn filesystem_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 3 {
            continue;
        }
        let (device, mount_point, fs_type) = (fields[0], fields[1], fields[2]);
        let longer = match &best {
            Some((len, _)) => mount_point.len() >= *len,
            None => true,
        };
        if dir.starts_with(mount_point) && longer {
            best = Some((mount_point.len(), format!("{fs_type} on {device} (mounted at {mount_point})")));
        }
    }
    best.map(|(_, s)| s).unwrap_or_else(|| "unknown".to_string())
}

/// CPU seconds (user and system) this process's threads have used so far.
pub fn process_cpu_secs() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// CPU seconds (user and system) the calling thread has used so far.
pub fn thread_cpu_secs() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
