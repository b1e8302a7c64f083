//! Each peer as a [`Reopen`]: shut and opened again on the same store, for
//! the uncached operations (see [`super::cold_shared`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use larder_fs::{Fs, FsOptions};

use super::cold_shared::Reopen;
use super::targets::{Embedded, Served, Syscalls};
use super::{connect, pin_to, ServerProcess, ServerSpec};

/// The base directory every peer works under.
const BASE: &str = "bench";

/// Runs `f` on the serving side's CPU (with `--pin`), so the threads and
/// processes it starts stay there; then back on the client's.
fn on_server_cpu<R>(spec: &ServerSpec, f: impl FnOnce() -> Result<R>) -> Result<R> {
    let Some((client, server)) = spec.pin else { return f() };
    pin_to(server)?;
    let r = f();
    pin_to(client)?;
    r
}

/// ext4 by syscalls: nothing to shut but the descriptors.
pub struct Ext4Peer {
    pub root: PathBuf,
}

impl Reopen for Ext4Peer {
    type T = Syscalls;

    fn open(&mut self) -> Result<Syscalls> {
        let base = self.root.join(BASE);
        if !base.is_dir() {
            std::fs::create_dir(&base)?;
        }
        Syscalls::new(&base)
    }

    fn shut(&mut self, target: Syscalls) -> Result<()> {
        drop(target);
        Ok(())
    }
}

/// Larder's FUSE mount: mounted at open, unmounted and the store closed
/// at shut.
pub struct MountPeer<'a> {
    pub spec: &'a ServerSpec,
    pub store: PathBuf,
    pub mnt: PathBuf,
    pub options: larder_fuse::MountOptions,
    pub mounted: Option<(larder_fuse::Mounted, Arc<Fs>)>,
}

impl Reopen for MountPeer<'_> {
    type T = Syscalls;

    fn open(&mut self) -> Result<Syscalls> {
        let fs = if self.store.exists() {
            Fs::open(&self.store, FsOptions::default())?
        } else {
            Fs::create(&self.store, FsOptions::default())?
        };
        let fs = Arc::new(fs);
        std::fs::create_dir_all(&self.mnt)?;
        let mounted = on_server_cpu(self.spec, || Ok(larder_fuse::spawn(fs.clone(), &self.mnt, &self.options)?))?;
        self.mounted = Some((mounted, fs));
        let base = self.mnt.join(BASE);
        if !base.is_dir() {
            std::fs::create_dir(&base)?;
        }
        Syscalls::new(&base)
    }

    fn shut(&mut self, target: Syscalls) -> Result<()> {
        drop(target);
        let Some((mounted, fs)) = self.mounted.take() else { bail!("shut a mount that is not mounted") };
        mounted.unmount()?;
        match Arc::try_unwrap(fs) {
            Ok(fs) => Ok(fs.close()?),
            Err(_) => bail!("the unmounted store is still in use"),
        }
    }
}

/// Larder embedded: the store closed at shut and opened again.
pub struct EmbeddedPeer<'a> {
    pub spec: &'a ServerSpec,
    pub store: PathBuf,
}

impl Reopen for EmbeddedPeer<'_> {
    type T = Embedded;

    fn open(&mut self) -> Result<Embedded> {
        if self.store.exists() {
            let fs = on_server_cpu(self.spec, || Ok(Fs::open(&self.store, FsOptions::default())?))?;
            Embedded::attach(fs, BASE)
        } else {
            let fs = on_server_cpu(self.spec, || Ok(Fs::create(&self.store, FsOptions::default())?))?;
            Embedded::new(fs, BASE)
        }
    }

    fn shut(&mut self, target: Embedded) -> Result<()> {
        Ok(target.fs.close()?)
    }
}

/// `larder serve --workers 1` (or the do-nothing server): the server
/// stopped at shut (SIGTERM: everything durable) and started again. The
/// do-nothing server caches nothing and keeps its names only in memory:
/// it runs on.
pub struct ServedPeer<'a> {
    pub spec: &'a ServerSpec,
    pub store: PathBuf,
    pub socket: PathBuf,
    pub process: Option<ServerProcess>,
    pub made: bool,
}

impl ServedPeer<'_> {
    fn start(&mut self) -> Result<()> {
        if self.process.is_some() {
            return Ok(());
        }
        let mut command = if self.spec.peer == "null" {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("server-null").arg("--socket").arg(&self.socket);
            c
        } else {
            if !self.store.exists() {
                Fs::create(&self.store, FsOptions::default())?.close()?;
            }
            let mut c = Command::new(&self.spec.larder);
            c.arg("serve").arg(&self.store).arg("--socket").arg(&self.socket).arg("--workers").arg("1");
            c
        };
        let child = on_server_cpu(self.spec, || {
            Ok(command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn()?)
        })
        .context("starting the server")?;
        self.process = Some(ServerProcess(child));
        Ok(())
    }
}

impl Reopen for ServedPeer<'_> {
    type T = Served;

    fn open(&mut self) -> Result<Served> {
        self.start()?;
        let client = connect(&self.socket, self.spec.peer == "leased", Duration::from_secs(30))?;
        if self.made {
            Ok(Served::attach(client, BASE))
        } else {
            self.made = true;
            Served::new(client, BASE)
        }
    }

    fn shut(&mut self, target: Served) -> Result<()> {
        drop(target);
        if self.spec.peer != "null" {
            // Dropping it sends SIGTERM and waits for the exit.
            drop(self.process.take());
        }
        Ok(())
    }
}
