//! `larder heap ls|stat|cat|rm` end to end through the built binary, on a
//! store holding a heap built with the object layer (the heap crate is
//! another layer): listings, an object's record, its bytes, freeing it
//! (names, records and file gone, fsck clean), refusals that say what to
//! do, and the refusal while a server serves the store.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../object/tests/heap_fixture/mod.rs"]
mod heap_fixture;
#[path = "common/served.rs"]
mod served;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{fsck_clean, larder};
use larder_kv::{Kv, KvOptions};
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

/// A store with heap `/apps/heap`: object `a` (5 KiB pattern, names
/// "alpha" and "first") and `b` ("bee", no name). Returns (a, b).
fn store_with_heap(dir: &Path) -> (u64, u64) {
    let kv = Kv::create(dir, KvOptions::default()).unwrap();
    kv.create_bucket("apps").unwrap();
    let apps = larder_object::meta::Name::new("apps").unwrap();
    let apps = larder_namespace_free_lookup(kv.store(), &apps);
    let heap = heap_fixture::create_heap(kv.store(), apps, "heap");
    let pattern: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let a = heap_fixture::add_object(kv.store(), &heap, &pattern, &["alpha", "first"]);
    let b = heap_fixture::add_object(kv.store(), &heap, b"bee", &[]);
    kv.close().unwrap();
    (a, b)
}

/// The id the root's entry `name` names.
fn larder_namespace_free_lookup(store: &larder_object::Store, name: &larder_object::meta::Name) -> u64 {
    let v = store.index().get(&larder_object::meta::dentry_key(larder_object::ROOT_ID, name)).unwrap().unwrap();
    larder_object::meta::Dentry::decode(&v).unwrap().child
}

#[test]
fn ls_stat_cat_and_rm_of_a_heap() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (a, b) = store_with_heap(&store);
    let st = s(&store);

    let heaps = ok(larder(&["heap", "ls", st]), "heap ls");
    let line = heaps.lines().find(|l| l.starts_with("/apps/heap")).unwrap_or_else(|| panic!("{heaps}"));
    assert!(line.trim_end().ends_with(" 2"), "two objects: {line}");

    let objects = ok(larder(&["heap", "ls", st, "/apps/heap"]), "heap ls HEAP");
    let row =
        |id: u64| objects.lines().find(|l| l.split_whitespace().next() == Some(&id.to_string())).unwrap().to_string();
    assert_eq!(row(a).split_whitespace().collect::<Vec<_>>(), [&a.to_string(), "5000", "0", "alpha", "first"]);
    assert_eq!(row(b).split_whitespace().collect::<Vec<_>>(), [&b.to_string(), "3", "0"]);

    let stat = ok(larder(&["heap", "stat", st, "apps/heap", "alpha"]), "heap stat NAME");
    for want in [
        format!("object:        {a}"),
        "size:          5000".into(),
        "durable size:  5000".into(),
        format!("heap/{a} (5000 bytes)"),
        "names:         alpha first".into(),
        "arena:         no (0 span records".into(),
    ] {
        assert!(stat.contains(&want), "{want:?} in\n{stat}");
    }
    assert_eq!(ok(larder(&["heap", "stat", st, "/apps/heap", &a.to_string()]), "heap stat ID"), stat);

    let cat = larder(&["heap", "cat", st, "/apps/heap", "first"]);
    assert!(cat.status.success());
    let pattern: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(cat.stdout, pattern);
    assert_eq!(larder(&["heap", "cat", st, "/apps/heap", &b.to_string()]).stdout, b"bee");

    let out = ok(larder(&["heap", "rm", st, "/apps/heap", "alpha"]), "heap rm");
    assert!(out.contains(&format!("freed object {a}")) && out.contains("alpha first"), "{out}");
    assert!(!store.join("heap").join(a.to_string()).exists(), "its file is gone");
    assert!(store.join("heap").join(b.to_string()).exists());
    let objects = ok(larder(&["heap", "ls", st, "/apps/heap"]), "heap ls after rm");
    assert!(!objects.contains("alpha") && objects.contains(&b.to_string()), "{objects}");
    let err = refused(larder(&["heap", "cat", st, "/apps/heap", "alpha"]), "cat of a freed name");
    assert!(err.contains("no object \"alpha\""), "{err}");
    fsck_clean(&store);

    // Through the KV path the name is gone as well.
    let kv = Kv::open(&store, KvOptions::default()).unwrap();
    assert_eq!(kv.get("apps", "heap/names/alpha").unwrap(), None);
    assert_eq!(kv.get("apps", format!("heap/objects/{b}")).unwrap().unwrap(), b"bee");
    kv.close().unwrap();
}

#[test]
fn refusals_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    store_with_heap(&store);
    let st = s(&store);
    let err = refused(larder(&["heap", "ls", st, "/nowhere"]), "an unknown heap");
    assert!(err.contains("larder heap ls STORE"), "{err}");
    let err = refused(larder(&["heap", "ls", st, "/apps"]), "a directory that is no heap");
    assert!(err.contains("not a heap"), "{err}");
    let err = refused(larder(&["heap", "rm", st, "/apps/heap", "nobody"]), "an unknown object");
    assert!(err.contains("no object \"nobody\""), "{err}");
    let err = refused(larder(&["heap", "ls", s(&tmp.path().join("none"))]), "no store");
    assert!(err.contains("larder init"), "{err}");
    fsck_clean(&store);
}

#[test]
fn heap_commands_refuse_while_a_server_serves_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (a, _) = store_with_heap(&store);
    let server = Served::start(&store, &[]);
    let err = refused(larder(&["heap", "rm", s(&store), "/apps/heap", "alpha"]), "heap rm while served");
    assert!(err.contains("served by `larder serve`") && err.contains("stop the server"), "{err}");
    // The store commands still read the object through the server.
    let cat = larder(&["cat", s(&store), "apps/heap/names/alpha"]);
    assert!(cat.status.success(), "{}", String::from_utf8_lossy(&cat.stderr));
    assert_eq!(cat.stdout.len(), 5000, "cat through the server");
    server.signal(Signal::TERM);
    let (status, _) = server.wait(Duration::from_secs(60));
    assert!(status.success());
    assert!(store.join("heap").join(a.to_string()).exists(), "nothing was freed");
    ok(larder(&["heap", "rm", s(&store), "/apps/heap", "alpha"]), "heap rm once the server stopped");
}
