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
    let lock = std::fs::read_to_string("../Cargo.lock").unwrap_or_default();
    for (krate, var) in [("fjall", "FJALL"), ("heed", "HEED"), ("lmdb-master-sys", "LMDB_SYS")] {
        println!("cargo:rustc-env=LARDER_BENCH_{var}_VERSION={}", locked_version(&lock, krate));
    }
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
