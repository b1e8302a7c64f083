//! Batches of metadata operations: all applied in order, each seeing the
//! earlier ones, or none; permissions and open files as for single calls.
#![allow(clippy::unwrap_used)]

mod common;

use common::{entries, errno, fresh, root, user};
use larder_fs::{BatchDone, BatchOp, Durability, Kind, RenameFlags};
use larder_object::meta::{map_prefix, Map};

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn names(fs: &larder_fs::Fs, dir: u64) -> Vec<String> {
    entries(fs, dir).unwrap().into_iter().map(|(n, _)| String::from_utf8(n).unwrap()).collect()
}

fn orphans(fs: &larder_fs::Fs) -> usize {
    fs.store().index().prefix(&map_prefix(Map::Orphans), true).unwrap().count()
}

fn assert_clean(fs: &larder_fs::Fs) {
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_batch_applies_every_operation_in_order() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let old = fs.mknod(&r, top, b"old", 0o644, 0).unwrap();
    let ops = vec![
        BatchOp::Mkdir { parent: top, name: v("d"), mode: 0o750 },
        BatchOp::Mknod { parent: top, name: v("f"), mode: 0o600, rdev: 0 },
        BatchOp::Symlink { parent: top, name: v("s"), target: v("f") },
        BatchOp::Link { ino: old.ino, parent: top, name: v("old2") },
        // Names the earlier operations made are there for the later ones.
        BatchOp::Rename { parent: top, name: v("f"), new_parent: top, new_name: v("g"), flags: RenameFlags::default() },
        BatchOp::Unlink { parent: top, name: v("s") },
        BatchOp::Unlink { parent: top, name: v("old") },
    ];
    let done = fs.apply_batch(&r, &ops, Durability::Durable).unwrap();
    assert_eq!(done.len(), ops.len());
    let BatchDone::Made(d) = &done[0] else { panic!("{done:?}") };
    assert_eq!((d.kind, d.mode & 0o777), (Kind::Directory, 0o750));
    let BatchDone::Made(linked) = &done[3] else { panic!() };
    assert_eq!(linked.nlink, 2);
    assert!(done[4..].iter().all(|d| *d == BatchDone::Done));
    assert_eq!(names(&fs, top), ["d", "g", "old2"]);
    assert_eq!(fs.getattr(old.ino).unwrap().nlink, 1);
    assert_eq!(orphans(&fs), 0);
    assert_clean(&fs);
}

#[test]
fn a_refused_operation_refuses_the_whole_batch() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    fs.mkdir(&r, top, b"taken", 0o755).unwrap();
    let victim = fs.mknod(&r, top, b"victim", 0o644, 0).unwrap();
    let before = names(&fs, top);
    let refusals: Vec<(Vec<BatchOp>, i32)> = vec![
        (
            vec![
                BatchOp::Mknod { parent: top, name: v("x"), mode: 0o644, rdev: 0 },
                BatchOp::Unlink { parent: top, name: v("victim") },
                BatchOp::Mkdir { parent: top, name: v("taken"), mode: 0o755 },
            ],
            libc::EEXIST,
        ),
        (
            vec![
                BatchOp::Mknod { parent: top, name: v("x"), mode: 0o644, rdev: 0 },
                BatchOp::Unlink { parent: top, name: v("x") },
                BatchOp::Unlink { parent: top, name: v("x") },
            ],
            libc::ENOENT,
        ),
        (
            vec![BatchOp::Unlink { parent: top, name: v("victim") }, BatchOp::Rmdir { parent: top, name: v("victim") }],
            libc::ENOENT,
        ),
        (
            vec![
                BatchOp::Mknod { parent: top, name: v("y"), mode: 0o644, rdev: 0 },
                BatchOp::Unlink { parent: top, name: v("taken") },
            ],
            libc::EISDIR,
        ),
        (
            vec![
                BatchOp::Mknod { parent: top, name: v("y"), mode: 0o644, rdev: 0 },
                BatchOp::Mknod { parent: top, name: v("a/b"), mode: 0o644, rdev: 0 },
            ],
            libc::EINVAL,
        ),
        (
            vec![
                BatchOp::Mknod { parent: top, name: v("y"), mode: 0o644, rdev: 0 },
                BatchOp::Mknod { parent: victim.ino, name: v("z"), mode: 0o644, rdev: 0 },
            ],
            libc::ENOTDIR,
        ),
    ];
    for (ops, expected) in refusals {
        let e = fs.apply_batch(&r, &ops, Durability::Buffered).unwrap_err();
        assert_eq!(e.errno(), expected, "{ops:?}: {e}");
        assert!(e.to_string().contains("operation "), "the error names the operation: {e}");
        assert_eq!(names(&fs, top), before, "{ops:?} changed something");
    }
    assert_eq!(fs.getattr(victim.ino).unwrap().nlink, 1);
    assert_eq!(orphans(&fs), 0);
    assert_clean(&fs);
}

#[test]
fn permissions_are_checked_for_each_operation() {
    let (_d, fs) = fresh();
    let r = root();
    let (alice, bob) = (user(1000, 1000, &[]), user(1001, 1001, &[]));
    let top = fs.root();
    let home = fs.mkdir(&r, top, b"home", 0o777).unwrap();
    let sticky = fs.mkdir(&r, top, b"tmp", 0o1777).unwrap();
    fs.mknod(&alice, sticky.ino, b"alices", 0o644, 0).unwrap();
    let ok = vec![BatchOp::Mknod { parent: home.ino, name: v("bobs"), mode: 0o644, rdev: 0 }];
    let BatchDone::Made(made) = &fs.apply_batch(&bob, &ok, Durability::Buffered).unwrap()[0] else { panic!() };
    assert_eq!((made.uid, made.gid), (1001, 1001));
    let refused = vec![
        BatchOp::Mknod { parent: home.ino, name: v("more"), mode: 0o644, rdev: 0 },
        BatchOp::Unlink { parent: sticky.ino, name: v("alices") },
    ];
    assert_eq!(errno(fs.apply_batch(&bob, &refused, Durability::Buffered)), libc::EPERM);
    let refused = vec![
        BatchOp::Mkdir { parent: home.ino, name: v("d"), mode: 0o755 },
        BatchOp::Mkdir { parent: top, name: v("d"), mode: 0o755 },
    ];
    assert_eq!(errno(fs.apply_batch(&bob, &refused, Durability::Buffered)), libc::EACCES);
    assert_eq!(names(&fs, home.ino), ["bobs"]);
    assert_eq!(names(&fs, sticky.ino), ["alices"]);
}

#[test]
fn an_open_file_removed_by_a_batch_lives_until_its_last_release() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let (f, fh) = fs.create_file(&r, top, b"f", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &vec![3u8; 200_000]).unwrap();
    let target = fs.mknod(&r, top, b"target", 0o644, 0).unwrap();
    let tfh = fs.open_file(&r, target.ino, libc::O_RDONLY).unwrap();
    let ops = vec![
        BatchOp::Unlink { parent: top, name: v("f") },
        BatchOp::Mknod { parent: top, name: v("new"), mode: 0o644, rdev: 0 },
        // Replaces an open file: it too lives on.
        BatchOp::Rename {
            parent: top,
            name: v("new"),
            new_parent: top,
            new_name: v("target"),
            flags: RenameFlags::default(),
        },
    ];
    fs.apply_batch(&r, &ops, Durability::Buffered).unwrap();
    assert_eq!(orphans(&fs), 2);
    assert_eq!(fs.read(fh, 0, 4).unwrap(), [3, 3, 3, 3]);
    fs.release(fh).unwrap();
    fs.release(tfh).unwrap();
    assert_eq!(orphans(&fs), 0);
    assert!(fs.store().stat(f.ino).unwrap().is_none() && fs.store().stat(target.ino).unwrap().is_none());
    assert_clean(&fs);
}

#[test]
fn a_batch_moves_one_directory_and_never_into_itself() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let a = fs.mkdir(&r, top, b"a", 0o755).unwrap();
    let b = fs.mkdir(&r, top, b"b", 0o755).unwrap();
    let inner = fs.mkdir(&r, a.ino, b"inner", 0o755).unwrap();
    let flags = RenameFlags::default();
    let into_itself =
        vec![BatchOp::Rename { parent: top, name: v("a"), new_parent: inner.ino, new_name: v("a"), flags }];
    assert_eq!(errno(fs.apply_batch(&r, &into_itself, Durability::Buffered)), libc::EINVAL);
    let two = vec![
        BatchOp::Rename { parent: top, name: v("a"), new_parent: b.ino, new_name: v("a"), flags },
        BatchOp::Rename { parent: a.ino, name: v("inner"), new_parent: top, new_name: v("inner"), flags },
    ];
    assert_eq!(errno(fs.apply_batch(&r, &two, Durability::Buffered)), libc::EINVAL);
    // A directory made by the batch stays where it was made.
    let made_then_moved = vec![
        BatchOp::Mkdir { parent: top, name: v("new"), mode: 0o755 },
        BatchOp::Rename { parent: top, name: v("new"), new_parent: b.ino, new_name: v("new"), flags },
    ];
    assert_eq!(errno(fs.apply_batch(&r, &made_then_moved, Durability::Buffered)), libc::EINVAL);
    let one = vec![
        BatchOp::Rename { parent: top, name: v("a"), new_parent: b.ino, new_name: v("a"), flags },
        BatchOp::Mkdir { parent: inner.ino, name: v("deeper"), mode: 0o755 },
    ];
    fs.apply_batch(&r, &one, Durability::Durable).unwrap();
    assert_eq!(names(&fs, top), ["b"]);
    assert_eq!(fs.resolve(&r, b"/b/a/inner/deeper", false).unwrap().attr.unwrap().kind, Kind::Directory);
    assert_clean(&fs);
}

#[test]
fn batches_and_single_calls_race_on_shared_names_and_leave_a_clean_store() {
    let (_d, fs) = fresh();
    let r = root();
    let dir = fs.mkdir(&r, fs.root(), b"d", 0o777).unwrap().ino;
    std::thread::scope(|scope| {
        for t in 0..3 {
            let fs = &fs;
            scope.spawn(move || {
                let r = root();
                for n in 0..60 {
                    let name = format!("t{t}-{n}").into_bytes();
                    let ops = vec![
                        BatchOp::Mknod { parent: dir, name: name.clone(), mode: 0o644, rdev: 0 },
                        BatchOp::Link { ino: 0, parent: dir, name: b"unused".to_vec() },
                    ];
                    // A link of object 0 (none) refuses the batch: nothing made.
                    assert!(fs.apply_batch(&r, &ops, Durability::Buffered).is_err());
                    let ops = vec![
                        BatchOp::Mknod { parent: dir, name: name.clone(), mode: 0o644, rdev: 0 },
                        BatchOp::Rename {
                            parent: dir,
                            name,
                            new_parent: dir,
                            new_name: b"shared".to_vec(),
                            flags: RenameFlags::default(),
                        },
                    ];
                    fs.apply_batch(&r, &ops, Durability::Buffered).unwrap();
                }
            });
        }
        let fs = &fs;
        scope.spawn(move || {
            let r = root();
            for _ in 0..200 {
                match fs.unlink(&r, dir, b"shared") {
                    Ok(()) => {}
                    Err(e) => assert_eq!(e.errno(), libc::ENOENT),
                }
            }
        });
    });
    let left = names(&fs, dir);
    assert!(left.is_empty() || left == ["shared"], "{left:?}");
    assert_eq!(orphans(&fs), 0);
    assert_clean(&fs);
}
