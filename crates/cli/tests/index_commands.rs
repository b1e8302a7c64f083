//! The `larder index` commands end to end through the built binary: a
//! round trip through put, get, scan, delete and stats, and bad input (a
//! missing store, a missing key, a bad argument) that gets a clear error,
//! a non-zero exit and changes nothing.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn larder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larder")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn put_get_scan_delete_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let d = dir.to_str().unwrap();
    assert!(larder(&["index", "put", d, "apple", "red"]).status.success());
    assert!(larder(&["index", "put", d, "avocado", "green"]).status.success());
    assert!(larder(&["index", "put", d, "banana", "yellow"]).status.success());
    let o = larder(&["index", "get", d, "apple"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "red\n");
    let o = larder(&["index", "scan", d, "a"]);
    assert_eq!(stdout(&o), "apple\tred\navocado\tgreen\n");
    let o = larder(&["index", "scan", d, "a", "--reverse"]);
    assert_eq!(stdout(&o), "avocado\tgreen\napple\tred\n");
    assert!(larder(&["index", "delete", d, "apple"]).status.success());
    let o = larder(&["index", "get", d, "apple"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not found"), "{}", stderr(&o));
    let o = larder(&["index", "stats", d]);
    assert!(stdout(&o).contains("sequence:"), "{}", stdout(&o));
}

#[test]
fn reading_a_missing_store_is_refused_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nothing-here");
    let d = dir.to_str().unwrap();
    for args in [
        vec!["index", "get", d, "k"],
        vec!["index", "scan", d],
        vec!["index", "stats", d],
        vec!["index", "delete", d, "k"],
    ] {
        let o = larder(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains("no index store here") && stderr(&o).contains(d), "{args:?}: {}", stderr(&o));
    }
    assert!(!dir.exists(), "a read created the store directory");
}

#[test]
fn bad_arguments_get_usage_errors() {
    let o = larder(&["index", "put", "/tmp/x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("Usage"), "{}", stderr(&o));
    let o = larder(&["bench", "index", "--n", "not-a-number"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("invalid value"), "{}", stderr(&o));
}
