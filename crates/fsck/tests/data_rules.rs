//! Rules 7 (data locations and fmap entries), 8 (space) and 9 (block
//! checksums) of docs/format.md section 15: each test breaks one rule of
//! the fixture and checks that exactly the problem naming it is reported.

#![allow(clippy::unwrap_used)]

mod common;

use common::{
    allocated_entry, assert_only, build, change_onode, commit, fmap, fsck, limits, onode, orphan_record, pattern,
    put_onode, read_all, stat, Fixture,
};
use larder_fsck::{ExtentOwner, Problem};
use larder_io::{read_exact_at, SimStorage};
use larder_object::meta::{fmap_key, onode_key, orphan_key, DataLocation, Extent, ExtentMapEntry, Kind, MetaKey};
use larder_object::ObjectError;
use larder_space::container_file_name;

/// An id below `next_object_id` that no object has.
const UNUSED: u64 = 1000;

fn fixture(seed: u64) -> Fixture {
    let f = build(&SimStorage::new(seed));
    assert!(fsck(&f.store).is_clean());
    f
}

fn owner(object: u64, offset: u64, entry: &ExtentMapEntry) -> ExtentOwner {
    ExtentOwner { object, offset, extent: entry.extent }
}

#[test]
fn rule_7_inline_bytes_must_match_the_size() {
    let f = fixture(30);
    let (s, small) = (&f.store, f.ids.small);
    // The decoder enforces it: an inline onode whose size is not its
    // byte count (size field at offset 7 of the fixed layout, which the
    // store reads too) does not decode.
    let fixed = larder_object::meta::MetaLimits { compact_onodes: false, ..limits(s) };
    let mut v = stat(s, small).encode(&fixed).unwrap();
    v[7..15].copy_from_slice(&200u64.to_le_bytes());
    commit(s, |b| {
        b.put(onode_key(small), &v);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(matches!(&r.problems[0], Problem::BadValue { key: MetaKey::Onode { object }, .. } if *object == small));
    assert!(r.to_string().contains("inline"), "{r}");
}

#[test]
fn rule_7_fmap_entries_need_an_extent_mapped_onode() {
    let f = fixture(31);
    let (s, small) = (&f.store, f.ids.small);
    let entry = allocated_entry(s, &pattern(7, 100));
    let lim = limits(s);
    commit(s, |b| {
        b.put(fmap_key(small, 0), entry.encode(&lim).unwrap());
    });
    assert_only(&fsck(s), &[Problem::FmapNotExtents { object: small, offset: 0, location: "inline" }]);
    commit(s, |b| {
        b.delete(fmap_key(small, 0));
        b.put(fmap_key(UNUSED, 0), entry.encode(&lim).unwrap());
    });
    assert_only(&fsck(s), &[Problem::FmapWithoutOnode { object: UNUSED, offset: 0 }]);

    // A heap object (bytes in a file of its own) with an fmap entry; it has
    // no heap record and no file either (heap_rules.rs checks those).
    let mut heap = onode(Kind::File, UNUSED, 0, None);
    heap.location = DataLocation::OwnFile { file: 3 };
    heap.size = 100;
    commit(s, |b| {
        put_onode(b, &lim, UNUSED, &heap);
        b.put(orphan_key(UNUSED), orphan_record());
    });
    let r = fsck(s);
    let heap_problems = [
        Problem::HeapObjectWithoutRecord { object: UNUSED },
        Problem::HeapFileMissing { object: UNUSED, path: s.heap_file_path(3) },
    ];
    let mut expected = vec![Problem::FmapNotExtents { object: UNUSED, offset: 0, location: "in a heap file" }];
    expected.extend(heap_problems.iter().cloned());
    assert_only(&r, &expected);
    assert_eq!(r.counts.heap_objects, 1);
    commit(s, |b| {
        b.delete(fmap_key(UNUSED, 0));
    });
    let r = fsck(s);
    let mut expected = heap_problems.to_vec();
    expected.push(Problem::Leaked { path: container(s, entry.extent), extent: entry.extent });
    assert_eq!(r.problems, expected, "{r}");
}

fn container(s: &larder_object::Store, e: Extent) -> std::path::PathBuf {
    s.space().dir().join(container_file_name(e.container))
}

#[test]
fn rule_7_entries_of_one_object_do_not_overlap() {
    let f = fixture(32);
    let (s, big) = (&f.store, f.ids.big);
    let (first, ..) = fmap(s, big)[0].clone();
    assert_eq!(first, 0);
    // The first entry covers [0, 20000): one starting at 16384 overlaps it.
    let entry = allocated_entry(s, &f.data[&big][16_384..20_480]);
    let lim = limits(s);
    commit(s, |b| {
        b.put(fmap_key(big, 16_384), entry.encode(&lim).unwrap());
    });
    assert_only(&fsck(s), &[Problem::FmapOverlap { object: big, offset: 16_384, previous_end: 20_000 }]);
}

#[test]
fn rule_7_entries_end_at_or_before_the_size() {
    let f = fixture(33);
    let (s, big) = (&f.store, f.ids.big);
    let size = stat(s, big).size;
    assert_eq!(size, 45_960);
    change_onode(s, big, |o| o.size = 45_000);
    assert_only(&fsck(s), &[Problem::FmapPastSize { object: big, offset: 40_960, end: size, size: 45_000 }]);
}

#[test]
fn rule_7_extents_lie_in_existing_containers() {
    let f = fixture(34);
    let (s, big) = (&f.store, f.ids.big);
    let data = vec![0u8; 4096];
    let extent = Extent { container: 77, offset: 0, len: 4096 };
    let lim = limits(s);
    let entry = ExtentMapEntry::for_data(extent, &data, &lim).unwrap();
    commit(s, |b| {
        b.put(fmap_key(big, 28_672), entry.encode(&lim).unwrap());
    });
    assert_only(&fsck(s), &[Problem::ContainerMissing { owner: owner(big, 28_672, &entry) }]);
}

#[test]
fn rule_8_two_entries_sharing_blocks() {
    let f = fixture(35);
    let (s, big) = (&f.store, f.ids.big);
    let (_, value, entry) = fmap(s, big)[0].clone();
    // A new unnamed object whose entry is a copy of big's first one.
    let lim = limits(s);
    let mut copy = onode(Kind::File, UNUSED, 0, None);
    copy.location = DataLocation::Extents;
    copy.size = entry.logical_len;
    commit(s, |b| {
        put_onode(b, &lim, UNUSED, &copy);
        b.put(orphan_key(UNUSED), orphan_record());
        b.put(fmap_key(UNUSED, 0), &value);
    });
    assert_only(&fsck(s), &[Problem::ExtentShared { first: owner(big, 0, &entry), second: owner(UNUSED, 0, &entry) }]);
}

#[test]
fn rule_8_free_space_is_container_space_minus_what_is_referenced() {
    let f = fixture(36);
    let (s, big) = (&f.store, f.ids.big);
    // Referenced but free: an entry over free space (its crc computed
    // from the bytes there, so only the space rule breaks).
    let free = s.space().free_extents()[0];
    let extent = Extent { len: 4096, ..free };
    let mut block = vec![0u8; 4096];
    read_exact_at(&*s.space().container_file(extent.container).unwrap(), &mut block, extent.offset).unwrap();
    let lim = limits(s);
    let entry = ExtentMapEntry::for_data(extent, &block, &lim).unwrap();
    commit(s, |b| {
        b.put(fmap_key(big, 28_672), entry.encode(&lim).unwrap());
    });
    assert_only(&fsck(s), &[Problem::FreeButUsed { path: container(s, extent), extent }]);
    commit(s, |b| {
        b.delete(fmap_key(big, 28_672));
    });
    assert!(fsck(s).is_clean());

    // Allocated but no longer referenced: an entry deleted without
    // freeing its space.
    let (offset, _, entry) = fmap(s, big).pop().unwrap();
    commit(s, |b| {
        b.delete(fmap_key(big, offset));
    });
    let r = fsck(s);
    assert_only(&r, &[Problem::Leaked { path: container(s, entry.extent), extent: entry.extent }]);
    assert!(r.to_string().contains(".ctr: bytes ["), "{r}");
}

#[test]
fn rule_9_a_damaged_block_is_named_and_never_read_as_data() {
    let f = fixture(37);
    let (s, big) = (&f.store, f.ids.big);
    let (_, _, entry) = fmap(s, big)[0].clone();
    let path = container(s, entry.extent);
    // A flipped bit in block 2 of big's first extent.
    let at = entry.extent.offset + 2 * 4096 + 100;
    f.sim.corrupt(&path, at, 0x08).unwrap();
    let r = fsck(s);
    let bad = Problem::ChecksumMismatch {
        object: big,
        offset: 8192,
        path: path.clone(),
        container_offset: entry.extent.offset + 8192,
    };
    assert_only(&r, std::slice::from_ref(&bad));
    assert_eq!(r.counts.blocks_verified, s.space().stats().bytes_allocated / 4096 - 1);
    let text = bad.to_string();
    assert!(text.contains(&path.display().to_string()) && text.contains(&format!("object {big} offset 8192")));
    // The object's reads fail rather than return the damaged bytes.
    let e = read_all(s, big).unwrap_err();
    assert!(matches!(e, ObjectError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    // Other objects read fine.
    assert_eq!(read_all(s, f.ids.orphan).unwrap(), f.data[&f.ids.orphan]);
}

#[test]
fn rule_9_a_wrong_recorded_checksum_is_a_mismatch_too() {
    let f = fixture(38);
    let (s, big) = (&f.store, f.ids.big);
    let (offset, _, mut entry) = fmap(s, big).pop().unwrap();
    entry.crcs[1] ^= 1;
    let lim = limits(s);
    commit(s, |b| {
        b.put(fmap_key(big, offset), entry.encode(&lim).unwrap());
    });
    assert_only(
        &fsck(s),
        &[Problem::ChecksumMismatch {
            object: big,
            offset: offset + 4096,
            path: container(s, entry.extent),
            container_offset: entry.extent.offset + 4096,
        }],
    );
}
