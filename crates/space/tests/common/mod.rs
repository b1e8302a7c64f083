//! Shared helpers for the space tests: small options and opening on the
//! simulated storage.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use larder_io::SimStorage;
use larder_space::{Extent, Options, Result, SpaceManager};

/// Where the tests keep containers.
pub const DIR: &str = "/data/space";
/// 1 MiB containers: 256 blocks.
pub const CONTAINER: u64 = 1 << 20;
/// Blocks per test container.
pub const BLOCKS: u64 = CONTAINER / 4096;

/// Small containers, punching of any coalesced range at an unlimited rate.
pub fn small_options() -> Options {
    Options {
        container_bytes: CONTAINER,
        initial_container_bytes: CONTAINER,
        reserve_bytes: 0,
        spare_containers: 1,
        // The space tests expect a spare from the first open.
        spares_after_first_use: false,
        min_containers: 0,
        max_containers: 4,
        punch_bytes_per_sec: u64::MAX / 2,
        punch_free_threshold: 0.25,
        punch_min_bytes: 4096,
        direct_fill: false,
        unwritten_min_bytes: 0,
    }
}

/// Opens the test directory of `sim` with `used` in use.
pub fn open(sim: &SimStorage, options: Options, used: &[Extent]) -> Result<SpaceManager> {
    SpaceManager::open(Arc::new(sim.clone()), Path::new(DIR), options, used.iter().copied())
}

/// The path of container `id`.
pub fn container_path(id: u64) -> std::path::PathBuf {
    Path::new(DIR).join(larder_space::container_file_name(id))
}

/// `(container, block)` for every block of `e`.
pub fn blocks(e: &Extent) -> impl Iterator<Item = (u64, u64)> {
    let c = e.container;
    (e.offset / 4096..e.end() / 4096).map(move |b| (c, b))
}

/// An extent of whole blocks.
pub fn ext(container: u64, block: u64, blocks: u64) -> Extent {
    Extent { container, offset: block * 4096, len: blocks * 4096 }
}
