//! Heap files against their metadata (docs/heap.md; docs/format.md
//! section 18), after the index pass:
//!
//! - every heap object (onode `OwnFile`) has a heap object record, and a
//!   file `heap/<id>` at least as long as the record's durable size (a
//!   shorter one was shrunk outside Larder);
//! - every heap object record has its onode, a heap object's, and names a
//!   heap that exists;
//! - every file in `heap/` belongs to a heap object (a stray is a
//!   warning: the next open removes it);
//! - each heap's root record names two directories flagged `FLAG_HEAP`;
//!   the entries of its `objects/` are named by the id of a heap object of
//!   that heap, and every such object has one; the entries of its
//!   `names/` name heap objects of that heap and match the reverse name
//!   records, both ways.
//!
//! Name and arena span records of objects without a record are reported
//! as the index pass reads them (`visit.rs`); an arena span's value is the
//! heap crate's encoding and is not decoded here.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use larder_index::Snapshot;
use larder_object::meta::{decode_dentry_key, dentry_key, dmap_prefix, prefix_end, Dentry, Map, Name};
use larder_object::Store;

use crate::error::{FsckError, Result};
use crate::model::{Loc, Model, Problems};
use crate::problem::Problem;
use crate::report::Skipped;

/// Runs the heap checks, unless the maps they compare were not read whole.
pub(crate) fn check(
    store: &Store,
    snapshot: &Snapshot,
    model: &Model,
    problems: &mut Problems,
    warnings: &mut Vec<Problem>,
    skipped: &mut BTreeSet<Skipped>,
) -> Result<()> {
    if !model.complete(&[Map::Omap, Map::Dmap, Map::Heap]) {
        skipped.insert(Skipped::Heaps);
        return Ok(());
    }
    check_files(store, model, problems, warnings)?;
    check_records(model, problems);
    for (&root, heap) in &model.heap_roots {
        check_root(model, root, heap.objects_dir, heap.names_dir, problems);
        check_objects_dir(snapshot, model, root, heap.objects_dir, problems)?;
        check_names_dir(snapshot, model, root, heap.names_dir, problems)?;
    }
    check_name_records(snapshot, model, problems)?;
    Ok(())
}

/// Heap objects against their files, and files against heap objects.
fn check_files(store: &Store, model: &Model, problems: &mut Problems, warnings: &mut Vec<Problem>) -> Result<()> {
    let (files, others) = store.list_heap_files().map_err(FsckError::Heap)?;
    let files: BTreeSet<u64> = files.into_iter().collect();
    let mut owned = BTreeSet::new();
    for (&object, info) in &model.objects {
        let Some(file) = info.heap_file else { continue };
        owned.insert(file);
        let record = model.heap_objects.get(&object);
        if record.is_none() {
            problems.push(Problem::HeapObjectWithoutRecord { object });
        }
        let path = store.heap_file_path(file);
        if !files.contains(&file) {
            problems.push(Problem::HeapFileMissing { object, path });
            continue;
        }
        let len = store.open_heap_file(file, false).and_then(|f| Ok(f.len()?)).map_err(FsckError::Heap)?;
        if let Some(r) = record.filter(|r| len < r.durable_size) {
            problems.push(Problem::HeapFileShrunk { object, path, len, durable_size: r.durable_size });
        }
    }
    for file in files.difference(&owned) {
        warnings.push(Problem::HeapStrayFile { path: store.heap_file_path(*file) });
    }
    for name in others {
        warnings.push(Problem::HeapStrayFile { path: store.heap_dir().join(name) });
    }
    Ok(())
}

/// Heap object records against onodes and heap roots.
fn check_records(model: &Model, problems: &mut Problems) {
    for (&object, record) in &model.heap_objects {
        match model.objects.get(&object) {
            None if model.undecodable.contains(&object) => {}
            None => problems.push(Problem::HeapRecordWithoutObject { object }),
            Some(o) if o.loc != Loc::OwnFile => {
                problems.push(Problem::HeapRecordNotHeapObject { object, location: o.loc.describe() });
            }
            Some(_) => {}
        }
        if !model.heap_roots.contains_key(&record.heap) {
            problems.push(Problem::HeapObjectWithoutHeap { object, heap: record.heap });
        }
    }
}

/// A heap's root and its two directories exist, are directories, and
/// carry `FLAG_HEAP`.
fn check_root(model: &Model, root: u64, objects_dir: u64, names_dir: u64, problems: &mut Problems) {
    for (dir, what) in [(root, "root directory"), (objects_dir, "objects directory"), (names_dir, "names directory")] {
        let wrong = match model.objects.get(&dir) {
            None if model.undecodable.contains(&dir) => None,
            None => Some(format!("its {what} {dir} does not exist")),
            Some(o) if o.dir.is_none() => Some(format!("its {what} {dir} is not a directory")),
            Some(o) if !o.heap_flag => Some(format!("its {what} {dir} is not flagged FLAG_HEAP")),
            Some(_) => None,
        };
        if let Some(what) = wrong {
            problems.push(Problem::HeapRootBroken { root, what });
        }
    }
}

/// The entries of directory `dir` as of the snapshot.
fn entries(snapshot: &Snapshot, dir: u64) -> Result<Vec<(Name, Option<Dentry>)>> {
    let start = dmap_prefix(dir);
    let end = prefix_end(&start).unwrap_or_default();
    let mut out = Vec::new();
    let range =
        snapshot.range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true).map_err(FsckError::Index)?;
    for kv in range {
        let (k, v) = kv.map_err(FsckError::Index)?;
        // Keys and values that do not decode were reported by the index pass.
        if let Ok((_, name)) = decode_dentry_key(&k) {
            out.push((name, Dentry::decode(&v).ok()));
        }
    }
    Ok(out)
}

/// `objects/` names each heap object of the heap once, by its id.
fn check_objects_dir(snapshot: &Snapshot, model: &Model, heap: u64, dir: u64, problems: &mut Problems) -> Result<()> {
    let mut listed = BTreeSet::new();
    for (name, dentry) in entries(snapshot, dir)? {
        let Some(d) = dentry else { continue };
        let child = d.child;
        let what = match model.heap_objects.get(&child) {
            None => Some("not a heap object"),
            Some(r) if r.heap != heap => Some("a heap object of another heap"),
            Some(_) if name.as_bytes() != child.to_string().as_bytes() => Some("not named by the object's id"),
            Some(_) => None,
        };
        match what {
            Some(what) => problems.push(Problem::HeapEntryWrong { heap, dir, name, child, what }),
            None => {
                listed.insert(child);
            }
        }
    }
    for (&object, record) in &model.heap_objects {
        if record.heap == heap && !listed.contains(&object) {
            problems.push(Problem::HeapObjectUnlisted { object, heap });
        }
    }
    Ok(())
}

/// `names/` names heap objects of the heap, each with its reverse record.
fn check_names_dir(snapshot: &Snapshot, model: &Model, heap: u64, dir: u64, problems: &mut Problems) -> Result<()> {
    let records: BTreeSet<(u64, &[u8])> = model.heap_names.iter().map(|(o, n)| (*o, n.as_bytes())).collect();
    for (name, dentry) in entries(snapshot, dir)? {
        let Some(d) = dentry else { continue };
        let child = d.child;
        let what = match model.heap_objects.get(&child) {
            None => Some("not a heap object"),
            Some(r) if r.heap != heap => Some("a heap object of another heap"),
            Some(_) if !records.contains(&(child, name.as_bytes())) => Some("no reverse name record (0x60 0x03)"),
            Some(_) => None,
        };
        if let Some(what) = what {
            problems.push(Problem::HeapEntryWrong { heap, dir, name, child, what });
        }
    }
    Ok(())
}

/// Each reverse name record has its `names/` entry naming its object.
fn check_name_records(snapshot: &Snapshot, model: &Model, problems: &mut Problems) -> Result<()> {
    let names_dirs: BTreeMap<u64, u64> = model.heap_roots.iter().map(|(&root, h)| (root, h.names_dir)).collect();
    for (object, name) in &model.heap_names {
        // An object without a record was reported as its name was read.
        let Some(record) = model.heap_objects.get(object) else { continue };
        let Some(&dir) = names_dirs.get(&record.heap) else { continue };
        let found = snapshot.get(&dentry_key(dir, name)).map_err(FsckError::Index)?;
        if found.and_then(|v| Dentry::decode(&v).ok()).is_none_or(|d| d.child != *object) {
            problems.push(Problem::HeapNameWithoutEntry { object: *object, name: name.clone() });
        }
    }
    Ok(())
}
