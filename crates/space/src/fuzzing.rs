//! Entry points for future fuzz targets and their stable-toolchain
//! replays: each feeds arbitrary bytes to a decoder or to the rebuild, which
//! must return an error or a value and never panic.

use std::path::Path;
use std::sync::Arc;

use larder_io::{SimStorage, Storage};

use crate::{Extent, Options, SpaceManager, EXTENT_BYTES};

/// Container size used by the fuzz entry points.
const FUZZ_CONTAINER_BYTES: u64 = 64 << 10;

/// Decodes `data` as one encoded extent. Returns whether it was accepted;
/// an accepted extent must re-encode to the same bytes.
pub fn extent(data: &[u8]) -> bool {
    match Extent::decode(data, FUZZ_CONTAINER_BYTES) {
        Ok(e) => {
            assert_eq!(&e.encode()[..], data, "extent did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Reads `data` as a list of 24-byte extents in use (a trailing partial one
/// is ignored) and rebuilds free space from it over two 64 KiB containers
/// (ids 0 and 1).
/// Returns whether the list was accepted; if it was, `verify` must agree
/// and free space must be container space minus the extents.
pub fn rebuild(data: &[u8]) -> bool {
    let options = Options {
        container_bytes: FUZZ_CONTAINER_BYTES,
        initial_container_bytes: FUZZ_CONTAINER_BYTES,
        spare_containers: 2,
        max_containers: 4,
        ..Options::default()
    };
    let sim = SimStorage::new(0);
    let dir = Path::new("/fuzz");
    let used: Vec<Extent> = data
        .chunks_exact(EXTENT_BYTES)
        .map(|c| {
            let mut b = [0u8; EXTENT_BYTES];
            b.copy_from_slice(c);
            // Decode the fields without the checks, so open sees bad ones.
            let f = |i: usize| {
                u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]])
            };
            Extent { container: f(0) % 4, offset: f(8), len: f(16) }
        })
        .collect();
    // Two containers (ids 0 and 1) exist, as after a store used them, so
    // extents in them reach the rebuild; an open does not create them.
    for id in 0..2 {
        if sim.create_dir_all(dir).is_err()
            || crate::container::create(&sim, dir, id, FUZZ_CONTAINER_BYTES, false, crate::container::Pace::Full)
                .is_err()
        {
            return false;
        }
    }
    let Ok(manager) = SpaceManager::open(Arc::new(sim), dir, options, used.iter().copied()) else { return false };
    let report = manager.verify(used.iter().copied());
    let used_bytes: u64 = used.iter().map(|e| e.len).sum();
    let stats = manager.stats();
    assert!(report.is_ok_and(|r| r.is_clean()), "verify disagrees with a fresh rebuild");
    assert_eq!(stats.bytes_free + used_bytes, stats.bytes_total, "free space is not container space minus used");
    true
}
