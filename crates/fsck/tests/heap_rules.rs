//! fsck's heap rules (docs/heap.md, docs/format.md section 18), each
//! broken on purpose in a store holding one heap: a clean heap passes;
//! every damage is reported naming what is wrong, and a stray file is a
//! warning that leaves the store clean.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../object/tests/heap_fixture/mod.rs"]
mod heap_fixture;

use std::path::Path;

use common::{assert_only, commit, creation, deterministic, fsck, limits, name, put_dentry, put_onode, storage, DIR};
use heap_fixture::TestHeap;
use larder_fsck::Problem;
use larder_io::SimStorage;
use larder_object::meta::{
    dentry_key, heap_name_key, heap_object_key, heap_root_key, heap_span_key, DataLocation, HeapObject, HeapRoot, Kind,
};
use larder_object::{Store, ROOT_ID};

/// A store with heap `/heap` holding object `a` (names "x", "y") and `b`
/// (no name).
struct Setup {
    _sim: SimStorage,
    store: Store,
    heap: TestHeap,
    a: u64,
    b: u64,
}

fn setup(seed: u64) -> Setup {
    let sim = SimStorage::new(seed);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let heap = heap_fixture::create_heap(&store, ROOT_ID, "heap");
    let a = heap_fixture::add_object(&store, &heap, &[7u8; 5000], &["x", "y"]);
    let b = heap_fixture::add_object(&store, &heap, b"bee", &[]);
    Setup { _sim: sim, store, heap, a, b }
}

fn record(s: &Setup, id: u64) -> HeapObject {
    s.store.heap_object(id).unwrap().unwrap()
}

#[test]
fn a_clean_heap_passes() {
    let s = setup(41);
    let r = fsck(&s.store);
    assert_only(&r, &[]);
    assert!(r.warnings.is_empty(), "{r}");
    assert!(r.is_clean());
    assert_eq!((r.counts.heap_objects, r.counts.heaps), (2, 1));
}

#[test]
fn a_file_shrunk_outside_larder_or_missing_is_an_error_naming_it() {
    let s = setup(42);
    let path = s.store.heap_file_path(s.a);
    s.store.open_heap_file(s.a, true).unwrap().set_len(100).unwrap();
    let r = fsck(&s.store);
    assert_only(&r, &[Problem::HeapFileShrunk { object: s.a, path: path.clone(), len: 100, durable_size: 5000 }]);
    let line = r.problems[0].to_string();
    assert!(line.contains("shrunk outside Larder") && line.contains(&path.display().to_string()), "{line}");

    s.store.remove_heap_file(s.a).unwrap();
    assert_only(&fsck(&s.store), &[Problem::HeapFileMissing { object: s.a, path }]);
}

#[test]
fn a_stray_file_is_a_warning_only() {
    let s = setup(43);
    let stray = s.store.allocate_object_id().unwrap();
    s.store.create_heap_file(stray, 10).unwrap();
    let r = fsck(&s.store);
    assert_only(&r, &[]);
    assert_eq!(r.warnings, [Problem::HeapStrayFile { path: s.store.heap_file_path(stray) }]);
    assert!(r.is_clean(), "a warning leaves the store clean");
    assert!(r.to_string().contains("warning: "), "{r}");
}

#[test]
fn heap_objects_and_records_must_match() {
    let s = setup(44);
    let lim = limits(&s.store);
    // A heap object without its record.
    let rec_b = record(&s, s.b);
    commit(&s.store, |b| {
        b.delete(heap_object_key(s.b));
    });
    assert_only(
        &fsck(&s.store),
        &[
            Problem::HeapObjectWithoutRecord { object: s.b },
            Problem::HeapEntryWrong {
                heap: s.heap.root,
                dir: s.heap.objects_dir,
                name: name(&s.b.to_string()),
                child: s.b,
                what: "not a heap object",
            },
        ],
    );
    commit(&s.store, |b| {
        b.put(heap_object_key(s.b), rec_b.encode().unwrap());
    });

    // A record whose object is not a heap object, one naming no heap, and
    // one without an object.
    let plain = s.store.allocate_object_id().unwrap();
    let mut o = s.store.stat(s.b).unwrap().unwrap();
    o.location = DataLocation::Inline(b"bee".to_vec());
    commit(&s.store, |b| put_onode(b, &lim, s.b, &o));
    let ghost = HeapObject { heap: 999_999, ..rec_b };
    let gone = s.store.allocate_object_id().unwrap();
    commit(&s.store, |b| {
        b.put(heap_object_key(plain), ghost.encode().unwrap());
        b.put(heap_object_key(gone), rec_b.encode().unwrap());
    });
    let r = fsck(&s.store);
    assert!(r.problems.contains(&Problem::HeapRecordNotHeapObject { object: s.b, location: "inline" }), "{r}");
    assert!(r.problems.contains(&Problem::HeapRecordWithoutObject { object: plain }), "{r}");
    assert!(r.problems.contains(&Problem::HeapObjectWithoutHeap { object: plain, heap: 999_999 }), "{r}");
    assert!(r.problems.contains(&Problem::HeapRecordWithoutObject { object: gone }), "{r}");
    assert!(r.problems.contains(&Problem::HeapObjectUnlisted { object: gone, heap: s.heap.root }), "{r}");
    assert!(
        !r.problems.iter().any(|p| matches!(p, Problem::HeapObjectUnlisted { object, .. } if *object == plain)),
        "an object of a missing heap is looked for in no heap: {r}"
    );
    assert_eq!(
        r.warnings,
        [Problem::HeapStrayFile { path: s.store.heap_file_path(s.b) }],
        "b's file now belongs to no heap object"
    );
}

#[test]
fn heap_directories_must_list_their_objects_and_names() {
    let s = setup(45);
    let (root, objects, names) = (s.heap.root, s.heap.objects_dir, s.heap.names_dir);
    // The objects/ entry of a named under the wrong name; b unlisted.
    commit(&s.store, |b| {
        b.delete(dentry_key(objects, &name(&s.a.to_string())));
        put_dentry(b, objects, "wrong", s.a, Kind::File);
        b.delete(dentry_key(objects, &name(&s.b.to_string())));
        put_dentry(b, objects, &s.b.to_string(), ROOT_ID, Kind::Directory);
    });
    let r = fsck(&s.store);
    let wrong_name = Problem::HeapEntryWrong {
        heap: root,
        dir: objects,
        name: name("wrong"),
        child: s.a,
        what: "not named by the object's id",
    };
    assert!(r.problems.contains(&wrong_name), "{r}");
    assert!(r.problems.contains(&Problem::HeapObjectUnlisted { object: s.b, heap: root }), "{r}");
    assert!(r.problems.contains(&Problem::HeapObjectUnlisted { object: s.a, heap: root }), "{r}");
    let not_heap = |n: &str, dir| Problem::HeapEntryWrong {
        heap: root,
        dir,
        name: name(n),
        child: ROOT_ID,
        what: "not a heap object",
    };
    assert!(r.problems.contains(&not_heap(&s.b.to_string(), objects)), "{r}");
    commit(&s.store, |b| {
        b.delete(dentry_key(objects, &name("wrong")));
        put_dentry(b, objects, &s.a.to_string(), s.a, Kind::File);
        put_dentry(b, objects, &s.b.to_string(), s.b, Kind::File);
    });
    assert_only(&fsck(&s.store), &[]);

    // A names/ entry without its reverse record, and a reverse record
    // without its entry (link counts kept right so only the heap rule fires).
    commit(&s.store, |b| {
        b.delete(heap_name_key(s.a, &name("x")));
        b.put(heap_name_key(s.b, &name("nowhere")), []);
    });
    assert_only(
        &fsck(&s.store),
        &[
            Problem::HeapEntryWrong {
                heap: root,
                dir: names,
                name: name("x"),
                child: s.a,
                what: "no reverse name record (0x60 0x03)",
            },
            Problem::HeapNameWithoutEntry { object: s.b, name: name("nowhere") },
        ],
    );
}

#[test]
fn heap_roots_name_flagged_directories_and_records_name_live_objects() {
    let s = setup(46);
    let lim = limits(&s.store);
    let mut o = s.store.stat(s.heap.names_dir).unwrap().unwrap();
    o.flags = 0;
    commit(&s.store, |b| put_onode(b, &lim, s.heap.names_dir, &o));
    let r = fsck(&s.store);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(
        matches!(&r.problems[0], Problem::HeapRootBroken { root, what } if *root == s.heap.root && what.contains("FLAG_HEAP")),
        "{r}"
    );
    o.flags = larder_object::meta::onode::FLAG_HEAP;
    commit(&s.store, |b| put_onode(b, &lim, s.heap.names_dir, &o));

    // A root naming a directory that does not exist.
    let bogus = s.store.allocate_object_id().unwrap();
    let other = s.store.allocate_object_id().unwrap();
    let root_record = HeapRoot { objects_dir: bogus, names_dir: s.heap.names_dir }.encode().unwrap();
    commit(&s.store, |b| {
        b.put(heap_root_key(other), root_record);
    });
    let r = fsck(&s.store);
    assert!(
        r.problems.iter().any(
            |p| matches!(p, Problem::HeapRootBroken { root, what } if *root == other && what.contains("does not exist"))
        ),
        "{r}"
    );
    commit(&s.store, |b| {
        b.delete(heap_root_key(other));
    });
    assert_only(&fsck(&s.store), &[]);

    // Name and arena records of an object with no heap record.
    let dead = s.store.allocate_object_id().unwrap();
    commit(&s.store, |b| {
        b.put(heap_name_key(dead, &name("n")), []);
        b.put(heap_span_key(dead, 4096), [1u8, 2, 3]);
    });
    assert_only(
        &fsck(&s.store),
        &[
            Problem::HeapNameWithoutObject { object: dead, name: name("n") },
            Problem::HeapSpanWithoutObject { object: dead, span: 4096 },
        ],
    );
}

/// The records of a real arena in an object of `size` bytes (grown as the
/// arena asks), with blocks allocated and some freed; and the new size.
fn arena_records(mut size: u64) -> (Vec<(u64, Vec<u8>)>, u64) {
    use larder_heap::arena::{Arena, ArenaError, GrowError};
    let mut grow = |n: u64| -> Result<u64, GrowError> {
        let start = size.next_multiple_of(4096);
        size = start + n;
        Ok(start)
    };
    let mut arena = Arena::new();
    assert!(matches!(arena.alloc(16, 16, &mut grow), Err(ArenaError::NeedsSync)));
    arena.take_dirty_records();
    arena.records_durable();
    let blocks: Vec<_> = [16u64, 100, 1000, 4096, 9000, 20, 300]
        .iter()
        .map(|&bytes| arena.alloc(bytes, 16, &mut grow).unwrap())
        .collect();
    arena.free(blocks[1].offset, blocks[1].generation).unwrap();
    let records = arena.all_records();
    (records, size)
}

#[test]
fn arena_records_are_decoded_and_checked_against_the_object() {
    let s = setup(47);
    let (records, size) = arena_records(5000);
    assert!(records.len() >= 3, "a header, spans and a large block");
    s.store.truncate(s.a, size, larder_object::Durability::Durable).unwrap();
    let put_all = |records: &[(u64, Vec<u8>)]| {
        commit(&s.store, |b| {
            for (key, value) in records {
                b.put(heap_span_key(s.a, *key), value);
            }
        });
    };
    put_all(&records);
    let r = fsck(&s.store);
    assert_only(&r, &[]);
    assert_eq!(r.counts.heap_arenas, 1);

    // A damaged record (its crc32c no longer matches).
    let mut damaged = records.clone();
    let last = damaged[0].1.len() - 1;
    damaged[0].1[last] ^= 0xFF;
    put_all(&damaged);
    let r = fsck(&s.store);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(matches!(&r.problems[0], Problem::HeapArenaBroken { object, .. } if *object == s.a), "{r}");

    // An inconsistent set: a record moved under another arena key (an
    // offset outside the claimed ranges, and not the record's own).
    put_all(&records);
    let (key, value) = records.iter().find(|(k, _)| *k != larder_heap::arena::HEADER_KEY).unwrap().clone();
    commit(&s.store, |b| {
        b.delete(heap_span_key(s.a, key));
        b.put(heap_span_key(s.a, key + 4096 * 1000), value);
    });
    let r = fsck(&s.store);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(matches!(&r.problems[0], Problem::HeapArenaBroken { .. }), "{r}");

    // Claimed ranges past the object's size.
    let (records, size_b) = arena_records(3);
    commit(&s.store, |b| {
        b.delete(heap_span_key(s.a, key + 4096 * 1000));
        for (key, value) in &records {
            b.put(heap_span_key(s.b, *key), value);
        }
    });
    put_all(&arena_records(5000).0);
    let r = fsck(&s.store);
    let past = "past the object's size 3";
    assert!(size_b > 3);
    assert!(
        r.problems
            .iter()
            .any(|p| matches!(p, Problem::HeapArenaBroken { object, what } if *object == s.b && what.contains(past))),
        "{r}"
    );
}
