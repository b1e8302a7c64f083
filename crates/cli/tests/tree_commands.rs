//! `larder tree STORE ls|get|put|rm|scan|drop` end to end through the
//! built binary: text and hex keys, scans by prefix and range in both
//! directions with a limit, lengths in the listing, refusals that say
//! what is wrong (and change nothing), what the trees API sees afterwards,
//! fsck clean, and the refusal while a server serves the store.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/served.rs"]
mod served;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{fsck_clean, larder};
use rustix::process::Signal;
use served::Served;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: Output, what: &str) -> String {
    assert!(!out.status.success(), "{what} should fail: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn put_get_scan_rm_ls_and_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(larder(&["init", s(&store)]), "init");
    let st = s(&store);
    for (k, v) in [("apple", "red"), ("apricot", "orange"), ("banana", "yellow"), ("cherry", "dark red")] {
        ok(larder(&["tree", st, "put", "fruit", k, v]), "put");
    }
    ok(larder(&["tree", st, "--hex", "put", "bytes", "00ff", "0a0b"]), "put --hex");
    assert_eq!(ok(larder(&["tree", st, "get", "fruit", "banana"]), "get"), "yellow\n");
    assert_eq!(ok(larder(&["tree", st, "get", "bytes", "--hex", "00ff"]), "get --hex"), "0a0b\n");
    // Without --hex the bytes are shown escaped.
    assert_eq!(ok(larder(&["tree", st, "scan", "bytes"]), "scan bytes"), "\\u{0}\\xff\t\\n\\u{b}\n");

    let scan = |args: &[&str]| {
        let mut all = vec!["tree", st, "scan", "fruit"];
        all.extend_from_slice(args);
        ok(larder(&all), "scan").lines().map(|l| l.split('\t').next().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(scan(&[]), ["apple", "apricot", "banana", "cherry"]);
    assert_eq!(scan(&["--reverse"]), ["cherry", "banana", "apricot", "apple"]);
    assert_eq!(scan(&["--prefix", "ap"]), ["apple", "apricot"]);
    assert_eq!(scan(&["--prefix", "ap", "--reverse", "--limit", "1"]), ["apricot"]);
    assert_eq!(scan(&["--start", "apricot", "--end", "cherry"]), ["apricot", "banana"]);
    assert_eq!(scan(&["--start", "b", "--limit", "1"]), ["banana"]);
    let line = ok(larder(&["tree", st, "scan", "fruit", "--prefix", "ch"]), "scan value");
    assert_eq!(line, "cherry\tdark red\n");

    ok(larder(&["tree", st, "rm", "fruit", "apple"]), "rm");
    let err = refused(larder(&["tree", st, "rm", "fruit", "apple"]), "rm twice");
    assert!(err.contains("no key apple in tree \"fruit\""), "{err}");
    let err = refused(larder(&["tree", st, "get", "nothing", "k"]), "get from no tree");
    assert!(err.contains("no tree named \"nothing\""), "{err}");
    let err = refused(larder(&["tree", st, "--hex", "put", "bytes", "0g", "00"]), "bad hex");
    assert!(err.contains("is not hex"), "{err}");
    let big = "k".repeat(larder_trees::MAX_KEY_BYTES + 1);
    let err = refused(larder(&["tree", st, "put", "fruit", &big, "v"]), "key too large");
    assert!(err.contains("over the limit"), "{err}");

    let ls = ok(larder(&["tree", st, "ls"]), "ls");
    let rows: Vec<Vec<&str>> = ls.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows, [vec!["bytes", "1"], vec!["fruit", "3"]], "{ls}");

    ok(larder(&["tree", st, "drop", "bytes"]), "drop");
    let err = refused(larder(&["tree", st, "drop", "bytes"]), "drop twice");
    assert!(err.contains("no tree named \"bytes\""), "{err}");
    fsck_clean(&store);

    // What the commands wrote is what the trees API reads.
    let trees = larder_trees::Trees::open_dir(&store).unwrap();
    assert_eq!(trees.list_trees().unwrap(), ["fruit"]);
    let fruit = trees.tree("fruit").unwrap().unwrap();
    assert_eq!(fruit.get(b"cherry").unwrap(), Some(b"dark red".to_vec()));
    assert_eq!(fruit.approximate_len().unwrap(), 3);
    trees.close().unwrap();
}

#[test]
fn tree_commands_refuse_while_a_server_serves_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(larder(&["init", s(&store)]), "init");
    ok(larder(&["tree", s(&store), "put", "t", "k", "v"]), "put before serving");
    let server = Served::start(&store, &[]);
    let err = refused(larder(&["tree", s(&store), "put", "t", "k", "w"]), "put while served");
    assert!(err.contains("served by `larder serve`") && err.contains("stop the server"), "{err}");
    server.signal(Signal::TERM);
    let (status, _) = server.wait(Duration::from_secs(60));
    assert!(status.success());
    assert_eq!(ok(larder(&["tree", s(&store), "get", "t", "k"]), "get once the server stopped"), "v\n");
}
