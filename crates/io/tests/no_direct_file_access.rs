//! Engine crates touch files only through `larder_io::Storage`, so the
//! simulated backend sees every byte. This test scans the source of every
//! crate except `io` (which implements the backends) and `cli` (which talks
//! to the user's file system) and fails, listing file:line, on any direct
//! file access. Whole-line `//` comments are skipped.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    "std::fs",
    "fs::File",
    "File::open",
    "File::create",
    "OpenOptions::new()",
    "libc::open",
    "rustix::fs",
    "memmap2",
    "tokio::fs",
];

// `fuse` reads /proc/PID/status of the processes making requests (their
// groups), and its tests use the mount through std::fs: neither is store
// I/O. `protocol` maps memfds, `server` makes and removes its socket file,
// `client` and `capi` are clients (a client's `OpenOptions` is its own
// type) and never see the store's files: the server reaches the store only
// through `larder-fs`.
const EXEMPT_CRATES: &[&str] = &["io", "cli", "fuse", "protocol", "server", "client", "capi"];

/// `(line number, pattern)` for each forbidden use in `text`.
fn violations(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for pattern in FORBIDDEN {
            if line.contains(pattern) {
                found.push((i + 1, *pattern));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn scanner_flags_direct_access_and_skips_comments() {
    let text = "use larder_io::Storage;\n// std::fs is banned\nlet f = std::fs::File::open(p)?;\n";
    let found = violations(text);
    assert_eq!(found, vec![(3, "std::fs"), (3, "fs::File"), (3, "File::open")]);
    assert!(violations("let o = OpenOptions::CREATE;").is_empty());
    assert_eq!(violations("let o = OpenOptions::new();"), vec![(1, "OpenOptions::new()")]);
}

#[test]
fn engine_crates_use_only_the_storage_trait() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut crate_dirs: Vec<PathBuf> =
        std::fs::read_dir(&crates_dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    crate_dirs.sort();
    assert!(crate_dirs.iter().any(|d| d.ends_with("io")), "the crates directory was not found at {crates_dir:?}");

    let mut report = Vec::new();
    for dir in crate_dirs {
        let name = dir.file_name().unwrap().to_string_lossy();
        if EXEMPT_CRATES.contains(&name.as_ref()) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, pattern) in violations(&text) {
                report.push(format!("{}:{line}: {pattern}", file.display()));
            }
        }
    }
    assert!(report.is_empty(), "direct file access outside larder-io:\n{}", report.join("\n"));
}
