//! Whether a test that needs FUSE and root can run here.

use std::path::Path;

/// Whether the machine has /dev/fuse and this process is root; fails the
/// test when not, naming what root was needed for (`for_what`, e.g. "to
/// switch users"), unless `LARDER_SKIP_FUSE=1` says to skip such tests.
pub fn can_run(for_what: &str) -> bool {
    let missing = if !Path::new("/dev/fuse").exists() {
        "no /dev/fuse on this machine, so nothing can be mounted".to_string()
    } else if !rustix::process::geteuid().is_root() {
        format!("not root, which the test needs {for_what}")
    } else {
        return true;
    };
    let skip = std::env::var("LARDER_SKIP_FUSE").is_ok_and(|v| v == "1");
    assert!(skip, "{missing}; set LARDER_SKIP_FUSE=1 to skip the tests that need FUSE or root");
    eprintln!("SKIPPED (LARDER_SKIP_FUSE=1): {missing}");
    false
}
