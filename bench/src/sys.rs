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

/// CPU used so far by this process's threads named `prefix` followed by
/// a number (fuser's serving threads are `fuser-0`, `fuser-1`, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadsCpu {
    /// Seconds on a CPU, user and system: each thread's
    /// `/proc/self/task/TID/schedstat` (nanoseconds).
    pub secs: f64,
    /// Seconds of it in user mode: each thread's `utime` in clock ticks
    /// (`stat`), coarser (10 ms a tick here).
    pub user_secs: f64,
    /// Threads counted. One that has exited is not.
    pub threads: usize,
}

/// [`ThreadsCpu`] of the threads named `prefix` and a number.
pub fn threads_cpu(prefix: &str) -> ThreadsCpu {
    let mut cpu = ThreadsCpu::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return cpu };
    let tick = 1.0 / rustix::param::clock_ticks_per_second() as f64;
    for task in tasks.flatten() {
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else { continue };
        let Some(n) = comm.trim_end().strip_prefix(prefix) else { continue };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(sched) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let Some(ns) = sched.split_whitespace().next().and_then(|f| f.parse::<u64>().ok()) else { continue };
        // After the command's closing parenthesis: state is field 3, utime 14.
        let utime = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(11)?.parse::<u64>().ok());
        let Some(utime) = utime else { continue };
        cpu.secs += ns as f64 / 1e9;
        cpu.user_secs += utime as f64 * tick;
        cpu.threads += 1;
    }
    cpu
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads named the prefix and a number are counted with the CPU they
    /// used; a thread named the prefix and anything else is not.
    #[test]
    fn counts_the_named_threads_only() {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let done_rx = std::sync::Arc::new(std::sync::Mutex::new(done_rx));
        let mut threads = Vec::new();
        for name in ["cpuprobe-0", "cpuprobe-17", "cpuprobe-x", "cpuprobe-"] {
            let (ready, done) = (ready_tx.clone(), done_rx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        // Some work, so that the thread has used CPU.
                        let mut x = 1u64;
                        for i in 0..2_000_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                        }
                        ready.send(x).expect("the test waits");
                        let _ = done.lock().map(|d| d.recv());
                    })
                    .expect("spawn"),
            );
        }
        for _ in 0..4 {
            ready_rx.recv().expect("a thread's work");
        }
        let cpu = threads_cpu("cpuprobe-");
        for _ in 0..4 {
            done_tx.send(()).expect("a thread waits");
        }
        threads.into_iter().for_each(|t| t.join().expect("join"));
        assert_eq!(cpu.threads, 2, "cpuprobe-0 and cpuprobe-17 only: {cpu:?}");
        assert!(cpu.secs > 0.0 && cpu.user_secs <= cpu.secs + 0.02 * 2.0, "{cpu:?}");
    }
}
