//! A full file system through the fs library, on the simulated storage
//! with a byte capacity: names and small files fill it up to the store's
//! reserve and are then refused with ENOSPC, while unlink and rmdir still
//! succeed; fsck is clean.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_io::{SimStorage, Storage};
use larder_object::CreationOptions;

const CAPACITY: u64 = 16 << 20;

fn options() -> FsOptions {
    let mut o = common::sim_options();
    o.creation = CreationOptions { container_bytes: 4 << 20, log_segment_bytes: 256 << 10, ..o.creation };
    o.store.space.initial_container_bytes = 256 << 10;
    o.store.log.max_pending_bytes = 1 << 20;
    o
}

#[test]
fn names_and_small_files_stop_at_the_reserve_and_deletes_still_work() {
    let sim = SimStorage::new(7);
    sim.set_capacity(CAPACITY);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = Path::new("/store");
    let fs = Fs::create_with(storage.clone(), dir, options()).unwrap();
    let r = common::root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap().ino;
    // Small files (inline in the log and index) until the reserve refuses.
    let body = vec![5u8; 3000];
    let mut made = Vec::new();
    let refused = loop {
        let name = format!("f{:06}", made.len());
        match fs.create_file(&r, d, name.as_bytes(), 0o644, libc::O_RDWR) {
            Ok((attr, fh)) => {
                let written = fs.write(&r, fh, 0, &body);
                fs.release(fh).unwrap();
                match written {
                    Ok(_) => made.push((name, attr.ino)),
                    Err(e) => break e,
                }
            }
            Err(e) => break e,
        }
        // Checkpoints keep the log from filling; the index grows.
        if made.len() % 256 == 0 {
            fs.store().checkpoint().unwrap();
        }
        assert!(made.len() < 100_000, "the capacity never ran out");
    };
    assert_eq!(refused.errno(), libc::ENOSPC, "{refused}");
    assert!(made.len() > 100, "only {} files fit in {CAPACITY} bytes", made.len());
    // Names alone may use half of the reserve's metadata allowance (a
    // new file's data can still fit in its containers), then they are
    // refused too, leaving nothing half-made behind.
    let mut dirs = 0;
    let refused = loop {
        match fs.mkdir(&r, d, format!("sub{dirs:06}").as_bytes(), 0o755) {
            Ok(_) => dirs += 1,
            Err(e) => break e,
        }
        if dirs % 256 == 0 {
            fs.store().checkpoint().unwrap();
        }
        assert!(dirs < 100_000, "names were never refused");
    };
    assert_eq!(refused.errno(), libc::ENOSPC, "{refused}");
    assert_eq!(common::errno(fs.lookup(&r, d, format!("sub{dirs:06}").as_bytes())), libc::ENOENT);
    assert_eq!(common::errno(fs.symlink(&r, d, b"ln", b"target")), libc::ENOSPC);
    // statfs shows the reserve out of what callers may use.
    let st = fs.statfs().unwrap();
    assert!(st.blocks_available < st.blocks_free, "{st:?}");
    // Deletes go on at the reserve (their tombstones and log records use
    // it): every file, then the directory.
    let (gone, kept) = made.split_at(made.len() / 2);
    for (name, _) in gone {
        fs.unlink(&r, d, name.as_bytes()).unwrap();
    }
    fs.store().checkpoint().unwrap();
    for (name, ino) in kept {
        let fh = fs.open_file(&r, *ino, libc::O_RDONLY).unwrap();
        assert_eq!(fs.read(fh, 0, body.len()).unwrap(), body, "{name}");
        fs.release(fh).unwrap();
        fs.unlink(&r, d, name.as_bytes()).unwrap();
    }
    // The file whose write was refused exists, empty.
    let last = format!("f{:06}", made.len());
    if let Ok(a) = fs.lookup(&r, d, last.as_bytes()) {
        assert_eq!(a.size, 0, "a refused write left bytes");
        fs.unlink(&r, d, last.as_bytes()).unwrap();
    }
    for i in 0..dirs {
        fs.rmdir(&r, d, format!("sub{i:06}").as_bytes()).unwrap();
    }
    fs.rmdir(&r, fs.root(), b"d").unwrap();
    fs.close().unwrap();
    let fs = Fs::open_with(storage, dir, options()).unwrap();
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
}
