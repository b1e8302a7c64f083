//! Larder's FUSE mount (DESIGN.md, layer 8): the kernel's file system
//! requests served by [`larder_fs::Fs`], multi-threaded, through fuser
//! (pure Rust; it mounts with Debian's `fusermount3`, from `fuse3`).
//!
//! larder-fs checks every request's permissions itself, with Linux's
//! rules, in the transaction that acts on them. The mount also asks the
//! kernel to check modes first (`default_permissions`) whenever such a
//! check could refuse something: always when users other than the
//! mounting one reach the mount (`allow_other`), since only the kernel
//! checks search permission on the directories of names it has cached.
//! A mount of root's that only root reaches is not checked twice (see
//! [`KernelChecks`]): there the kernel's check could refuse nothing, yet
//! it costs a GETATTR of the directory with every create or removal in it
//! (each one invalidates the directory's cached attributes, which the
//! check reads). The mount asks for `allow_other` when told to, and for
//! writes of up to 1 MiB per request.
//! fsync and fsyncdir are implemented (an unimplemented fsync would make
//! the kernel report success for every later one), each making every
//! earlier change durable; close does not sync. Create, mknod, mkdir,
//! symlink, link and rename answer at once, EEXIST included. When another
//! interface in the process (the KV API) changes the store, the kernel's
//! cached inodes and entries are invalidated (`watch`).
#![deny(missing_docs)]

mod adapter;
mod convert;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use adapter::MAX_WRITE_BYTES;
use fuser::{Config, MountOption, SessionACL};
use larder_fs::Fs;

/// How a store is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOptions {
    /// How long the kernel may cache a name's lookup. Default 60 s: the
    /// mount process is the store's only owner, and changes made in it
    /// other than through the mount invalidate the kernel's copies, so a
    /// cached copy is never stale for long for any other reason.
    pub entry_timeout: Duration,
    /// How long the kernel may cache attributes. Default 60 s (as
    /// `entry_timeout`).
    pub attr_timeout: Duration,
    /// Let users other than the mounting one use the mount (`allow_other`;
    /// needs `user_allow_other` in /etc/fuse.conf unless mounted by root).
    pub allow_other: bool,
    /// Threads serving requests. Default 4.
    pub threads: usize,
    /// When the kernel checks modes before larder-fs does. Default
    /// [`KernelChecks::WhenTheyCanRefuse`].
    pub kernel_checks: KernelChecks,
}

/// When the kernel checks modes itself (`default_permissions`) before a
/// request reaches larder-fs, which checks every request in any case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelChecks {
    /// On every mount.
    Always,
    /// On every mount but one made by root without `allow_other`. Only
    /// processes of uid 0 reach such a mount (the kernel refuses the
    /// others), and the kernel refuses uid 0 nothing that larder-fs
    /// allows: both let it read, write and search anything, and the one
    /// refusal it is owed, executing a file with no execute bit, the
    /// kernel makes without `default_permissions` too. (A process of uid 0
    /// that gave up CAP_DAC_OVERRIDE is refused by the kernel's check but
    /// not by larder-fs, which sees only uids: use `Always` where such
    /// processes must be kept out.) Without the check the kernel sends no
    /// GETATTR of a directory before each name it creates or removes in
    /// it, a round trip of three per create.
    #[default]
    WhenTheyCanRefuse,
}

impl KernelChecks {
    /// Whether a mount with `allow_other` made by a process of effective
    /// uid `mounting_uid` asks the kernel to check.
    pub fn applies(self, allow_other: bool, mounting_uid: u32) -> bool {
        match self {
            KernelChecks::Always => true,
            KernelChecks::WhenTheyCanRefuse => allow_other || mounting_uid != 0,
        }
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            entry_timeout: Duration::from_secs(60),
            attr_timeout: Duration::from_secs(60),
            allow_other: false,
            threads: 4,
            kernel_checks: KernelChecks::default(),
        }
    }
}

/// Why a mount failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The kernel or fusermount3 refused the mount.
    #[error("cannot mount on {path}: {source} (is /dev/fuse there and fuse3's fusermount3 installed?)")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Serving or unmounting failed.
    #[error("mount on {path}: {source}")]
    Session {
        /// The mount point.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn config(options: &MountOptions) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![MountOption::FSName("larder".into()), MountOption::Subtype("larder".into())];
    if options.kernel_checks.applies(options.allow_other, mounting_uid()) {
        c.mount_options.push(MountOption::DefaultPermissions);
    }
    c.acl = if options.allow_other { SessionACL::All } else { SessionACL::Owner };
    c.n_threads = Some(options.threads.max(1));
    c.clone_fd = true;
    c
}

/// The effective uid of this process, which mounts.
fn mounting_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A mount served by background threads; unmounted by [`Mounted::unmount`]
/// or when dropped.
pub struct Mounted {
    session: fuser::BackgroundSession,
    path: PathBuf,
    _watch: watch::Watcher,
}

impl Mounted {
    /// A function that returns once the kernel was told to drop its copies
    /// of everything other interfaces changed so far (waiting at most a
    /// second). A server sharing the store calls it before answering a
    /// request that changed the store, so that what its client changed is
    /// what the mount shows once the client has its answer, whatever the
    /// mount's cache timeouts.
    pub fn invalidation_barrier(&self) -> Arc<dyn Fn() + Send + Sync> {
        let progress = self._watch.progress();
        Arc::new(move || progress.settle())
    }

    /// Unmounts and waits for the serving threads (which sync the store).
    pub fn unmount(self) -> Result<(), MountError> {
        let Mounted { session, path, _watch } = self;
        drop(_watch);
        session.umount_and_join().map_err(|source| MountError::Session { path, source })
    }
}

/// Mounts `fs` on `mountpoint`, served by background threads.
pub fn spawn(fs: Arc<Fs>, mountpoint: &Path, options: &MountOptions) -> Result<Mounted, MountError> {
    let adapter = adapter::LarderFuse::new(fs.clone(), options);
    let session = fuser::spawn_mount(adapter, mountpoint, &config(options))
        .map_err(|source| MountError::Mount { path: mountpoint.to_path_buf(), source })?;
    let watch = watch::Watcher::start(fs, session.notifier())
        .map_err(|source| MountError::Session { path: mountpoint.to_path_buf(), source })?;
    Ok(Mounted { session, path: mountpoint.to_path_buf(), _watch: watch })
}

/// Mounts `fs` on `mountpoint` and serves it on this thread until it is
/// unmounted: by `fusermount3 -u`, or by `on_mounted`'s unmounter (which
/// the CLI calls on SIGINT or SIGTERM).
pub fn run(
    fs: Arc<Fs>,
    mountpoint: &Path,
    options: &MountOptions,
    on_mounted: impl FnOnce(Unmounter),
) -> Result<(), MountError> {
    let adapter = adapter::LarderFuse::new(fs.clone(), options);
    let mut session = fuser::Session::new(adapter, mountpoint, &config(options))
        .map_err(|source| MountError::Mount { path: mountpoint.to_path_buf(), source })?;
    let watch = watch::Watcher::start(fs, session.notifier())
        .map_err(|source| MountError::Session { path: mountpoint.to_path_buf(), source })?;
    on_mounted(Unmounter(session.unmount_callable()));
    let served = session.run();
    drop(watch);
    served.map_err(|source| MountError::Session { path: mountpoint.to_path_buf(), source })
}

/// Unmounts a mount served by [`run`], from any thread.
pub struct Unmounter(fuser::SessionUnmounter);

impl Unmounter {
    /// Unmounts; [`run`] then returns.
    pub fn unmount(&mut self) -> std::io::Result<()> {
        self.0.unmount()
    }
}
