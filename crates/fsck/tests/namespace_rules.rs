//! Rules 2 to 6 and 10 of docs/format.md section 15: each test breaks one
//! rule of the fixture through raw index writes and checks that exactly
//! the problem naming it is reported.

#![allow(clippy::unwrap_used)]

mod common;

use common::{
    assert_only, build, change_onode, commit, fsck, limits, name, onode, orphan_record, put_dentry, put_onode, stat,
    Fixture,
};
use larder_fsck::Problem;
use larder_io::SimStorage;
use larder_object::meta::{
    dentry_key, encode_entries_delta, onode_key, orphan_key, store_key, xattr_key, DirInfo, Kind, MetaKey, StoreName,
    XattrName, XattrValue, DIR_ENTRIES_OPERATOR, NEXT_OBJECT_ID,
};
use larder_object::ROOT_ID;

/// An id below `next_object_id` that no object has.
const UNUSED: u64 = 1000;

fn fixture(seed: u64) -> Fixture {
    let f = build(&SimStorage::new(seed));
    assert!(fsck(&f.store).is_clean());
    f
}

#[test]
fn rule_2_root_parent_nlink_name_and_orphan() {
    let f = fixture(10);
    let (s, a) = (&f.store, f.ids.a);
    change_onode(s, ROOT_ID, |o| o.dir = Some(DirInfo { parent: a, entries: 2 }));
    assert_only(&fsck(s), &[Problem::RootParent { parent: a }]);
    change_onode(s, ROOT_ID, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 }));

    // The root has no name: its count is its one subdirectory's `..`.
    change_onode(s, ROOT_ID, |o| o.nlink = 2);
    assert_only(&fsck(s), &[Problem::RootLinked { nlink: 2, subdirs: 1 }]);
    change_onode(s, ROOT_ID, |o| o.nlink = 1);

    // A dentry naming the root (its directory's count kept right).
    commit(s, |b| put_dentry(b, a, "up", ROOT_ID, Kind::Directory));
    change_onode(s, a, |o| {
        o.dir = Some(DirInfo { parent: ROOT_ID, entries: 3 });
        o.nlink = 3;
    });
    assert_only(&fsck(s), &[Problem::RootNamed { parent: a, name: name("up") }]);
    commit(s, |b| {
        b.delete(dentry_key(a, &name("up")));
    });
    change_onode(s, a, |o| {
        o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 });
        o.nlink = 2;
    });

    commit(s, |b| {
        b.put(orphan_key(ROOT_ID), orphan_record());
    });
    assert_only(&fsck(s), &[Problem::RootOrphan]);
}

#[test]
fn rule_2_root_missing_or_not_a_directory() {
    let f = fixture(11);
    let s = &f.store;
    let root = stat(s, ROOT_ID);
    let as_file = onode(Kind::File, ROOT_ID, 0, None);
    let lim = limits(s);
    commit(s, |b| put_onode(b, &lim, ROOT_ID, &as_file));
    let r = fsck(s);
    let not_dir = Problem::RootNotDirectory { kind: Kind::File };
    assert!(r.problems.contains(&not_dir), "{r}");
    // The root's entries now have a parent that is no directory; nothing else.
    let rest = r.problems.iter().filter(|p| **p != not_dir);
    assert!(rest.into_iter().all(|p| matches!(p, Problem::DentryParentNotDirectory { parent: ROOT_ID, .. })), "{r}");

    commit(s, |b| {
        b.delete(onode_key(ROOT_ID));
    });
    let r = fsck(s);
    assert!(r.problems.contains(&Problem::RootMissing), "{r}");
    let rest = r.problems.iter().filter(|p| **p != Problem::RootMissing);
    assert!(rest.into_iter().all(|p| matches!(p, Problem::DentryParentMissing { parent: ROOT_ID, .. })), "{r}");
    assert!(r.to_string().contains("root (object 1) has no onode"), "{r}");

    commit(s, |b| put_onode(b, &lim, ROOT_ID, &root));
    assert!(fsck(s).is_clean());
}

#[test]
fn rule_3_ids_not_below_next_object_id() {
    let f = fixture(12);
    let s = &f.store;
    let orphan = f.ids.orphan;
    let next = orphan; // the largest id in use is no longer below it
    commit(s, |b| {
        b.put(store_key(&StoreName::new(NEXT_OBJECT_ID).unwrap()), next.to_le_bytes());
    });
    let r = fsck(s);
    assert!(!r.problems.is_empty(), "{r}");
    for p in &r.problems {
        match p {
            Problem::IdNotAllocated { id, next_object_id: Some(n), key, .. } => {
                assert_eq!((*id, *n), (orphan, next), "{p}");
                assert!(matches!(key, MetaKey::Onode { .. } | MetaKey::Extent { .. } | MetaKey::Orphan { .. }));
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(r.problems.contains(&Problem::IdNotAllocated {
        id: orphan,
        key: MetaKey::Orphan { object: orphan },
        field: "object id",
        next_object_id: Some(next)
    }));
    assert!(r.to_string().contains(&format!("next_object_id is {next}")), "{r}");
}

#[test]
fn rule_3_id_zero_and_dentry_children() {
    let f = fixture(13);
    let s = &f.store;
    // An object with id 0, unnamed but with its orphan record.
    let lim = limits(s);
    commit(s, |b| {
        put_onode(b, &lim, 0, &onode(Kind::File, 0, 0, None));
        b.put(orphan_key(0), orphan_record());
    });
    let r = fsck(s);
    let ids: Vec<_> = r.problems.iter().map(|p| matches!(p, Problem::IdNotAllocated { id: 0, .. })).collect();
    assert_eq!(ids, [true, true], "{r}");
    assert!(r.to_string().contains("id 0 never is"), "{r}");
    commit(s, |b| {
        b.delete(onode_key(0));
        b.delete(orphan_key(0));
    });

    // A dentry whose child id was never handed out: rule 3 and rule 4.
    commit(s, |b| put_dentry(b, ROOT_ID, "ghost", u64::MAX, Kind::File));
    change_onode(s, ROOT_ID, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 3 }));
    let key = MetaKey::Dentry { parent: ROOT_ID, name: name("ghost") };
    let r = fsck(s);
    assert_eq!(
        r.problems,
        [
            Problem::IdNotAllocated { id: u64::MAX, key, field: "child id", next_object_id: r_next(s) },
            Problem::DentryChildMissing { parent: ROOT_ID, name: name("ghost"), child: u64::MAX },
        ],
        "{r}"
    );
}

fn r_next(s: &larder_object::Store) -> Option<u64> {
    let v = s.index().get(&store_key(&StoreName::new(NEXT_OBJECT_ID).unwrap())).unwrap()?;
    Some(u64::from_le_bytes(v.try_into().unwrap()))
}

#[test]
fn rule_4_dentry_parents() {
    let f = fixture(14);
    let (s, big, small) = (&f.store, f.ids.big, f.ids.small);
    change_onode(s, big, |o| o.nlink = 3);
    commit(s, |b| put_dentry(b, UNUSED, "x", big, Kind::File));
    assert_only(&fsck(s), &[Problem::DentryParentMissing { parent: UNUSED, name: name("x") }]);
    commit(s, |b| {
        b.delete(dentry_key(UNUSED, &name("x")));
        put_dentry(b, small, "x", big, Kind::File);
    });
    assert_only(&fsck(s), &[Problem::DentryParentNotDirectory { parent: small, name: name("x"), kind: Kind::File }]);
}

#[test]
fn rule_4_dentry_children() {
    let f = fixture(15);
    let (s, a, b_dir, small) = (&f.store, f.ids.a, f.ids.b, f.ids.small);
    commit(s, |b| put_dentry(b, ROOT_ID, "ghost", UNUSED, Kind::File));
    change_onode(s, ROOT_ID, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 3 }));
    assert_only(&fsck(s), &[Problem::DentryChildMissing { parent: ROOT_ID, name: name("ghost"), child: UNUSED }]);
    commit(s, |b| {
        b.delete(dentry_key(ROOT_ID, &name("ghost")));
    });
    change_onode(s, ROOT_ID, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 }));

    commit(s, |b| put_dentry(b, ROOT_ID, "small", small, Kind::Symlink));
    assert_only(
        &fsck(s),
        &[Problem::DentryKindMismatch {
            parent: ROOT_ID,
            name: name("small"),
            child: small,
            dentry: Kind::Symlink,
            onode: Kind::File,
        }],
    );
    commit(s, |b| put_dentry(b, ROOT_ID, "small", small, Kind::File));

    // A second name for directory a, counts kept right.
    commit(s, |b| put_dentry(b, ROOT_ID, "a2", a, Kind::Directory));
    change_onode(s, ROOT_ID, |o| {
        o.dir = Some(DirInfo { parent: ROOT_ID, entries: 3 });
        o.nlink = 2;
    });
    // Two names and its subdirectory b's `..`.
    change_onode(s, a, |o| o.nlink = 3);
    assert_only(
        &fsck(s),
        &[Problem::DirectoryNamedTwice { dir: a, first: (ROOT_ID, name("a")), second: (ROOT_ID, name("a2")) }],
    );
    commit(s, |b| {
        b.delete(dentry_key(ROOT_ID, &name("a2")));
    });
    change_onode(s, ROOT_ID, |o| {
        o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 });
        o.nlink = 1;
    });
    change_onode(s, a, |o| o.nlink = 2);

    change_onode(s, b_dir, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 }));
    assert_only(
        &fsck(s),
        &[Problem::DirectoryParentMismatch { dir: b_dir, recorded: ROOT_ID, parent: a, name: name("b") }],
    );
}

#[test]
fn rule_5_link_counts_and_orphans() {
    let f = fixture(16);
    let (s, big, small, orphan) = (&f.store, f.ids.big, f.ids.small, f.ids.orphan);
    change_onode(s, big, |o| o.nlink = 3);
    assert_only(&fsck(s), &[Problem::NlinkMismatch { object: big, nlink: 3, dentries: 2 }]);
    change_onode(s, big, |o| o.nlink = 2);

    commit(s, |b| {
        b.delete(orphan_key(orphan));
    });
    assert_only(&fsck(s), &[Problem::UnnamedWithoutOrphan { object: orphan }]);
    commit(s, |b| {
        b.put(orphan_key(orphan), orphan_record());
        b.put(orphan_key(UNUSED), orphan_record());
    });
    assert_only(&fsck(s), &[Problem::OrphanWithoutObject { object: UNUSED }]);
    commit(s, |b| {
        b.delete(orphan_key(UNUSED));
        b.put(orphan_key(small), orphan_record());
    });
    assert_only(&fsck(s), &[Problem::OrphanLinked { object: small, nlink: 1 }]);
}

#[test]
fn rule_6_entry_counts_including_merge_operands() {
    let f = fixture(17);
    let (s, a) = (&f.store, f.ids.a);
    change_onode(s, a, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 5 }));
    assert_only(&fsck(s), &[Problem::EntryCountMismatch { dir: a, recorded: 5, found: 2 }]);
    change_onode(s, a, |o| o.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 }));

    // A +1 delta kept as a merge operand: the index folds it on read.
    commit(s, |b| {
        b.merge(DIR_ENTRIES_OPERATOR, onode_key(a), encode_entries_delta(1));
    });
    assert_only(&fsck(s), &[Problem::EntryCountMismatch { dir: a, recorded: 3, found: 2 }]);
    // Through a flush too (the operand then sits in a run).
    s.checkpoint().unwrap();
    assert_only(&fsck(s), &[Problem::EntryCountMismatch { dir: a, recorded: 3, found: 2 }]);
    commit(s, |b| {
        b.merge(DIR_ENTRIES_OPERATOR, onode_key(a), encode_entries_delta(-1));
    });
    assert!(fsck(s).is_clean());
}

#[test]
fn rule_10_xattrs_of_missing_objects() {
    let f = fixture(18);
    let s = &f.store;
    let n = XattrName::new("user.x").unwrap();
    commit(s, |b| {
        b.put(xattr_key(UNUSED, &n), XattrValue(b"v".to_vec()).encode().unwrap());
    });
    assert_only(&fsck(s), &[Problem::XattrWithoutObject { object: UNUSED, name: n }]);
}

#[test]
fn rule_4_directories_reach_the_root() {
    let f = fixture(16);
    let (s, a, b_dir) = (&f.store, f.ids.a, f.ids.b);
    // Move a (which holds b) into b, every count kept right: a and b now
    // name each other and nothing leads to them from the root.
    let root = stat(s, ROOT_ID);
    let b_info = stat(s, b_dir);
    commit(s, |b| {
        b.delete(dentry_key(ROOT_ID, &name("a")));
        put_dentry(b, b_dir, "a", a, Kind::Directory);
    });
    let root_entries = root.dir.unwrap().entries - 1;
    change_onode(s, ROOT_ID, |o| {
        o.dir = Some(DirInfo { parent: ROOT_ID, entries: root_entries });
        o.nlink -= 1;
    });
    let b_entries = b_info.dir.unwrap().entries + 1;
    change_onode(s, b_dir, |o| {
        o.dir = Some(DirInfo { parent: a, entries: b_entries });
        o.nlink += 1;
    });
    change_onode(s, a, |o| o.dir = Some(DirInfo { parent: b_dir, entries: o.dir.unwrap().entries }));
    let r = fsck(s);
    let mut found: Vec<Problem> = r.problems.clone();
    found.sort_by_key(|p| format!("{p:?}"));
    let mut want = vec![
        Problem::DirectoryUnreachable { dir: a, parent: b_dir },
        Problem::DirectoryUnreachable { dir: b_dir, parent: a },
    ];
    want.sort_by_key(|p| format!("{p:?}"));
    assert_eq!(found, want, "{r}");
    assert!(r.to_string().contains("not reachable from the root"), "{r}");
}
