//! `larder serve STORE`: one process owns the store and serves clients on
//! a Unix socket (`STORE/larder.sock` unless `--socket`), and with
//! `--mount DIR` the store's FUSE mount too, so KV clients, file-system
//! clients and the mount share one live store. SIGINT or SIGTERM stops
//! it: queued requests are refused, running ones finish, everything is
//! made durable, the mount is unmounted and the socket removed.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use larder_fs::{Fs, FsOptions};
use larder_server::{Server, ServerOptions};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Arguments of `larder serve`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// Store directory.
    store: PathBuf,
    /// Where to listen (default: STORE/larder.sock, where clients and the
    /// CLI look).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Workers, as MIN..MAX (or one number): the server starts MIN; every
    /// client gets rings for MAX.
    #[arg(long, default_value = "1..4")]
    workers: String,
    /// Also serve the store's FUSE mount on this directory.
    #[arg(long)]
    mount: Option<PathBuf>,
    /// With --mount: let other users use the mount (FUSE's allow_other).
    #[arg(long)]
    allow_other: bool,
    /// With --mount: have the kernel check modes too, as `larder mount
    /// --kernel-permission-checks` does.
    #[arg(long)]
    kernel_permission_checks: bool,
    /// How long a client's lease lasts, in milliseconds: a client that
    /// does not answer a revocation delays another's change by at most
    /// this. 0 grants no leases (so does --mount).
    #[arg(long, default_value_t = 1000)]
    lease_term_ms: u64,
    /// Handles one client may hold open at once (files, directories, KV
    /// writers and readers; like RLIMIT_NOFILE): one more is EMFILE. A
    /// caching client keeps up to seven eighths of them open after close,
    /// so a later open of the same file is no round trip; a client that
    /// reads a set of more files again and again needs more than the
    /// default.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_open_handles: u32,
    /// Where clients and open files go: `managed` (the load manager
    /// measures the workers every few milliseconds, moves clients and hot
    /// files, and adds or parks workers within MIN..MAX) or `round-robin`
    /// (a fixed number of workers, given as --workers N; each new client
    /// gets the next worker as its home, a file stays on the worker of the
    /// client that opened it first, and nothing moves).
    #[arg(long, value_enum, default_value_t = PlacementArg::Managed)]
    placement: PlacementArg,
}

/// `--placement`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlacementArg {
    /// The load manager places and moves load, within MIN..MAX workers.
    Managed,
    /// Clients take the workers in turn; nothing moves.
    RoundRobin,
}

/// The server's load policy for `placement` over `workers`; refuses a
/// round-robin placement over a range (it never changes the count).
fn load_policy(
    placement: PlacementArg,
    workers: &std::ops::RangeInclusive<u32>,
) -> Result<Option<larder_server::LoadPolicy>> {
    match placement {
        PlacementArg::Managed => Ok(Some(larder_server::LoadPolicy::default())),
        PlacementArg::RoundRobin if workers.start() != workers.end() => bail!(
            "--placement round-robin runs a fixed number of workers: give --workers N (not {}..{})",
            workers.start(),
            workers.end()
        ),
        PlacementArg::RoundRobin => Ok(None),
    }
}

/// `MIN..MAX` or `N`.
fn parse_workers(text: &str) -> Result<std::ops::RangeInclusive<u32>> {
    let (min, max) = match text.split_once("..") {
        Some((min, max)) => (min.trim(), max.trim().trim_start_matches('=')),
        None => (text.trim(), text.trim()),
    };
    let min: u32 = min.parse().with_context(|| format!("--workers {text:?}: MIN is not a number"))?;
    let max: u32 = max.parse().with_context(|| format!("--workers {text:?}: MAX is not a number"))?;
    if min == 0 || min > max || max > 64 {
        bail!("--workers {text:?}: need 1 <= MIN <= MAX <= 64");
    }
    Ok(min..=max)
}

/// Refuses, saying so, when a server already answers on the store's socket
/// or on `--socket`: its LOCK would refuse the store anyway, in words about
/// another process rather than about the server the person can stop.
fn refuse_if_served(args: &ServeArgs) -> Result<()> {
    let default = larder_client::socket_of(&args.store);
    for socket in std::iter::once(&default).chain(args.socket.as_ref()) {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            bail!(
                "a server already serves {} on {}; stop it first (SIGTERM or SIGINT) or use that one: the store \
                 commands go to it",
                if socket == &default { format!("the store at {}", args.store.display()) } else { "a store".into() },
                socket.display()
            );
        }
    }
    Ok(())
}

pub(crate) fn run(args: &ServeArgs) -> Result<()> {
    let workers = parse_workers(&args.workers)?;
    let policy = load_policy(args.placement, &workers)?;
    if let Some(mount) = &args.mount {
        if !mount.is_dir() {
            bail!("mount point {} is not a directory; create it first", mount.display());
        }
    }
    refuse_if_served(args)?;
    let fs = Fs::open(&args.store, FsOptions::default()).map_err(|e| match e {
        larder_fs::FsError::Store(o) => crate::store::opening_error(&args.store, o.into()),
        other => anyhow::Error::new(other).context(format!("opening the store at {}", args.store.display())),
    })?;
    let fs = Arc::new(fs);
    let mut options = ServerOptions::for_store(&args.store).workers(workers);
    options.load_policy = policy;
    if let Some(socket) = &args.socket {
        options.socket = socket.clone();
    }
    options.limits.lease_term = std::time::Duration::from_millis(args.lease_term_ms);
    options.limits.max_open_handles = args.max_open_handles as usize;
    if args.mount.is_some() {
        // The mount changes the store without the server seeing it, so
        // no change through it could revoke a lease: grant none.
        options.limits.lease_term = std::time::Duration::ZERO;
        // Nor could it drop a client's resolved directories.
        options.limits.max_cached_directories = 0;
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("installing the SIGINT/SIGTERM handlers")?;
    // The mount first: the server answers a client only once the mount's
    // kernel was told to drop its copies of what the client changed.
    let mount = match &args.mount {
        Some(dir) => {
            let options = larder_fuse::MountOptions {
                allow_other: args.allow_other,
                kernel_checks: crate::mount::kernel_checks(args.kernel_permission_checks),
                ..Default::default()
            };
            Some(larder_fuse::spawn(fs.clone(), dir, &options)?)
        }
        None => None,
    };
    options.before_answer = mount.as_ref().map(|m| larder_server::AnswerHook(m.invalidation_barrier()));
    let server =
        Server::start(fs.clone(), options).with_context(|| format!("serving the store at {}", args.store.display()))?;
    eprintln!(
        "larder: serving {} on {}{}",
        args.store.display(),
        server.socket().display(),
        args.mount.as_ref().map(|m| format!(", mounted on {}", m.display())).unwrap_or_default()
    );
    signals.forever().next();
    if let Some(mount) = mount {
        mount.unmount().with_context(|| "unmounting".to_string())?;
    }
    server.shutdown().with_context(|| format!("stopping the server of {}", args.store.display()))?;
    match Arc::try_unwrap(fs) {
        Ok(fs) => fs.close().with_context(|| format!("closing the store at {}", args.store.display()))?,
        Err(fs) => fs.sync().with_context(|| format!("syncing the store at {}", args.store.display()))?,
    }
    eprintln!("larder: stopped serving {}; everything is durable", args.store.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{load_policy, parse_workers, PlacementArg};

    #[test]
    fn worker_ranges_parse() {
        assert_eq!(parse_workers("1..4").ok(), Some(1..=4));
        assert_eq!(parse_workers("2..=3").ok(), Some(2..=3));
        assert_eq!(parse_workers("3").ok(), Some(3..=3));
        for bad in ["0..2", "3..2", "x", "1..65", ""] {
            assert!(parse_workers(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn round_robin_needs_a_fixed_worker_count() {
        assert!(load_policy(PlacementArg::RoundRobin, &(3..=3)).is_ok_and(|p| p.is_none()));
        assert!(load_policy(PlacementArg::RoundRobin, &(1..=3)).is_err());
        assert!(load_policy(PlacementArg::Managed, &(1..=3)).is_ok_and(|p| p.is_some()));
    }
}
