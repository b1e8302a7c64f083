//! Heaps through the file system (docs/heap.md, "What a heap is"): heap
//! objects read like files and take writes in place; a heap's directories
//! refuse every change of their entries, heap objects refuse hard links
//! and shrinking, all with EPERM and nothing changed; attributes still
//! change.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../object/tests/heap_fixture/mod.rs"]
mod heap_fixture;

use common::{entries, errno, fresh, root};
use larder_fs::{BatchOp, Fs, Kind, RenameFlags, SetAttr};

/// A file system holding a heap at `/heap` with object "hello" (two names)
/// and an ordinary directory `/plain` with a file `f`.
fn setup() -> (tempfile::TempDir, Fs, heap_fixture::TestHeap, u64) {
    let (dir, fs) = fresh();
    let heap = heap_fixture::create_heap(fs.store(), fs.root(), "heap");
    let id = heap_fixture::add_object(fs.store(), &heap, b"hello, heap\n", &["greeting", "hi"]);
    let plain = fs.mkdir(&root(), fs.root(), b"plain", 0o755).unwrap().ino;
    let (_, fh) = fs.create_file(&root(), plain, b"f", 0o644, libc::O_WRONLY).unwrap();
    fs.release(fh).unwrap();
    (dir, fs, heap, id)
}

#[test]
fn heap_objects_read_like_files_through_every_name() {
    let (_dir, fs, heap, id) = setup();
    for path in [format!("/heap/objects/{id}"), "/heap/names/greeting".into(), "/heap/names/hi".into()] {
        let found = fs.resolve(&root(), path.as_bytes(), true).unwrap();
        let attr = found.attr.unwrap();
        assert_eq!((attr.ino, attr.size, attr.kind, attr.nlink), (id, 12, Kind::File, 3), "{path}");
    }
    let fh = fs.open_file(&root(), id, libc::O_RDONLY).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"hello, heap\n");
    assert_eq!(fs.read(fh, 7, 4).unwrap(), b"heap");
    fs.release(fh).unwrap();
    let names: Vec<_> = entries(&fs, heap.names_dir).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec![b"greeting".to_vec(), b"hi".to_vec()]);
    assert_eq!(entries(&fs, heap.objects_dir).unwrap(), vec![(id.to_string().into_bytes(), Kind::File)]);
    let top: Vec<_> = entries(&fs, heap.root).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(top, vec![b"names".to_vec(), b"objects".to_vec()]);
    assert_eq!(fs.getattr(id).unwrap().size, 12);
}

#[test]
fn writes_go_in_place_into_the_heap_file() {
    let (_dir, fs, _heap, id) = setup();
    let fh = fs.open_file(&root(), id, libc::O_WRONLY).unwrap();
    assert_eq!(fs.write(&root(), fh, 0, b"HELLO").unwrap(), 5);
    assert_eq!(fs.write(&root(), fh, 20, b"past").unwrap(), 4);
    fs.fsync(fh).unwrap();
    fs.release(fh).unwrap();
    let fh = fs.open_file(&root(), id, libc::O_WRONLY | libc::O_APPEND).unwrap();
    fs.write(&root(), fh, 0, b"+end").unwrap();
    fs.release(fh).unwrap();
    let expected = b"HELLO, heap\n\0\0\0\0\0\0\0\0past+end".to_vec();
    assert_eq!(fs.getattr(id).unwrap().size, expected.len() as u64);
    // In place: the heap's own file holds the bytes, as a mapping sees them.
    let on_disk = std::fs::read(fs.store().heap_file_path(id)).unwrap();
    assert_eq!(on_disk, expected);
    let fh = fs.open_file(&root(), id, libc::O_RDONLY).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), expected);
    fs.release(fh).unwrap();
    // Growing by truncate extends with zeros.
    fs.setattr(&root(), id, &SetAttr { size: Some(40), ..SetAttr::default() }, None).unwrap();
    let on_disk = std::fs::read(fs.store().heap_file_path(id)).unwrap();
    assert_eq!(on_disk.len(), 40);
    assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
}

#[test]
fn namespace_changes_in_heap_directories_are_eperm_and_change_nothing() {
    let (_dir, fs, heap, id) = setup();
    let plain = fs.resolve(&root(), b"/plain", true).unwrap().attr.unwrap().ino;
    let file = fs.resolve(&root(), b"/plain/f", true).unwrap().attr.unwrap().ino;
    let r = root();
    let before: Vec<_> =
        [heap.root, heap.objects_dir, heap.names_dir].iter().map(|&d| entries(&fs, d).unwrap()).collect();
    for dir in [heap.root, heap.objects_dir, heap.names_dir] {
        assert_eq!(errno(fs.create_file(&r, dir, b"new", 0o644, libc::O_RDWR)), libc::EPERM);
        assert_eq!(errno(fs.mkdir(&r, dir, b"sub", 0o755)), libc::EPERM);
        assert_eq!(errno(fs.mknod(&r, dir, b"fifo", libc::S_IFIFO | 0o644, 0)), libc::EPERM);
        assert_eq!(errno(fs.symlink(&r, dir, b"sym", b"/plain/f")), libc::EPERM);
        assert_eq!(errno(fs.link(&r, file, dir, b"linked")), libc::EPERM);
        assert_eq!(errno(fs.rename(&r, plain, b"f", dir, b"moved", RenameFlags::default())), libc::EPERM);
    }
    let err = fs.unlink(&r, heap.names_dir, b"greeting").unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert!(err.to_string().contains("heap"), "{err}");
    assert_eq!(errno(fs.unlink(&r, heap.objects_dir, id.to_string().as_bytes())), libc::EPERM);
    assert_eq!(errno(fs.rmdir(&r, heap.root, b"names")), libc::EPERM);
    assert_eq!(errno(fs.rmdir(&r, fs.root(), b"heap")), libc::EPERM);
    let out = RenameFlags::default();
    assert_eq!(errno(fs.rename(&r, heap.names_dir, b"hi", plain, b"stolen", out)), libc::EPERM);
    assert_eq!(errno(fs.rename(&r, heap.names_dir, b"hi", heap.names_dir, b"renamed", out)), libc::EPERM);
    assert_eq!(errno(fs.rename(&r, fs.root(), b"heap", fs.root(), b"moved", out)), libc::EPERM);
    // A hard link of a heap object, even into an ordinary directory.
    assert_eq!(errno(fs.link(&r, id, plain, b"alias")), libc::EPERM);
    // The batch path refuses the same.
    let batch = [BatchOp::Unlink { parent: heap.names_dir, name: b"hi".to_vec() }];
    assert_eq!(errno(fs.apply_batch(&r, &batch, larder_fs::Durability::Buffered)), libc::EPERM);
    let batch = [BatchOp::Mkdir { parent: heap.objects_dir, name: b"d".to_vec(), mode: 0o755 }];
    assert_eq!(errno(fs.apply_batch(&r, &batch, larder_fs::Durability::Buffered)), libc::EPERM);
    assert_eq!(
        errno(fs.create_batch(&r, heap.names_dir, &[b"x"], 0o644, larder_fs::Durability::Buffered)),
        libc::EPERM
    );

    let after: Vec<_> =
        [heap.root, heap.objects_dir, heap.names_dir].iter().map(|&d| entries(&fs, d).unwrap()).collect();
    assert_eq!(before, after, "nothing changed");
    assert_eq!(fs.getattr(id).unwrap().nlink, 3);
    assert_eq!(entries(&fs, plain).unwrap(), vec![(b"f".to_vec(), Kind::File)]);
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn open_with_o_creat_of_an_existing_heap_name_opens_it() {
    let (_dir, fs, heap, id) = setup();
    let r = root();
    let (attr, fh) = fs.create_file(&r, heap.names_dir, b"greeting", 0o644, libc::O_RDWR).unwrap();
    assert_eq!(attr.ino, id);
    assert_eq!(fs.read(fh, 0, 5).unwrap(), b"hello");
    fs.release(fh).unwrap();
    assert_eq!(
        errno(fs.create_file(&r, heap.names_dir, b"greeting", 0o644, libc::O_RDWR | libc::O_EXCL)),
        libc::EEXIST
    );
    assert_eq!(
        errno(fs.create_file(&r, heap.names_dir, b"greeting", 0o644, libc::O_RDWR | libc::O_TRUNC)),
        libc::EPERM
    );
    assert_eq!(errno(fs.mkdir(&r, heap.names_dir, b"greeting", 0o755)), libc::EEXIST);
    assert_eq!(errno(fs.create_file(&r, heap.names_dir, b"absent", 0o644, libc::O_RDWR)), libc::EPERM);
    assert_eq!(fs.getattr(id).unwrap().size, 12);
}

#[test]
fn heap_objects_never_shrink_but_attributes_change() {
    let (_dir, fs, heap, id) = setup();
    let r = root();
    let err = fs.setattr(&r, id, &SetAttr { size: Some(3), ..SetAttr::default() }, None).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert!(err.to_string().contains("never shrink"), "{err}");
    assert_eq!(errno(fs.open_file(&r, id, libc::O_WRONLY | libc::O_TRUNC)), libc::EPERM);
    assert_eq!(fs.getattr(id).unwrap().size, 12);
    assert_eq!(std::fs::read(fs.store().heap_file_path(id)).unwrap(), b"hello, heap\n");
    let attr = fs.setattr(&r, id, &SetAttr { mode: Some(0o600), uid: Some(7), ..SetAttr::default() }, None).unwrap();
    assert_eq!((attr.perm(), attr.uid), (0o600, 7));
    let attr = fs.setattr(&r, heap.names_dir, &SetAttr { mode: Some(0o700), ..SetAttr::default() }, None).unwrap();
    assert_eq!(attr.perm(), 0o700);
}
