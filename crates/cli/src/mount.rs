//! `larder mount STORE MOUNTPOINT`: serves a store through FUSE until it
//! is unmounted (`fusermount3 -u MOUNTPOINT`, or SIGINT / SIGTERM, which
//! unmount cleanly and make everything durable). While mounted, the mount
//! process is the store's only owner (it holds the store's LOCK).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use larder_fs::{Fs, FsOptions};
use larder_fuse::{KernelChecks, MountOptions};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Arguments of `larder mount`.
#[derive(clap::Args, Debug)]
pub(crate) struct MountArgs {
    /// Store directory.
    store: PathBuf,
    /// Where to mount it (an existing directory).
    mountpoint: PathBuf,
    /// Detach: serve from a background process and return once mounted.
    #[arg(long)]
    daemon: bool,
    /// Let other users use the mount (FUSE's allow_other).
    #[arg(long)]
    allow_other: bool,
    /// Have the kernel check modes too (FUSE's default_permissions) on a
    /// mount made by root without --allow-other, where it is otherwise
    /// left out: it keeps out root processes that gave up
    /// CAP_DAC_OVERRIDE, which larder-fs, seeing only uids, lets in.
    #[arg(long)]
    kernel_permission_checks: bool,
    /// Seconds the kernel may cache a name lookup (0: ask every time). The
    /// mount is the store's only owner, so long is safe.
    #[arg(long, default_value_t = 60.0)]
    entry_timeout: f64,
    /// Seconds the kernel may cache attributes (0: ask every time).
    #[arg(long, default_value_t = 60.0)]
    attr_timeout: f64,
    /// Threads serving requests.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Set by --daemon for the process it starts.
    #[arg(long, hide = true)]
    detached: bool,
}

/// The mount's kernel checks: always when asked, else where they can
/// refuse something.
pub(crate) fn kernel_checks(always: bool) -> KernelChecks {
    if always {
        KernelChecks::Always
    } else {
        KernelChecks::WhenTheyCanRefuse
    }
}

/// How long `--daemon` waits for the background process to mount.
const DAEMON_WAIT: Duration = Duration::from_secs(30);

pub(crate) fn run(args: &MountArgs) -> Result<()> {
    if !args.mountpoint.is_dir() {
        bail!("mount point {} is not a directory; create it first", args.mountpoint.display());
    }
    for (name, v) in [("--entry-timeout", args.entry_timeout), ("--attr-timeout", args.attr_timeout)] {
        if !(v.is_finite() && v >= 0.0) {
            bail!("{name} must be a number of seconds, 0 or more; got {v}");
        }
    }
    if args.daemon {
        return daemonize(args);
    }
    if args.detached {
        // Out of the caller's session, so its terminal's hangup does not
        // reach the mount.
        let _ = rustix::process::setsid();
    }
    let fs = Fs::open(&args.store, FsOptions::default()).map_err(|e| match e {
        larder_fs::FsError::Store(o) => crate::store::opening_error(&args.store, o.into()),
        other => anyhow::Error::new(other).context(format!("opening the store at {}", args.store.display())),
    })?;
    let fs = Arc::new(fs);
    let options = MountOptions {
        entry_timeout: Duration::from_secs_f64(args.entry_timeout),
        attr_timeout: Duration::from_secs_f64(args.attr_timeout),
        allow_other: args.allow_other,
        threads: args.threads.max(1),
        kernel_checks: kernel_checks(args.kernel_permission_checks),
    };
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("installing the SIGINT/SIGTERM handlers")?;
    let handle = signals.handle();
    let mountpoint = args.mountpoint.clone();
    larder_fuse::run(fs.clone(), &args.mountpoint, &options, |mut unmounter| {
        eprintln!("larder: {} mounted on {}", args.store.display(), mountpoint.display());
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                if let Err(e) = unmounter.unmount() {
                    eprintln!("larder: unmounting {}: {e}", mountpoint.display());
                }
            }
        });
    })?;
    handle.close();
    // The session has ended and dropped its handle on the store.
    match Arc::try_unwrap(fs) {
        Ok(fs) => fs.close().with_context(|| format!("closing the store at {}", args.store.display()))?,
        Err(fs) => fs.sync().with_context(|| format!("syncing the store at {}", args.store.display()))?,
    }
    eprintln!("larder: unmounted {}; everything is durable", args.mountpoint.display());
    Ok(())
}

/// Starts `larder mount` again in the background and waits until the
/// mount appears (or the background process fails, whose message is shown).
fn daemonize(args: &MountArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the larder executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount").arg(&args.store).arg(&args.mountpoint).arg("--detached");
    cmd.arg("--entry-timeout").arg(args.entry_timeout.to_string());
    cmd.arg("--attr-timeout").arg(args.attr_timeout.to_string());
    cmd.arg("--threads").arg(args.threads.to_string());
    if args.allow_other {
        cmd.arg("--allow-other");
    }
    if args.kernel_permission_checks {
        cmd.arg("--kernel-permission-checks");
    }
    let log = std::env::temp_dir().join(format!("larder-mount-{}.log", std::process::id()));
    let err = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .context("starting the background mount process")?;
    let start = Instant::now();
    let target = std::fs::canonicalize(&args.mountpoint)
        .with_context(|| format!("resolving mount point {}", args.mountpoint.display()))?;
    while start.elapsed() < DAEMON_WAIT {
        if mounted(&target)? {
            println!("mounted {} on {} (process {})", args.store.display(), target.display(), child.id());
            return Ok(());
        }
        if let Some(status) = child.try_wait().context("watching the background mount process")? {
            let msg = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("the background mount exited ({status}): {}", msg.trim());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("{} was not mounted within {:?}; see {}", target.display(), DAEMON_WAIT, log.display())
}

/// Whether a FUSE file system is mounted on `path` (from /proc/self/mountinfo).
fn mounted(path: &Path) -> Result<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let want = path.to_string_lossy();
    Ok(info.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.get(4).is_some_and(|m| *m == want) && l.contains(" - fuse")
    }))
}
