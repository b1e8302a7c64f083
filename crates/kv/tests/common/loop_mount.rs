//! A small ext4 file system on a loop-mounted image, for tests that fill a
//! real file system (needs root, mkfs.ext4 and loop devices). Shared with
//! the CLI's mount tests, which include this file by path.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

/// A loop-mounted ext4 image, unmounted when dropped.
pub struct LoopMount {
    /// Where it is mounted.
    pub mnt: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopMount {
    /// Mounts a fresh image of `bytes` in a new temporary directory, or
    /// says why it could not.
    pub fn new(bytes: u64) -> Result<LoopMount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        std::fs::File::create(&image).and_then(|f| f.set_len(bytes)).map_err(|e| e.to_string())?;
        run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()])?;
        run("mount", &["-o", "loop", image.to_str().unwrap(), mnt.to_str().unwrap()])?;
        Ok(LoopMount { mnt, _dir: dir })
    }

    /// [`LoopMount::new`] for a test: `None` (the test returns having
    /// checked nothing) only when `LARDER_SKIP_ROOT=1` asks to skip what
    /// cannot run here; otherwise a failure fails the test, so a machine
    /// without root cannot pass it by testing nothing.
    pub fn for_test(bytes: u64) -> Option<LoopMount> {
        match LoopMount::new(bytes) {
            Ok(m) => Some(m),
            Err(why) if std::env::var("LARDER_SKIP_ROOT").as_deref() == Ok("1") => {
                eprintln!("SKIPPED (LARDER_SKIP_ROOT=1): cannot loop-mount an ext4 image: {why}");
                None
            }
            Err(why) => panic!("cannot loop-mount an ext4 image (run as root, or set LARDER_SKIP_ROOT=1): {why}"),
        }
    }

    /// The file system's size in bytes.
    pub fn total(&self) -> u64 {
        let s = rustix::fs::statvfs(&self.mnt).unwrap();
        s.f_blocks * s.f_frsize
    }

    /// The bytes it has for unprivileged writers.
    pub fn available(&self) -> u64 {
        let s = rustix::fs::statvfs(&self.mnt).unwrap();
        s.f_bavail * s.f_frsize
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let mnt = self.mnt.to_str().unwrap();
        if run("umount", &[mnt]).is_err() {
            let _ = run("umount", &["-l", mnt]);
        }
    }
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}
