//! The simulation is a pure function of its seed and the calls made: the
//! same seed and workload give the same crash image and the same flipped
//! bit, and different seeds give different images.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use larder_io::sim::{SimFault, SimOp};
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};

/// Files with synced and unsynced data, and unsynced creates and renames.
fn workload(sim: &SimStorage) {
    for i in 0..6u8 {
        let path = PathBuf::from(format!("/db/f{i}"));
        let file = sim.open(&path, OpenOptions::CREATE_NEW).unwrap();
        write_all_at(&*file, &vec![i; 1500], 0).unwrap();
        if i % 2 == 0 {
            file.sync_data().unwrap();
        }
        if i == 2 {
            sim.sync_dir(Path::new("/db")).unwrap();
        }
        write_all_at(&*file, &vec![i + 100; 2000], 700).unwrap();
    }
    sim.rename(Path::new("/db/f0"), Path::new("/db/g0")).unwrap();
}

fn crash_image(seed: u64) -> Vec<(PathBuf, Vec<u8>)> {
    let sim = SimStorage::new(seed);
    workload(&sim);
    let after = sim.crash();
    after.file_names().into_iter().map(|p| (p.clone(), after.read_durable(&p).unwrap())).collect()
}

#[test]
fn same_seed_gives_identical_crash_images() {
    for seed in [0, 1, 42, u64::MAX] {
        assert_eq!(crash_image(seed), crash_image(seed), "seed {seed}");
    }
}

#[test]
fn different_seeds_give_different_images() {
    let images: std::collections::BTreeSet<_> = (0..16).map(crash_image).collect();
    assert!(images.len() > 8, "only {} distinct images from 16 seeds", images.len());
}

#[test]
fn same_seed_flips_the_same_bit() {
    let flipped = |seed: u64| {
        let sim = SimStorage::new(seed);
        let file = sim.open(Path::new("/db/f"), OpenOptions::CREATE_NEW).unwrap();
        write_all_at(&*file, &[0u8; 4096], 0).unwrap();
        sim.fail_nth(SimOp::Read, 1, SimFault::BitFlip);
        let mut buf = vec![0u8; 4096];
        file.read_at(&mut buf, 0).unwrap();
        buf
    };
    assert_eq!(flipped(5), flipped(5));
    assert!((0..8).any(|seed| flipped(seed) != flipped(seed + 8)));
}
