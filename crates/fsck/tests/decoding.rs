//! Rule 1 of docs/format.md section 15: every key decodes, and every value
//! as its map's record. A key or value that does not is reported and
//! skipped, and the rest of the store is still checked; so is an index
//! that cannot be read through (a merge operand that does not fold).

#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_only, build, commit, fmap, fsck, limits, name, stat, Fixture};
use larder_fsck::{Problem, Skipped};
use larder_io::SimStorage;
use larder_object::meta::{
    dentry_key, encode_entries_delta, fmap_key, onode_key, orphan_key, store_key, xattr_key, MetaKey, StoreName,
    XattrName, DIR_ENTRIES_OPERATOR, NEXT_OBJECT_ID,
};
use larder_object::ROOT_ID;

fn fixture(seed: u64) -> Fixture {
    let f = build(&SimStorage::new(seed));
    assert!(fsck(&f.store).is_clean());
    f
}

fn bad_key(key: &[u8]) -> impl Fn(&Problem) -> bool + '_ {
    move |p| matches!(p, Problem::BadKey { key: k, .. } if k == key)
}

fn bad_value(key: MetaKey) -> impl Fn(&Problem) -> bool {
    move |p| matches!(p, Problem::BadValue { key: k, .. } if *k == key)
}

#[test]
fn keys_that_do_not_decode_are_reported() {
    let f = fixture(20);
    let mut root_slash = vec![0x30];
    root_slash.extend_from_slice(&ROOT_ID.to_be_bytes());
    root_slash.extend_from_slice(b"a/b");
    let keys: Vec<Vec<u8>> = vec![
        vec![0x00],                                                     // prefix 0 is never written
        vec![0x10, 1, 2],                                               // omap key too short
        fmap_key(f.ids.big, 4096)[..16].to_vec(),                       // fmap key too short
        [&fmap_key(f.ids.big, 0)[..9], &100u64.to_be_bytes()].concat(), // offset not a block
        root_slash,                                                     // a name with '/'
        vec![0x60, 1],                                                  // unknown prefix
    ];
    commit(&f.store, |b| {
        for k in &keys {
            b.put(k, b"x");
        }
    });
    let r = fsck(&f.store);
    assert_eq!(r.problems.len(), keys.len(), "{r}");
    let mut sorted = keys.clone();
    sorted.sort();
    for (p, k) in r.problems.iter().zip(&sorted) {
        assert!(bad_key(k)(p), "{p}");
    }
    assert!(r.skipped.is_empty());
    let text = r.to_string();
    assert!(text.contains("index key 00: corrupt index key: unknown map prefix 0x00"), "{text}");
    assert!(text.contains("not a multiple of 4096"), "{text}");
    assert!(text.contains("contains '/'"), "{text}");
}

#[test]
fn values_that_do_not_decode_are_reported_and_their_object_not_blamed_again() {
    let f = fixture(21);
    let (s, small, orphan) = (&f.store, f.ids.small, f.ids.orphan);
    let colour = XattrName::new("user.colour").unwrap();
    commit(s, |b| {
        b.put(onode_key(small), [1, 2, 3]);
        b.put(xattr_key(small, &colour), [2, b'v']);
        b.put(orphan_key(orphan), [1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    });
    let r = fsck(s);
    let expect = [
        MetaKey::Onode { object: small },
        MetaKey::Xattr { object: small, name: colour },
        MetaKey::Orphan { object: orphan },
    ];
    assert_eq!(r.problems.len(), expect.len(), "{r}");
    for (p, k) in r.problems.iter().zip(expect) {
        assert!(bad_value(k)(p), "{p}");
    }
    let text = r.to_string();
    assert!(text.contains(&format!("onode of object {small}: value does not decode")), "{text}");
    assert!(text.contains("unknown tag 2") && text.contains("unknown reason 9"), "{text}");
    assert!(r.skipped.is_empty());
}

#[test]
fn a_newer_record_version_says_upgrade() {
    let f = fixture(22);
    let (s, small) = (&f.store, f.ids.small);
    let mut v = stat(s, small).encode(&limits(s)).unwrap();
    v[0] = larder_object::meta::onode::ONODE_VERSION + 1;
    commit(s, |b| {
        b.put(onode_key(small), &v);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(bad_value(MetaKey::Onode { object: small })(&r.problems[0]));
    assert!(r.to_string().contains("upgrade larder"), "{r}");
}

#[test]
fn a_bad_dentry_value_still_counts_as_an_entry_but_not_as_a_link() {
    let f = fixture(23);
    let (s, a, big) = (&f.store, f.ids.a, f.ids.big);
    commit(s, |b| {
        b.put(dentry_key(a, &name("big")), [0u8; 10]);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 2, "{r}");
    assert!(bad_value(MetaKey::Dentry { parent: a, name: name("big") })(&r.problems[0]), "{r}");
    assert_eq!(r.problems[1], Problem::NlinkMismatch { object: big, nlink: 2, dentries: 1 });
}

#[test]
fn a_bad_fmap_value_leaves_its_space_unreferenced() {
    let f = fixture(24);
    let (s, big) = (&f.store, f.ids.big);
    let (offset, _, entry) = fmap(s, big).pop().unwrap();
    commit(s, |b| {
        b.put(fmap_key(big, offset), [0u8; 33]);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 2, "{r}");
    assert!(bad_value(MetaKey::Extent { object: big, offset })(&r.problems[0]), "{r}");
    assert!(r.problems[0].to_string().contains("tag 0 is never written"));
    match &r.problems[1] {
        Problem::Leaked { extent, path } => {
            assert_eq!(*extent, entry.extent);
            assert!(path.to_string_lossy().ends_with(".ctr"), "{}", path.display());
        }
        other => panic!("{other}"),
    }
}

#[test]
fn store_metadata_unknown_names_and_a_bad_counter() {
    let f = fixture(25);
    let s = &f.store;
    commit(s, |b| {
        b.put(store_key(&StoreName::new("zzz").unwrap()), 5u64.to_le_bytes());
    });
    assert_only(&fsck(s), &[Problem::UnknownStoreEntry { name: "zzz".into() }]);
    let counter = StoreName::new(NEXT_OBJECT_ID).unwrap();
    commit(s, |b| {
        b.delete(store_key(&StoreName::new("zzz").unwrap()));
        b.put(store_key(&counter), [1, 2, 3]);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 1, "{r}");
    assert!(bad_value(MetaKey::Store(counter))(&r.problems[0]), "{r}");
    // Ids cannot be checked against an unknown counter; nothing else is
    // blamed for it.
    assert_eq!(r.skipped, [Skipped::ObjectIds]);
}

#[test]
fn a_merge_operand_that_does_not_fold_ends_the_map_and_the_rest_is_checked() {
    let f = fixture(26);
    let (s, a, small) = (&f.store, f.ids.a, f.ids.small);
    commit(s, |b| {
        // Directory a has 2 entries: -10 cannot fold.
        b.merge(DIR_ENTRIES_OPERATOR, onode_key(a), encode_entries_delta(-10));
        b.put(xattr_key(small, &XattrName::new("user.colour").unwrap()), [7]);
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 2, "{r}");
    match &r.problems[0] {
        Problem::IndexUnreadable { error, from, to } => {
            assert!(error.contains("larder.dir_entries"), "{error}");
            assert_eq!(from.as_deref(), Some(&onode_key(ROOT_ID)[..]), "the last key read");
            assert_eq!(to.as_deref(), Some(&[0x20u8][..]), "resumed at the fmap");
        }
        other => panic!("{other}"),
    }
    // The xattr map, after the failure, was still read.
    assert!(bad_value(MetaKey::Xattr { object: small, name: XattrName::new("user.colour").unwrap() })(&r.problems[1]));
    let skipped = [Skipped::References, Skipped::LinkCounts, Skipped::EntryCounts, Skipped::Orphans, Skipped::Heaps];
    assert_eq!(r.skipped, skipped);
    assert!(!r.is_clean());
    // Space and checksums need only the fmap, which was read whole.
    assert!(r.counts.blocks_verified > 0);
}

#[test]
fn an_unreadable_fmap_skips_space_and_checksums_rather_than_blame_the_space() {
    let f = fixture(27);
    let (s, big) = (&f.store, f.ids.big);
    commit(s, |b| {
        // An operand the directory-entry operator cannot fold into an fmap entry.
        b.merge(DIR_ENTRIES_OPERATOR, fmap_key(big, 0), encode_entries_delta(1));
    });
    let r = fsck(s);
    assert_eq!(r.problems.len(), 1, "one failure, reported once (not again by the checksum phase): {r}");
    match &r.problems[0] {
        Problem::IndexUnreadable { from, to, .. } => {
            // Placed in the fmap (whose first key fails), not blamed on the
            // omap read before it.
            assert_eq!(from.as_deref(), Some(&[0x20u8][..]));
            assert_eq!(to.as_deref(), Some(&[0x30u8][..]), "resumed at the dmap");
        }
        other => panic!("{other}"),
    }
    // The space the lost entries reference is not called leaked.
    assert_eq!(r.skipped, [Skipped::Space, Skipped::Checksums]);
    assert_eq!(r.counts.dentries, 6, "the maps after the fmap were read");
    assert!(r.to_string().contains("not checked (index unreadable): free space"), "{r}");
}

#[test]
fn unreadable_keys_outside_every_map_blame_no_map() {
    let f = fixture(28);
    let (s, orphan) = (&f.store, f.ids.orphan);
    commit(s, |b| {
        // Operands with no onode to fold into: reading these keys fails.
        b.merge(DIR_ENTRIES_OPERATOR, [0x15, 1], encode_entries_delta(1));
        b.merge(DIR_ENTRIES_OPERATOR, [0x80, 1], encode_entries_delta(1));
    });
    let r = fsck(s);
    let places: Vec<_> = r
        .problems
        .iter()
        .map(|p| match p {
            Problem::IndexUnreadable { from, to, .. } => (from.clone(), to.clone()),
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(places, [(Some(onode_key(orphan).to_vec()), Some(vec![0x20])), (Some(vec![0x70]), None)], "{r}");
    // Every map was read whole: every check ran.
    assert!(r.skipped.is_empty(), "{r}");
}
