//! Torn writes tear only at absolute 512-byte sector boundaries and never
//! touch bytes outside the write. A proptest runs random writes and syncs on
//! two files against a model (synced image plus pending writes), crashes
//! with a random seed, and checks every sector of the crash image: it must
//! equal the synced content with some in-order subset of the pending
//! writes' pieces for that sector applied, and nothing else.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};
use proptest::prelude::*;

use common::read_all;

const SECTOR: usize = 512;

#[derive(Clone, Debug)]
enum Op {
    Write { file: usize, offset: usize, len: usize },
    Sync { file: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..3000usize, 1..1400usize).prop_map(|(file, offset, len)| Op::Write { file, offset, len }),
        1 => (0..2usize).prop_map(|file| Op::Sync { file }),
    ]
}

/// Content that differs per write and per position, so a piece landing in
/// the wrong place or coming from the wrong write is caught.
fn pattern(write_no: usize, offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|pos| ((write_no * 131 + pos * 7) % 251) as u8 + 1).collect()
}

#[derive(Default)]
struct Model {
    synced: Vec<u8>,
    pending: Vec<(usize, Vec<u8>)>,
}

fn apply(image: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if image.len() < offset + data.len() {
        image.resize(offset + data.len(), 0);
    }
    image[offset..offset + data.len()].copy_from_slice(data);
}

/// The contents sector `s` may have after a crash: the synced bytes with any
/// in-order subset of the pending writes' pieces inside the sector applied.
fn sector_candidates(model: &Model, s: usize, padded_len: usize) -> Vec<Vec<u8>> {
    let (start, end) = (s * SECTOR, ((s + 1) * SECTOR).min(padded_len));
    let mut base = model.synced.clone();
    base.resize(padded_len, 0);
    let base = base[start..end].to_vec();
    let pieces: Vec<(usize, &[u8])> = model
        .pending
        .iter()
        .filter_map(|(off, data)| {
            let (lo, hi) = ((*off).max(start), (off + data.len()).min(end));
            (lo < hi).then(|| (lo - start, &data[lo - off..hi - off]))
        })
        .collect();
    let mut out = Vec::new();
    for mask in 0u32..(1 << pieces.len()) {
        let mut sector = base.clone();
        for (i, (at, bytes)) in pieces.iter().enumerate() {
            if mask & (1 << i) != 0 {
                sector[*at..*at + bytes.len()].copy_from_slice(bytes);
            }
        }
        out.push(sector);
    }
    out
}

proptest! {
    #[test]
    fn crash_image_is_synced_content_plus_whole_pending_sectors(
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..14),
    ) {
        let sim = SimStorage::new(seed);
        let paths = [PathBuf::from("/db/f0"), PathBuf::from("/db/f1")];
        let files: Vec<_> = paths.iter().map(|p| sim.open(p, OpenOptions::CREATE_NEW).unwrap()).collect();
        sim.sync_dir(Path::new("/db")).unwrap();
        let mut models = [Model::default(), Model::default()];
        for (write_no, op) in ops.iter().enumerate() {
            match *op {
                Op::Write { file, offset, len } => {
                    let data = pattern(write_no, offset, len);
                    write_all_at(&*files[file], &data, offset as u64).unwrap();
                    models[file].pending.push((offset, data));
                }
                Op::Sync { file } => {
                    files[file].sync_data().unwrap();
                    let model = &mut models[file];
                    for (offset, data) in std::mem::take(&mut model.pending) {
                        apply(&mut model.synced, offset, &data);
                    }
                }
            }
        }
        // Before the crash, reads return everything written.
        for (path, model) in paths.iter().zip(&models) {
            let mut live = model.synced.clone();
            for (offset, data) in &model.pending {
                apply(&mut live, *offset, data);
            }
            prop_assert_eq!(read_all(&sim, path), live);
        }

        let after = sim.crash();
        for (path, model) in paths.iter().zip(&models) {
            let image = read_all(&after, path);
            let max_len = model.pending.iter().map(|(o, d)| o + d.len()).fold(model.synced.len(), usize::max);
            prop_assert!(image.len() >= model.synced.len() && image.len() <= max_len,
                "{}: length {} outside [{}, {}]", path.display(), image.len(), model.synced.len(), max_len);
            let mut padded = image.clone();
            padded.resize(max_len, 0);
            for s in 0..max_len.div_ceil(SECTOR) {
                let actual = &padded[s * SECTOR..((s + 1) * SECTOR).min(max_len)];
                let candidates = sector_candidates(model, s, max_len);
                prop_assert!(candidates.iter().any(|c| c.as_slice() == actual),
                    "{} sector {}: content is neither synced nor made of whole pending pieces", path.display(), s);
            }
        }
    }
}

#[test]
fn some_crash_tears_a_multi_sector_write() {
    // The property above allows tears; make sure they actually happen, or it
    // would pass on a simulator that never tears.
    let mut torn = 0;
    for seed in 0..200 {
        let sim = SimStorage::new(seed);
        let path = Path::new("/db/f");
        let file = sim.open(path, OpenOptions::CREATE_NEW).unwrap();
        sim.sync_dir(Path::new("/db")).unwrap();
        write_all_at(&*file, &[1u8; 4 * SECTOR], 0).unwrap();
        file.sync_data().unwrap();
        write_all_at(&*file, &[2u8; 4 * SECTOR], 0).unwrap();
        let image = read_all(&sim.crash(), path);
        assert_eq!(image.len(), 4 * SECTOR);
        for sector in image.chunks(SECTOR) {
            assert!(sector.iter().all(|b| *b == sector[0]), "seed {seed}: a sector is mixed");
        }
        if image.chunks(SECTOR).any(|s| s[0] == 1) && image.chunks(SECTOR).any(|s| s[0] == 2) {
            torn += 1;
        }
    }
    assert!(torn > 0, "no crash out of 200 tore the write");
}
