//! Permissions as Linux checks them: classes, the superuser, sticky
//! directories, setgid directories, ownership rules of chmod, chown and
//! utimes, and setuid bits dropped on write and chown.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, fresh, root, user};
use larder_fs::{SetAttr, SetTime, Timestamp};

#[test]
fn mode_classes_decide_access() {
    let (_d, fs) = fresh();
    let r = root();
    let (alice, bob, carol) = (user(1000, 1000, &[]), user(1001, 2000, &[]), user(1002, 3000, &[1000]));
    let top = fs.root();
    // The root directory is 0755 root: others cannot create in it.
    assert_eq!(errno(fs.mkdir(&alice, top, b"x", 0o755)), libc::EACCES);
    let home = fs.mkdir(&r, top, b"home", 0o777).unwrap();
    let f = fs.mknod(&alice, home.ino, b"f", 0o640, 0).unwrap();
    assert_eq!((f.uid, f.gid), (1000, 1000));
    assert!(fs.open_file(&alice, f.ino, libc::O_RDWR).is_ok());
    // Carol is in group 1000 through a supplementary group: read only.
    assert!(fs.open_file(&carol, f.ino, libc::O_RDONLY).is_ok());
    assert_eq!(errno(fs.open_file(&carol, f.ino, libc::O_WRONLY)), libc::EACCES);
    assert_eq!(errno(fs.open_file(&bob, f.ino, libc::O_RDONLY)), libc::EACCES);
    assert!(fs.open_file(&r, f.ino, libc::O_RDWR).is_ok(), "the superuser passes");
    assert_eq!(errno(fs.access(&r, f.ino, 1)), libc::EACCES, "not even root executes a file without x bits");
    assert!(fs.access(&alice, f.ino, 4 | 2).is_ok());
    // No search permission on a directory: no lookups in it.
    let closed = fs.mkdir(&alice, home.ino, b"closed", 0o700).unwrap();
    assert_eq!(errno(fs.lookup(&bob, closed.ino, b"anything")), libc::EACCES);
    assert_eq!(errno(fs.opendir(&bob, closed.ino)), libc::EACCES);
}

#[test]
fn a_sticky_directory_protects_other_users_names() {
    let (_d, fs) = fresh();
    let r = root();
    let (alice, bob) = (user(1000, 1000, &[]), user(1001, 1001, &[]));
    let tmp = fs.mkdir(&r, fs.root(), b"tmp", 0o1777).unwrap();
    fs.mknod(&alice, tmp.ino, b"mine", 0o666, 0).unwrap();
    assert_eq!(errno(fs.unlink(&bob, tmp.ino, b"mine")), libc::EPERM);
    assert_eq!(errno(fs.rename(&bob, tmp.ino, b"mine", tmp.ino, b"stolen", Default::default())), libc::EPERM);
    fs.unlink(&alice, tmp.ino, b"mine").unwrap();
    fs.mknod(&alice, tmp.ino, b"again", 0o666, 0).unwrap();
    fs.unlink(&r, tmp.ino, b"again").unwrap();
}

#[test]
fn only_owners_link_files_they_cannot_read_and_write() {
    let (_d, fs) = fresh();
    let r = root();
    let (alice, bob) = (user(1000, 1000, &[]), user(1001, 1001, &[]));
    let open = fs.mkdir(&r, fs.root(), b"open", 0o777).unwrap();
    let closed = fs.mkdir(&r, fs.root(), b"closed", 0o755).unwrap();
    let readable = fs.mknod(&alice, open.ino, b"readable", 0o644, 0).unwrap();
    let shared = fs.mknod(&alice, open.ino, b"shared", 0o666, 0).unwrap();
    let setuid = fs.mknod(&alice, open.ino, b"setuid", 0o4666, 0).unwrap();
    let fifo = fs.mknod(&alice, open.ino, b"fifo", libc::S_IFIFO | 0o666, 0).unwrap();
    // fs.protected_hardlinks: not owned, not read-and-writable: EPERM,
    // before the directory's own check (EACCES in `closed`).
    assert_eq!(errno(fs.link(&bob, readable.ino, open.ino, b"l1")), libc::EPERM);
    assert_eq!(errno(fs.link(&bob, readable.ino, closed.ino, b"l1")), libc::EPERM);
    assert_eq!(errno(fs.link(&bob, setuid.ino, open.ino, b"l2")), libc::EPERM);
    assert_eq!(errno(fs.link(&bob, fifo.ino, open.ino, b"l3")), libc::EPERM);
    assert_eq!(fs.link(&bob, shared.ino, open.ino, b"l4").unwrap().nlink, 2);
    assert_eq!(errno(fs.link(&bob, shared.ino, closed.ino, b"l5")), libc::EACCES);
    assert_eq!(fs.link(&alice, readable.ino, open.ino, b"l6").unwrap().nlink, 2);
    assert_eq!(fs.link(&r, setuid.ino, closed.ino, b"l7").unwrap().nlink, 2);
    // A taken name is EEXIST before any of that.
    assert_eq!(errno(fs.link(&bob, readable.ino, closed.ino, b"l7")), libc::EEXIST);
}

#[test]
fn a_taken_name_is_eexist_even_where_the_caller_may_not_write() {
    let (_d, fs) = fresh();
    let r = root();
    let bob = user(1001, 1001, &[]);
    let closed = fs.mkdir(&r, fs.root(), b"closed", 0o755).unwrap();
    let hidden = fs.mkdir(&r, fs.root(), b"hidden", 0o700).unwrap();
    fs.mknod(&r, closed.ino, b"taken", 0o644, 0).unwrap();
    fs.mknod(&r, hidden.ino, b"taken", 0o644, 0).unwrap();
    // As `mkdir /usr` by a user: the name is looked up first.
    assert_eq!(errno(fs.mkdir(&bob, closed.ino, b"taken", 0o755)), libc::EEXIST);
    assert_eq!(errno(fs.mknod(&bob, closed.ino, b"taken", 0o644, 0)), libc::EEXIST);
    assert_eq!(errno(fs.symlink(&bob, closed.ino, b"taken", b"t")), libc::EEXIST);
    assert_eq!(errno(fs.mkdir(&bob, closed.ino, b"free", 0o755)), libc::EACCES);
    // Without search permission the lookup itself is refused.
    assert_eq!(errno(fs.mkdir(&bob, hidden.ino, b"taken", 0o755)), libc::EACCES);
    // open(O_CREAT) of a taken name opens it, by the file's permissions.
    let (attr, fh) = fs.create_file(&bob, closed.ino, b"taken", 0o600, libc::O_RDONLY).unwrap();
    assert_eq!(attr.mode & 0o777, 0o644);
    fs.release(fh).unwrap();
    assert_eq!(errno(fs.create_file(&bob, closed.ino, b"taken", 0o600, libc::O_RDWR)), libc::EACCES);
}

#[test]
fn a_setgid_directory_passes_its_group_down() {
    let (_d, fs) = fresh();
    let r = root();
    let shared = fs.mkdir(&r, fs.root(), b"shared", 0o777).unwrap();
    fs.setattr(&r, shared.ino, &SetAttr { gid: Some(500), mode: Some(0o2777), ..Default::default() }, None).unwrap();
    let alice = user(1000, 1000, &[]);
    let f = fs.mknod(&alice, shared.ino, b"f", 0o2755, 0).unwrap();
    assert_eq!(f.gid, 500);
    assert_eq!(f.mode & 0o2000, 0, "a caller outside the group cannot make a setgid file");
    let d = fs.mkdir(&alice, shared.ino, b"d", 0o755).unwrap();
    assert_eq!((d.gid, d.mode & 0o2000), (500, 0o2000), "subdirectories inherit setgid");
}

#[test]
fn only_owners_change_modes_owners_and_times() {
    let (_d, fs) = fresh();
    let r = root();
    let (alice, bob) = (user(1000, 1000, &[1000, 50]), user(1001, 1001, &[]));
    let home = fs.mkdir(&r, fs.root(), b"home", 0o777).unwrap();
    let f = fs.mknod(&alice, home.ino, b"f", 0o666, 0).unwrap();
    let chmod = |m| SetAttr { mode: Some(m), ..Default::default() };
    assert_eq!(errno(fs.setattr(&bob, f.ino, &chmod(0o600), None)), libc::EPERM);
    assert_eq!(fs.setattr(&alice, f.ino, &chmod(0o600), None).unwrap().mode, 0o100_600);
    // chown: an owner may change the group to one of its own, nothing else.
    let chgrp = |g| SetAttr { gid: Some(g), ..Default::default() };
    assert_eq!(fs.setattr(&alice, f.ino, &chgrp(50), None).unwrap().gid, 50);
    assert_eq!(errno(fs.setattr(&alice, f.ino, &chgrp(60), None)), libc::EPERM);
    assert_eq!(errno(fs.setattr(&alice, f.ino, &SetAttr { uid: Some(1001), ..Default::default() }, None)), libc::EPERM);
    assert_eq!(fs.setattr(&r, f.ino, &SetAttr { uid: Some(1001), ..Default::default() }, None).unwrap().uid, 1001);
    // Times: "now" needs write permission, a given time ownership.
    fs.setattr(&r, f.ino, &chmod(0o666), None).unwrap();
    let at = SetTime::At(Timestamp { secs: 1_000_000, nanos: 5 });
    let set_at = SetAttr { mtime: Some(at), ..Default::default() };
    assert_eq!(errno(fs.setattr(&alice, f.ino, &set_at, None)), libc::EPERM);
    assert_eq!(fs.setattr(&bob, f.ino, &set_at, None).unwrap().mtime, Timestamp { secs: 1_000_000, nanos: 5 });
    let now = SetAttr { atime: Some(SetTime::Now), mtime: Some(SetTime::Now), ..Default::default() };
    fs.setattr(&alice, f.ino, &now, None).unwrap();
    fs.setattr(&r, f.ino, &chmod(0o600), None).unwrap();
    assert_eq!(errno(fs.setattr(&alice, f.ino, &now, None)), libc::EACCES);
}

#[test]
fn setuid_bits_drop_on_write_and_chown() {
    let (_d, fs) = fresh();
    let r = root();
    let alice = user(1000, 1000, &[]);
    let home = fs.mkdir(&r, fs.root(), b"home", 0o777).unwrap();
    let f = fs.mknod(&alice, home.ino, b"f", 0o6777, 0).unwrap();
    let chmod = SetAttr { mode: Some(0o6777), ..Default::default() };
    fs.setattr(&r, f.ino, &chmod, None).unwrap();
    let fh = fs.open_file(&alice, f.ino, libc::O_WRONLY).unwrap();
    fs.write(&alice, fh, 0, b"x").unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, 0o0777);
    fs.release(fh).unwrap();
    fs.setattr(&r, f.ino, &chmod, None).unwrap();
    let chown = SetAttr { uid: Some(1000), ..Default::default() };
    assert_eq!(fs.setattr(&r, f.ino, &chown, None).unwrap().mode & 0o7777, 0o0777);
    // A root write keeps them.
    fs.setattr(&r, f.ino, &chmod, None).unwrap();
    let fh = fs.open_file(&r, f.ino, libc::O_WRONLY).unwrap();
    fs.write(&r, fh, 0, b"y").unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, 0o6777);
}

/// What Linux (ext4, 6.x) does when a user who is neither the owner nor
/// the superuser writes a setuid or setgid file: the write goes through;
/// setuid drops; setgid drops when group execute is set or the writer is
/// outside the file's group.
#[test]
fn a_non_owners_write_drops_setuid_and_setgid_as_linux_does() {
    let (_d, fs) = fresh();
    let r = root();
    let home = fs.mkdir(&r, fs.root(), b"home", 0o777).unwrap();
    let nobody = user(65534, 65534, &[]);
    let member = user(65534, 65534, &[500]);
    for (name, mode, writer, after) in [
        (&b"u"[..], 0o4777, &nobody, 0o777),
        (b"g", 0o2777, &nobody, 0o777),
        (b"ug", 0o6777, &nobody, 0o777),
        (b"g-outside", 0o2767, &nobody, 0o767),
        (b"g-member", 0o2767, &member, 0o2767),
        (b"ug-member", 0o6767, &member, 0o2767),
    ] {
        let f = fs.mknod(&r, home.ino, name, 0o644, 0).unwrap();
        fs.setattr(&r, f.ino, &SetAttr { gid: Some(500), mode: Some(mode), ..Default::default() }, None).unwrap();
        let fh = fs.open_file(writer, f.ino, libc::O_WRONLY | libc::O_APPEND).unwrap();
        fs.write(writer, fh, 0, b"x").unwrap();
        fs.release(fh).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, after, "{mode:o} written by {writer:?}");
    }
}

/// A FUSE kernel without `handle_killpriv` drops those bits before the
/// write reaches the file system, with a mode setattr sent as the writer:
/// it must pass where a chmod by the same user is refused.
#[test]
fn a_writer_may_drop_the_bits_a_write_drops_and_change_nothing_else() {
    let (_d, fs) = fresh();
    let r = root();
    let home = fs.mkdir(&r, fs.root(), b"home", 0o777).unwrap();
    let nobody = user(65534, 65534, &[]);
    let chmod = |m| SetAttr { mode: Some(m), ..Default::default() };
    let f = fs.mknod(&r, home.ino, b"f", 0o644, 0).unwrap();
    fs.setattr(&r, f.ino, &chmod(0o6777), None).unwrap();
    // Not a privilege drop: a chmod, refused to a non-owner.
    for refused in [0o6775, 0o6777, 0o7777, 0o6700, 0o0775, 0o4767] {
        assert_eq!(errno(fs.setattr(&nobody, f.ino, &chmod(refused), None)), libc::EPERM, "{refused:o}");
    }
    assert_eq!(fs.setattr(&nobody, f.ino, &chmod(0o2777), None).unwrap().mode & 0o7777, 0o2777);
    assert_eq!(fs.setattr(&nobody, f.ino, &chmod(0o0777), None).unwrap().mode & 0o7777, 0o0777);
    // Without write permission, no drop either.
    fs.setattr(&r, f.ino, &chmod(0o4755), None).unwrap();
    assert_eq!(errno(fs.setattr(&nobody, f.ino, &chmod(0o0755), None)), libc::EPERM);
    // A truncate with the drop (as the kernel sends for O_TRUNC or
    // ftruncate): the size changes and the bits drop.
    fs.setattr(&r, f.ino, &chmod(0o6777), None).unwrap();
    let fh = fs.open_file(&r, f.ino, libc::O_WRONLY).unwrap();
    fs.write(&r, fh, 0, b"data").unwrap();
    fs.release(fh).unwrap();
    let cut = SetAttr { size: Some(1), mode: Some(0o0777), ..Default::default() };
    let a = fs.setattr(&nobody, f.ino, &cut, None).unwrap();
    assert_eq!((a.size, a.mode & 0o7777), (1, 0o0777));
    // Opening an empty setuid file with O_TRUNC drops the bits too.
    fs.setattr(&r, f.ino, &SetAttr { size: Some(0), mode: Some(0o4777), ..Default::default() }, None).unwrap();
    let fh = fs.open_file(&nobody, f.ino, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    fs.release(fh).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, 0o0777);
    // On a directory nothing is dropped by writes: a non-owner's mode
    // change stays a chmod.
    let d = fs.mkdir(&r, home.ino, b"d", 0o2777).unwrap();
    assert_eq!(errno(fs.setattr(&nobody, d.ino, &chmod(0o0777), None)), libc::EPERM);
}
