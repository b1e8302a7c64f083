//! A consistent store reports no problems, counts what it holds, and
//! reports progress phase by phase.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{build, creation, deterministic, fmap, fsck, storage, DIR};
use larder_fsck::{Counts, Options, Phase, Progress};
use larder_io::SimStorage;
use larder_object::Store;

#[test]
fn a_new_store_is_clean() {
    let sim = SimStorage::new(1);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let report = fsck(&store);
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.counts.objects, report.counts.directories), (1, 1), "just the root");
}

#[test]
fn the_fixture_is_clean_and_counted() {
    let sim = SimStorage::new(2);
    let f = build(&sim);
    let report = fsck(&f.store);
    assert!(report.is_clean(), "{report}");
    let entries: Vec<_> = [f.ids.big, f.ids.orphan].iter().flat_map(|&id| fmap(&f.store, id)).collect();
    let bytes: u64 = entries.iter().map(|(_, _, e)| e.extent.len).sum();
    let blocks = bytes / 4096;
    let expected = Counts {
        keys: 1 + 7 + entries.len() as u64 + 6 + 1 + 1,
        objects: 7,
        directories: 3,
        heap_objects: 0,
        heaps: 0,
        heap_arenas: 0,
        dentries: 6,
        fmap_entries: entries.len() as u64,
        xattrs: 1,
        orphans: 1,
        trees: 0,
        tree_entries: 0,
        bytes_referenced: bytes,
        blocks_verified: blocks,
    };
    assert_eq!(report.counts, expected, "{report}");
    assert!(blocks >= 8, "20000 + 5000 + 10000 bytes are at least 8 blocks");
    assert!(report.to_string().contains(&format!("{blocks} blocks verified")), "{report}");

    // Clean after a reopen too, which frees the orphan (no handle survives
    // a restart) and rebuilds free space from the fmap.
    let orphan_entries = fmap(&f.store, f.ids.orphan);
    let orphan_bytes: u64 = orphan_entries.iter().map(|(_, _, e)| e.extent.len).sum();
    f.store.close().unwrap();
    let store = common::reopen(&sim);
    let again = fsck(&store);
    assert!(again.is_clean(), "{again}");
    let n = orphan_entries.len() as u64;
    let after = Counts {
        keys: expected.keys - 2 - n,
        objects: 6,
        orphans: 0,
        fmap_entries: expected.fmap_entries - n,
        bytes_referenced: bytes - orphan_bytes,
        blocks_verified: (bytes - orphan_bytes) / 4096,
        ..expected
    };
    assert_eq!(again.counts, after);
}

#[test]
fn progress_goes_through_the_phases_in_order_and_reaches_the_totals() {
    let sim = SimStorage::new(3);
    let f = build(&sim);
    let mut seen: Vec<Progress> = Vec::new();
    let report = larder_fsck::check(&f.store, &mut |p| seen.push(p)).unwrap();
    assert!(report.is_clean(), "{report}");
    let phases: Vec<Phase> = seen.iter().map(|p| p.phase).collect();
    let mut sorted = phases.clone();
    sorted.sort();
    assert_eq!(phases, sorted, "phases run in order");
    for phase in [Phase::Index, Phase::Space, Phase::Checksums] {
        let last = seen.iter().rev().find(|p| p.phase == phase).unwrap();
        let want = match phase {
            Phase::Index => report.counts.keys,
            Phase::Space => f.store.space().container_ids().len() as u64,
            Phase::Checksums => report.counts.blocks_verified,
        };
        assert_eq!(last.done, want, "{phase}");
        assert!(last.total.is_none_or(|t| t == want), "{phase}: {last:?}");
    }
    // Within a phase, done never goes back.
    for w in seen.windows(2) {
        if w[0].phase == w[1].phase {
            assert!(w[0].done <= w[1].done, "{w:?}");
        }
    }
}

#[test]
fn checksums_can_be_left_out() {
    let sim = SimStorage::new(4);
    let f = build(&sim);
    let options = Options { verify_checksums: false, ..Options::default() };
    let mut phases = Vec::new();
    let report = larder_fsck::check_with(&f.store, &options, &mut |p| phases.push(p.phase)).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.counts.blocks_verified, 0);
    assert!(!phases.contains(&Phase::Checksums));
}

#[test]
fn problems_past_the_limit_are_counted_not_kept() {
    let sim = SimStorage::new(5);
    let f = build(&sim);
    let lim = common::limits(&f.store);
    common::commit(&f.store, |b| {
        for id in [1000, 1001, 1002, 1003, 1004] {
            common::put_onode(b, &lim, id, &common::onode(larder_object::meta::Kind::File, id, 0, None));
        }
    });
    let all = fsck(&f.store);
    assert_eq!(all.problems.len(), 5, "five unnamed objects without orphan records: {all}");
    let options = Options { max_problems: 2, ..Options::default() };
    let r = larder_fsck::check_with(&f.store, &options, &mut |_| {}).unwrap();
    assert_eq!((r.problems.as_slice(), r.problems_dropped), (&all.problems[..2], 3));
    assert!(!r.is_clean());
    assert!(r.to_string().contains("... and 3 more problems\n5 problems;"), "{r}");
}
