//! `larder-locate`, the program: on a store holding a locate table, it
//! prints exactly the paths a scan of the list finds for each name, in
//! list order, and exits 0 when something matched, 1 when nothing did,
//! 2 on an error (no store, no table).

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use larder_heap::{Credentials, Heap};
use larder_io::{CheckedStorage, RealStorage};
use larder_object::{CreationOptions, Store, StoreOptions};

/// A small tree: repeated names in different directories, names that are
/// prefixes of others (`a.c`, `a.cc`), a path without a `/`.
fn tree() -> Vec<String> {
    let mut list = vec!["toplevel".to_string()];
    for user in 0..7 {
        for dir in 0..40 {
            for file in 0..(3 + (user * 7 + dir) % 11) {
                list.push(format!("/home/u{user}/src/d{dir}/f{file}.c"));
                if (user + dir + file) % 5 == 0 {
                    list.push(format!("/home/u{user}/src/d{dir}/f{file}.cc"));
                }
            }
            list.push(format!("/home/u{user}/src/d{dir}/Makefile"));
        }
    }
    list.sort();
    list.dedup();
    list
}

/// What a scan of `paths` answers for `name`.
fn scan(paths: &[String], name: &str) -> Vec<String> {
    paths.iter().filter(|p| p.rsplit('/').next() == Some(name)).cloned().collect()
}

/// A store in `dir` whose heap `heap` holds the table of `paths` named `table`.
fn make_database(dir: &Path, heap_path: &str, table: &str, paths: &[String]) {
    let storage = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
    let store = Store::create(storage, dir, CreationOptions::default(), StoreOptions::default()).expect("store");
    let store = Arc::new(store);
    {
        let credentials = Credentials::user(rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let heap = Heap::open(&store, heap_path, credentials).expect("heap");
        larder_locate::write_table(&heap, table, paths).expect("table");
        heap.sync().expect("sync");
    }
    Arc::try_unwrap(store).expect("the heap is dropped").close().expect("close");
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larder-locate")).args(args).output().expect("run larder-locate")
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone()).expect("utf-8").lines().map(str::to_string).collect()
}

#[test]
fn it_answers_as_a_scan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let paths = tree();
    make_database(&store, "/locate", "locate-db", &paths);
    let store_arg = store.to_str().expect("utf-8 path");
    for name in ["f0.c", "f3.cc", "Makefile", "toplevel", "f12.c", "f1", "absent", "d3", "c"] {
        let out = run(&[store_arg, name]);
        let want = scan(&paths, name);
        assert_eq!(lines(&out), want, "{name}");
        assert_eq!(out.status.code(), Some(if want.is_empty() { 1 } else { 0 }), "{name}");
    }
    // Several names: their answers one after the other.
    let out = run(&[store_arg, "f2.c", "absent", "Makefile"]);
    let want: Vec<String> = ["f2.c", "absent", "Makefile"].iter().flat_map(|n| scan(&paths, n)).collect();
    assert_eq!(lines(&out), want);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn it_finds_the_table_where_it_is_told_and_reports_timings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let paths = tree();
    make_database(&store, "/bench", "paths", &paths);
    let store_arg = store.to_str().expect("utf-8 path");
    let out = run(&["--heap", "/bench", "--table", "paths", "--timings", store_arg, "f1.c"]);
    assert_eq!(lines(&out), scan(&paths, "f1.c"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"open_secs\":") && stderr.contains("\"secs\":"), "{stderr}");
    assert!(stderr.contains(&format!("\"matches\":{}", scan(&paths, "f1.c").len())), "{stderr}");
    // The default heap holds no such table: an error, exit 2.
    let out = run(&[store_arg, "f1.c"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_store_or_bad_arguments_are_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nothing");
    let out = run(&[missing.to_str().expect("utf-8 path"), "f1.c"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stderr.is_empty());
    assert_eq!(run(&["only-a-store"]).status.code(), Some(2));
    assert_eq!(run(&["--bogus", "a", "b"]).status.code(), Some(2));
}
