//! `larder init` sizes: container and log-segment sizes given as options
//! (human sizes like 64M) land in the superblock; bad ones are refused
//! with the option's name and create nothing; without options the log
//! segment is fitted to the file system.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::larder;
use larder_io::RealStorage;
use larder_object::superblock;

fn creation(store: &Path) -> larder_object::CreationOptions {
    superblock::load(&RealStorage::new(), store).unwrap().superblock.options
}

#[test]
fn init_takes_sizes_and_refuses_bad_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let s = store.to_str().unwrap();
    let out = larder(&["init", s, "--container-size", "64M", "--log-segment-size", "1MiB"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o = creation(&store);
    assert_eq!((o.container_bytes, o.log_segment_bytes), (64 << 20, 1 << 20));
    for (args, needle) in [
        (["--container-size", "3M"], "container_bytes"),
        (["--container-size", "12X"], "unknown unit"),
        (["--log-segment-size", "1000"], "log_segment_bytes"),
    ] {
        let other = tmp.path().join("bad");
        let mut all = vec!["init", other.to_str().unwrap()];
        all.extend(args);
        let out = larder(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(needle), "{args:?}: {err}");
        assert!(!other.join(superblock::SUPERBLOCK_FILE).exists(), "{args:?}: a refused init made a store");
    }
}

#[test]
fn init_fits_the_log_segment_to_the_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let available = larder_io::Storage::available_bytes(&RealStorage::new(), tmp.path()).unwrap();
    let out = larder(&["init", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o = creation(&store);
    assert_eq!(o.log_segment_bytes, larder_object::CreationOptions::fitted_to(available).log_segment_bytes);
    assert!((4 << 20..=64 << 20).contains(&o.log_segment_bytes), "{o:?}");
}

#[test]
fn fitted_sizes_follow_the_free_space() {
    use larder_object::CreationOptions;
    assert_eq!(CreationOptions::fitted_to(223 << 20).log_segment_bytes, 4 << 20, "a 256 MiB file system");
    assert_eq!(CreationOptions::fitted_to(1 << 30).log_segment_bytes, 16 << 20);
    assert_eq!(CreationOptions::fitted_to(1 << 40).log_segment_bytes, 64 << 20);
    assert_eq!(CreationOptions::fitted_to(0).log_segment_bytes, 4 << 20);
    CreationOptions::fitted_to(u64::MAX).validate().unwrap();
}
