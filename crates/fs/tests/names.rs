//! Names: create, lookup, link, unlink, rmdir, symlinks, mknod and their
//! errors; parent times; names and paths at and past the limits.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, fresh, root};
use larder_fs::{Kind, NAME_MAX, PATH_MAX};

#[test]
fn create_lookup_and_the_errors_of_names() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let (a, fh) = fs.create_file(&r, top, b"a", 0o644, libc::O_RDWR | libc::O_EXCL).unwrap();
    fs.release(fh).unwrap();
    assert_eq!(a.kind, Kind::File);
    assert_eq!(a.mode, 0o100_644);
    assert_eq!(fs.lookup(&r, top, b"a").unwrap().ino, a.ino);
    assert_eq!(errno(fs.create_file(&r, top, b"a", 0o644, libc::O_RDWR | libc::O_EXCL)), libc::EEXIST);
    assert_eq!(errno(fs.mkdir(&r, top, b"a", 0o755)), libc::EEXIST);
    assert_eq!(errno(fs.lookup(&r, top, b"missing")), libc::ENOENT);
    assert_eq!(errno(fs.lookup(&r, a.ino, b"x")), libc::ENOTDIR);
    assert_eq!(errno(fs.mkdir(&r, a.ino, b"x", 0o755)), libc::ENOTDIR);
    assert_eq!(errno(fs.rmdir(&r, top, b"a")), libc::ENOTDIR);
    let d = fs.mkdir(&r, top, b"d", 0o755).unwrap();
    assert_eq!(errno(fs.unlink(&r, top, b"d")), libc::EISDIR);
    fs.mknod(&r, d.ino, b"f", 0o600, 0).unwrap();
    assert_eq!(errno(fs.rmdir(&r, top, b"d")), libc::ENOTEMPTY);
    assert_eq!(fs.lookup(&r, d.ino, b"..").unwrap().ino, top);
    assert_eq!(fs.lookup(&r, d.ino, b".").unwrap().ino, d.ino);
    assert_eq!(fs.lookup(&r, top, b"..").unwrap().ino, top, "the root is its own parent");
    assert_eq!(errno(fs.rmdir(&r, d.ino, b".")), libc::EINVAL);
    fs.unlink(&r, d.ino, b"f").unwrap();
    fs.rmdir(&r, top, b"d").unwrap();
    assert_eq!(errno(fs.lookup(&r, top, b"d")), libc::ENOENT);
    assert_eq!(errno(fs.getattr(d.ino)), libc::ENOENT);

    let long = vec![b'n'; NAME_MAX + 1];
    assert_eq!(errno(fs.mkdir(&r, top, &long, 0o755)), libc::ENAMETOOLONG);
    fs.mkdir(&r, top, &long[..NAME_MAX], 0o755).unwrap();
    assert_eq!(errno(fs.mkdir(&r, top, b"a/b", 0o755)), libc::EINVAL);
    assert_eq!(errno(fs.mkdir(&r, top, b"a\0b", 0o755)), libc::EINVAL);
    assert_eq!(errno(fs.mkdir(&r, top, b"", 0o755)), libc::ENOENT);
    // A lookup refuses the same names with the same errors, and finds the
    // longest name allowed.
    assert_eq!(errno(fs.lookup(&r, top, &long)), libc::ENAMETOOLONG);
    assert_eq!(fs.lookup(&r, top, &long[..NAME_MAX]).unwrap().kind, Kind::Directory);
    assert_eq!(errno(fs.lookup(&r, top, b"a/b")), libc::EINVAL);
    assert_eq!(errno(fs.lookup(&r, top, b"a\0b")), libc::EINVAL);
    assert_eq!(errno(fs.lookup(&r, top, b"")), libc::ENOENT);
    assert_eq!(errno(fs.resolve(&r, &vec![b'a'; PATH_MAX], true)), libc::ENAMETOOLONG);
}

#[test]
fn hard_links_count_names_and_directories_get_none() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let f = fs.mknod(&r, top, b"f", 0o644, 0).unwrap();
    assert_eq!(f.nlink, 1);
    let linked = fs.link(&r, f.ino, top, b"g").unwrap();
    assert_eq!(linked.nlink, 2);
    assert!(linked.ctime >= f.ctime);
    assert_eq!(errno(fs.link(&r, f.ino, top, b"g")), libc::EEXIST);
    let d = fs.mkdir(&r, top, b"d", 0o755).unwrap();
    assert_eq!(errno(fs.link(&r, d.ino, top, b"d2")), libc::EPERM);
    fs.unlink(&r, top, b"f").unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 1);
    fs.unlink(&r, top, b"g").unwrap();
    assert_eq!(errno(fs.getattr(f.ino)), libc::ENOENT);
}

#[test]
fn creating_and_removing_names_marks_the_directory_changed() {
    let (_d, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    fs.mknod(&r, d.ino, b"f", 0o644, 0).unwrap();
    let after_create = fs.getattr(d.ino).unwrap();
    assert!(after_create.mtime > d.mtime && after_create.ctime > d.ctime);
    std::thread::sleep(std::time::Duration::from_millis(2));
    fs.unlink(&r, d.ino, b"f").unwrap();
    assert!(fs.getattr(d.ino).unwrap().mtime > after_create.mtime);
}

#[test]
fn symlinks_and_paths() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let d = fs.mkdir(&r, top, b"d", 0o755).unwrap();
    let f = fs.mknod(&r, d.ino, b"f", 0o644, 0).unwrap();
    let l = fs.symlink(&r, top, b"l", b"d/f").unwrap();
    assert_eq!(l.kind, Kind::Symlink);
    assert_eq!(l.size, 3);
    assert_eq!(fs.readlink(l.ino).unwrap(), b"d/f");
    assert_eq!(errno(fs.readlink(f.ino)), libc::EINVAL);
    assert_eq!(fs.resolve(&r, b"/l", true).unwrap().attr.unwrap().ino, f.ino);
    assert_eq!(fs.resolve(&r, b"/l", false).unwrap().attr.unwrap().ino, l.ino);
    assert_eq!(fs.resolve(&r, b"d/../d/./f", true).unwrap().attr.unwrap().ino, f.ino);
    assert_eq!(fs.resolve(&r, b"//d//f", true).unwrap().attr.unwrap().ino, f.ino);
    assert_eq!(errno(fs.resolve(&r, b"/d/f/", true)), libc::ENOTDIR);
    assert_eq!(errno(fs.resolve(&r, b"/d/f/x", true)), libc::ENOTDIR);
    let missing = fs.resolve(&r, b"/d/new", true).unwrap();
    assert_eq!((missing.parent, missing.name.as_slice(), missing.attr), (d.ino, &b"new"[..], None));
    assert_eq!(errno(fs.resolve(&r, b"/nope/new", true)), libc::ENOENT);
    fs.symlink(&r, top, b"up", b"/d").unwrap();
    assert_eq!(fs.resolve(&r, b"up/f", true).unwrap().attr.unwrap().ino, f.ino);
    fs.symlink(&r, top, b"loop1", b"loop2").unwrap();
    fs.symlink(&r, top, b"loop2", b"loop1").unwrap();
    assert_eq!(errno(fs.resolve(&r, b"loop1", true)), libc::ELOOP);
    assert_eq!(fs.resolve(&r, b"loop1", false).unwrap().attr.unwrap().kind, Kind::Symlink);
    assert_eq!(errno(fs.symlink(&r, top, b"empty", b"")), libc::ENOENT);
    assert_eq!(errno(fs.symlink(&r, top, b"long", &vec![b'x'; PATH_MAX])), libc::ENAMETOOLONG);
}

#[test]
fn device_nodes_keep_their_numbers() {
    let (_d, fs) = fresh();
    let r = root();
    let c = fs.mknod(&r, fs.root(), b"c", libc::S_IFCHR | 0o600, 0x0501).unwrap();
    assert_eq!((c.kind, c.rdev, c.mode), (Kind::CharDevice, 0x0501, libc::S_IFCHR | 0o600));
    let p = fs.mknod(&r, fs.root(), b"p", libc::S_IFIFO | 0o644, 7).unwrap();
    assert_eq!((p.kind, p.rdev), (Kind::Fifo, 0));
    assert_eq!(errno(fs.mknod(&r, fs.root(), b"x", libc::S_IFDIR | 0o755, 0)), libc::EINVAL);
}

#[test]
fn directory_link_counts_follow_their_subdirectories() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    assert_eq!(fs.getattr(top).unwrap().nlink, 2);
    let d = fs.mkdir(&r, top, b"d", 0o755).unwrap();
    assert_eq!(d.nlink, 2);
    assert_eq!(fs.getattr(top).unwrap().nlink, 3);
    let e = fs.mkdir(&r, d.ino, b"e", 0o755).unwrap();
    fs.mknod(&r, d.ino, b"file", 0o644, 0).unwrap();
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 3, "files do not count");
    // Moving e up: d loses its `..` link, the root gains it.
    fs.rename(&r, d.ino, b"e", top, b"e", Default::default()).unwrap();
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 2);
    assert_eq!(fs.getattr(top).unwrap().nlink, 4);
    // Exchanging a directory with a file across parents moves the link.
    let exchange = larder_fs::RenameFlags { exchange: true, ..Default::default() };
    fs.rename(&r, top, b"e", d.ino, b"file", exchange).unwrap();
    assert_eq!(fs.lookup(&r, d.ino, b"file").unwrap().ino, e.ino);
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 3);
    assert_eq!(fs.getattr(top).unwrap().nlink, 3);
    fs.rmdir(&r, d.ino, b"file").unwrap();
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 2);
    fs.unlink(&r, top, b"e").unwrap();
    fs.rmdir(&r, top, b"d").unwrap();
    assert_eq!(fs.getattr(top).unwrap().nlink, 2);
}

/// A path finished from its cached prefix (`split_parent`, the walk's
/// `Walked::parent`, `resolve_in`) answers what a walk from the root
/// answers, errors included, for users who may and may not search; a
/// prefix through `.`, `..` or a symbolic link is not offered for caching.
#[test]
fn a_path_finished_from_its_cached_directory_answers_as_the_walk() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let a = fs.mkdir(&r, top, b"a", 0o755).unwrap();
    let b = fs.mkdir(&r, a.ino, b"b", 0o711).unwrap();
    let private = fs.mkdir(&r, a.ino, b"p", 0o700).unwrap();
    fs.mknod(&r, b.ino, b"f", 0o644, 0).unwrap();
    fs.mknod(&r, private.ino, b"f", 0o644, 0).unwrap();
    fs.symlink(&r, b.ino, b"to_f", b"f").unwrap();
    fs.symlink(&r, b.ino, b"to_b", b"/a/b").unwrap();
    fs.symlink(&r, top, b"la", b"a").unwrap();
    let long = format!("/a/b/{}", "n".repeat(NAME_MAX + 1));
    let paths: Vec<&[u8]> = vec![
        b"/a/b/f",
        b"a/b/f",
        b"/a/b/f/",
        b"/a/b/new",
        b"/a/b/new/",
        b"/a/b/to_f",
        b"/a/b/to_f/",
        b"/a/b/to_b",
        b"/a/b/to_b/",
        b"/a/p/f",
        b"/a/p/new",
        b"//a//b//f",
        long.as_bytes(),
    ];
    for cred in [root(), common::user(7, 7, &[])] {
        for path in &paths {
            for follow in [true, false] {
                let walked = fs.resolve(&cred, path, follow);
                let Some((prefix, name, dir_only)) = larder_fs::split_parent(path) else {
                    assert!(path.len() > NAME_MAX, "{:?} is split", String::from_utf8_lossy(path));
                    continue;
                };
                let Ok(parent) = fs.resolve_walk(&cred, prefix, true).map(|w| w.resolved.attr) else {
                    assert!(walked.is_err());
                    continue;
                };
                let parent = parent.unwrap();
                let finished = fs.resolve_in(&cred, &parent, name, follow, dir_only);
                match (finished, &walked) {
                    (Ok(Some(f)), Ok(w)) => assert_eq!(&f, w, "{:?}", String::from_utf8_lossy(path)),
                    (Ok(None), _) => {}
                    (Err(e), Err(w)) => assert_eq!(e.errno(), w.errno(), "{:?}", String::from_utf8_lossy(path)),
                    (f, w) => panic!("{:?}: finished {f:?}, walked {w:?}", String::from_utf8_lossy(path)),
                }
                let cached = fs.resolve_walk(&cred, path, follow).ok().and_then(|w| w.parent);
                if let Some(cached) = cached {
                    assert_eq!(cached, parent);
                }
            }
        }
    }
    for path in [&b"/la/b/f"[..], b"/a/./b/f", b"/a/b/../b/f", b"/a/b/to_b/f", b"/f", b"/a/b/."] {
        let walk = fs.resolve_walk(&r, path, true);
        assert_eq!(walk.map(|w| w.parent).ok().flatten(), None, "{:?}", String::from_utf8_lossy(path));
    }
}
