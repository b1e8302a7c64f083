//! A real `larder serve` on a fresh store in a temporary directory, for
//! the tests of the C library; and where the built library and binary are.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a server may take to start or to stop.
const PATIENCE: Duration = Duration::from_secs(60);

/// The directory this test binary was built into (`target/debug`), where
/// cargo also puts the `larder` binary; the C library is built beside the
/// test binary, in its `deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    assert_eq!(deps.file_name().and_then(|n| n.to_str()), Some("deps"), "test binary not in a deps/ directory");
    deps.parent().unwrap().to_path_buf()
}

/// The cargo profile this test was built with, from its directory.
fn profile() -> &'static str {
    match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("debug") => "test",
        Some("release") => "release",
        other => panic!("unknown profile directory {other:?}"),
    }
}

/// Builds `args` (a package and target) with cargo, in this test's
/// profile and target directory: a no-op when it is fresh.
fn cargo_build(args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--locked", "--profile", profile()])
        .args(args)
        .arg("--target-dir")
        .arg(profile_dir().parent().unwrap())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap_or_else(|e| panic!("running {cargo:?} to build {args:?}: {e}"));
    assert!(status.success(), "building {args:?} failed: {status}");
}

/// Where `liblarder.so` and `liblarder.a` are, built now from the current
/// source. Cargo does not build them for the tests: the crate has no rlib
/// for a test to link, so nothing makes the library a test's dependency.
pub fn library_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            cargo_build(&["-p", "larder-capi", "--lib"]);
            let dir = profile_dir().join("deps");
            assert!(dir.join("liblarder.so").is_file(), "{} has no liblarder.so after the build", dir.display());
            assert!(dir.join("liblarder.a").is_file(), "{} has no liblarder.a after the build", dir.display());
            dir
        })
        .clone()
}

/// The `larder` binary: `LARDER_BIN` if set, else the one cargo builds
/// into this test's profile directory (built here; a no-op when fresh).
pub fn larder_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("LARDER_BIN") {
                let path = PathBuf::from(path);
                assert!(path.is_file(), "LARDER_BIN is {}, which is not a file", path.display());
                return path;
            }
            cargo_build(&["-p", "larder-cli", "--bin", "larder"]);
            profile_dir().join("larder")
        })
        .clone()
}

/// A store in a temporary directory (traversable by every user) and the
/// `larder serve` process serving it; killed if dropped unstopped.
pub struct Served {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    /// Where the server listens.
    pub socket: PathBuf,
    child: Option<Child>,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    /// Initialises a store and serves it: on `STORE/larder.sock`, or with
    /// `own_socket` on `DIR/server.sock`, which every user can reach.
    pub fn start(own_socket: bool) -> Served {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = dir.path().join("store");
        let init = Command::new(larder_binary()).arg("init").arg(&store).output().unwrap();
        assert!(init.status.success(), "larder init: {}", String::from_utf8_lossy(&init.stderr));
        let socket = if own_socket { dir.path().join("server.sock") } else { store.join("larder.sock") };
        let mut command = Command::new(larder_binary());
        command.arg("serve").arg(&store).args(["--workers", "1..2"]);
        if own_socket {
            command.arg("--socket").arg(&socket);
        }
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (lines, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let served = Served { dir, store, socket, child: Some(child), stderr };
        served.wait_for_line("larder: serving");
        served
    }

    /// Waits until the server prints a line containing `needle`; fails
    /// with what it printed if it exits or takes too long first.
    fn wait_for_line(&self, needle: &str) {
        let mut seen = Vec::new();
        loop {
            match self.stderr.recv_timeout(PATIENCE) {
                Ok(line) if line.contains(needle) => return,
                Ok(line) => seen.push(line),
                Err(e) => panic!("larder serve: no {needle:?} ({e}); it printed: {seen:?}"),
            }
        }
    }

    /// Stops the server with SIGTERM and requires a clean exit (everything
    /// durable, the socket removed).
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("the server was stopped before");
        // SIGTERM to the server this test started, by its pid.
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        self.wait_for_line("larder: stopped serving");
        let status = child.wait().unwrap();
        assert!(status.success(), "larder serve exited with {status}");
        assert!(!self.socket.exists(), "the socket {} is left after a clean stop", self.socket.display());
    }

    /// Kills the server with SIGKILL, as a crash would, and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the server was stopped before");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// The store's path as a string.
    pub fn store_str(&self) -> &str {
        self.store.to_str().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `larder fsck STORE` must find the store clean.
pub fn fsck_clean(store: &Path) {
    let out = Command::new(larder_binary()).arg("fsck").arg(store).output().unwrap();
    assert!(
        out.status.success(),
        "fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How a program is linked to the library.
#[derive(Clone, Copy, Debug)]
pub enum Linking {
    Shared,
    Static,
}

/// Compiles the C file `source` into `out` against the header and the
/// library; fails clearly without a C compiler.
pub fn compile(source: &Path, out: &Path, linking: Linking) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(source)
        .args(match linking {
            Linking::Shared => vec!["-L".into(), library_dir().into_os_string(), "-llarder".into()],
            Linking::Static => vec![library_dir().join("liblarder.a").into_os_string()],
        })
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| {
            panic!("no C compiler: running `{compiler}` failed ({e}); install gcc (scripts/setup.sh does) or set CC")
        });
    assert!(
        output.status.success(),
        "compiling {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}
