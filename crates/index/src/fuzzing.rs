//! Entry points for the fuzz targets and their stable-toolchain replays:
//! each feeds arbitrary bytes to one on-disk decoder, which must return an
//! error or a value and never panic.

use std::path::Path;
use std::sync::Arc;

use larder_io::{OpenOptions, SimStorage, Storage};

use crate::manifest::ManifestState;
use crate::merge::Registry;
use crate::run::block::Block;
use crate::run::reader::OpenRun;
use crate::run::RunMeta;

/// Decodes `data` as a manifest. Returns whether it was accepted.
pub fn manifest(data: &[u8]) -> bool {
    match ManifestState::decode(data, Path::new("fuzz/MANIFEST")) {
        Ok(state) => {
            // Pair the decode with an encode: what was accepted re-encodes
            // to a manifest that decodes to the same state.
            let encoded = state.encode().ok();
            let again = encoded.and_then(|b| ManifestState::decode(&b, Path::new("fuzz/MANIFEST")).ok());
            assert_eq!(again.as_ref(), Some(&state), "manifest did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// [`manifest`] on `data` with its body length (bytes 12..16) and trailing
/// crc32c recomputed first, so mutations get past the checksum to the
/// field checks (libFuzzer rarely guesses a crc32c).
pub fn manifest_crc_fixed(data: &[u8]) -> bool {
    let mut m = data.to_vec();
    if m.len() >= 20 {
        let body = (m.len() - 20) as u32;
        m[12..16].copy_from_slice(&body.to_le_bytes());
        let at = m.len() - 4;
        let c = crate::codec::crc(&m[..at]);
        m[at..].copy_from_slice(&c.to_le_bytes());
    }
    manifest(&m)
}

/// [`data_block`] on `data` with its trailing crc32c recomputed first, so
/// mutations get past the checksum to the offset table and entries.
pub fn data_block_crc_fixed(data: &[u8]) -> bool {
    let mut b = data.to_vec();
    if b.len() >= 4 {
        let at = b.len() - 4;
        let c = crate::codec::crc(&b[..at]);
        b[at..].copy_from_slice(&c.to_le_bytes());
    }
    data_block(&b)
}

/// Decodes `data` as a data block. Returns whether it was accepted.
pub fn data_block(data: &[u8]) -> bool {
    match Block::decode(data.to_vec()) {
        Ok(b) => {
            // Accessors must stay in bounds even on unverified entries.
            for i in 0..b.len() {
                let e = b.entry(i);
                let _ = b.seek(e.key, e.stamp);
            }
            b.verify_entries(2).is_ok()
        }
        Err(_) => false,
    }
}

/// Opens `data` as a whole run file (footer, meta, filter, index,
/// tombstones), taking the manifest's facts from the file's own meta block
/// when it parses, then reads every block. Returns whether it was accepted.
pub fn run_file(data: &[u8]) -> bool {
    let sim = SimStorage::new(0);
    let path = Path::new("/fuzz/0000000000000001.run");
    let open = || -> crate::Result<()> {
        sim.create_dir_all(Path::new("/fuzz"))?;
        let f = sim.open(path, OpenOptions::CREATE_NEW)?;
        larder_io::write_all_at(&*f, data, 0)?;
        Ok(())
    };
    if open().is_err() {
        return false;
    }
    let registry = match Registry::new(vec![Arc::new(crate::CounterOperator)]) {
        Ok(r) => r,
        Err(_) => return false,
    };
    let Some(meta) = crate::run::reader::peek_meta(&sim, path, data.len() as u64) else { return false };
    let meta = RunMeta { id: 1, ..meta };
    match OpenRun::open(&sim, path, &meta, &registry, (true, true)) {
        Ok(run) => {
            // Read around the cache, so every entry is verified too.
            let stats = crate::stats::Stats::default();
            (0..run.index.len()).all(|i| run.block(i, None, &stats).is_ok())
        }
        Err(_) => false,
    }
}
