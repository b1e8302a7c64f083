//! Helpers shared by the io tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

/// The whole content of `path`, as reads see it now.
pub fn read_all(storage: &dyn Storage, path: &Path) -> Vec<u8> {
    let file = storage.open(path, OpenOptions::READ).unwrap();
    let mut buf = vec![0u8; file.len().unwrap() as usize];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    buf
}

/// Creates `path` holding `data`, synced, and syncs its directory.
pub fn durable_file(storage: &dyn Storage, path: &Path, data: &[u8]) {
    let file = storage.open(path, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*file, data, 0).unwrap();
    file.sync_data().unwrap();
    storage.sync_dir(path.parent().unwrap()).unwrap();
}
