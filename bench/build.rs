//! Links the system RocksDB when the `rocksdb` feature is on, and records the
//! versions of the peer engines so the report can name them.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../Cargo.lock");
    if std::env::var_os("CARGO_FEATURE_ROCKSDB").is_some() {
        // Debian 12's librocksdb-dev (RocksDB 7.8); scripts/bench-deps.sh installs it.
        println!("cargo:rustc-link-lib=rocksdb");
        let version = Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", "librocksdb-dev"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .unwrap_or_else(|| "unknown".to_string());
        println!("cargo:rustc-env=LARDER_BENCH_ROCKSDB_VERSION={version}");
    }
    println!("cargo:rustc-env=LARDER_BENCH_COMMIT={}", source_commit());
    let lock = std::fs::read_to_string("../Cargo.lock").unwrap_or_default();
    for (krate, var) in [("fjall", "FJALL"), ("heed", "HEED"), ("lmdb-master-sys", "LMDB_SYS"), ("redb", "REDB")] {
        println!("cargo:rustc-env=LARDER_BENCH_{var}_VERSION={}", locked_version(&lock, krate));
    }
}

/// The commit the binary is built from (`+dirty` if tracked files differ
/// from it), so a report names it wherever the binary runs; "unknown"
/// outside a git checkout. Rebuilt when HEAD, a branch, the index or any
/// source moves.
fn source_commit() -> String {
    for path in ["../.git/HEAD", "../.git/refs/heads", "../.git/index", "../crates", "src"] {
        println!("cargo:rerun-if-changed={path}");
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else { return "unknown".to_string() };
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.trim().is_empty());
    format!("{}{}", head.trim(), if dirty { "+dirty" } else { "" })
}

/// The version Cargo.lock pins for `krate`, or "unknown".
fn locked_version(lock: &str, krate: &str) -> String {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{krate}\"") {
            if let Some(v) = lines.next().and_then(|l| l.trim().strip_prefix("version = ")) {
                return v.trim_matches('"').to_string();
            }
        }
    }
    "unknown".to_string()
}
