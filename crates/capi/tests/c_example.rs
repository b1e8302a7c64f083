//! The C example, examples/c/larder_example.c, compiled with the system's
//! C compiler against include/larder_client.h and liblarder_client.so,
//! run against a real `larder serve` on a fresh store: it must exit 0
//! having done every step, leave what it says it leaves (read back here
//! through the Rust client), and the stopped store must be clean.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{fsck_clean, library_dir, Served};

/// Compiles the example into `out`; fails clearly without a C compiler.
fn compile_example(out: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = crate_dir.join("../../examples/c/larder_example.c");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(&source)
        .arg("-L")
        .arg(library_dir())
        .arg("-llarder_client")
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

#[test]
fn the_c_example_runs_against_a_server() {
    let mut served = Served::start(false);
    let program = served.dir.path().join("larder_example");
    compile_example(&program);

    let output = Command::new(&program).arg(&served.store).env("LD_LIBRARY_PATH", library_dir()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the example exited with {}:\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "connected",
        "wrote 13 bytes (copied)",
        "wrote 262144 bytes (zero-copy)",
        "fsynced",
        "read back: hello from C",
        "read back 262144 bytes (copied), pattern intact",
        "read back 262144 bytes (zero-copy), pattern intact",
        "read at the end: 0 bytes",
        "fstat: regular file, mode 644, 262157 bytes",
        "refused as expected (EBADF): larder_fsync: ",
        "stat /docs: directory, mode 755",
        "entry: hello.txt (file)",
        "entry: drafts (directory)",
        "renamed to /docs/drafts/greeting.txt",
        "refused as expected (EEXIST): larder_mkdir: ",
        "refused as expected (ENOTEMPTY): larder_rmdir: ",
        "refused as expected (ENOENT): larder_open: /docs/missing",
        "unlinked and removed",
        "kv get notes/2024/first: kept by the server",
        "kv deleted",
        "done",
    ] {
        assert!(stdout.contains(line), "the example's output lacks {line:?}:\n{stdout}");
    }

    // What the example left, seen by another client: the Rust one.
    let client = client::Client::connect(&served.store).unwrap();
    assert_eq!(client.read("/from-c.txt").unwrap(), b"written by larder_example.c\n");
    assert_eq!(client.metadata("/from-c.txt").unwrap().mode() & 0o7777, 0o640);
    assert_eq!(client.get("notes", "from-c").unwrap().as_deref(), Some(&b"kept by the server"[..]));
    assert!(client.get("notes", "2024/first").unwrap().is_none(), "the deleted key is back");
    assert!(client.metadata("/docs").unwrap_err().is_not_found(), "/docs was removed");
    drop(client);

    served.stop();
    fsck_clean(&served.store);
}
