//! Computing the disk image a crash leaves behind.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::Rng;

use super::state::{sector_pieces, write_into, FileData, FileId, FileOp, State};

/// How a crash treats operations that were not yet synced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// Each pending file operation is kept or dropped at random, a kept
    /// write may be torn at sector boundaries, and each directory keeps a
    /// random prefix of its pending namespace operations (any subset of
    /// them after [`SimStorage::set_unordered_dir_ops`]).
    ///
    /// [`SimStorage::set_unordered_dir_ops`]: super::SimStorage::set_unordered_dir_ops
    #[default]
    Random,
    /// Only synced state survives: every pending operation is lost.
    DropAllPending,
    /// Every pending operation reaches the disk whole, as after a clean
    /// shutdown without the final syncs.
    KeepAllPending,
}

/// Applies a pending op to a crash image, deciding from `rng` (in `Random`
/// mode) whether it is kept, dropped or torn.
fn apply_pending(op: &FileOp, image: &mut Vec<u8>, mode: CrashMode, rng: &mut StdRng) {
    match mode {
        CrashMode::DropAllPending => {}
        CrashMode::KeepAllPending => op.apply(image),
        CrashMode::Random => {
            if !rng.gen_bool(0.5) {
                return;
            }
            match op {
                FileOp::Write { offset, data } if rng.gen_bool(0.5) => {
                    // Torn: each sector-sized piece reaches the media or not,
                    // on its own; bytes outside the write are never touched.
                    for (start, end) in sector_pieces(*offset, data.len() as u64) {
                        if rng.gen_bool(0.5) {
                            let from = (start - offset) as usize;
                            let to = (end - offset) as usize;
                            write_into(image, start, &data[from..to]);
                        }
                    }
                }
                _ => op.apply(image),
            }
        }
    }
}

/// Builds the state of the machine after rebooting from a crash of
/// `state`, and marks `state` itself crashed. The new machine continues
/// `state`'s random stream; it has no pending work, locks, faults or
/// crash points, and zeroed counters.
pub(super) fn crash(state: &mut State, mode: CrashMode) -> State {
    state.crashed = true;
    let mut names = state.durable.clone();
    for ops in state.dir_pending.values() {
        match mode {
            CrashMode::Random if state.unordered_dir_ops => {
                // Each op on its own, in order: a later rename may reach the
                // disk while the create before it does not.
                for op in ops {
                    if state.rng.gen_bool(0.5) {
                        names.apply(op);
                    }
                }
            }
            CrashMode::Random => {
                let keep = state.rng.gen_range(0..=ops.len());
                ops[..keep].iter().for_each(|op| names.apply(op));
            }
            CrashMode::DropAllPending => {}
            CrashMode::KeepAllPending => ops.iter().for_each(|op| names.apply(op)),
        }
    }
    names.prune();

    let survivors: BTreeSet<FileId> = names.files.values().copied().collect();
    let mut next = State::new(state.rng.clone());
    for id in survivors {
        let Some(file) = state.files.get(&id) else { continue };
        let mut image = file.durable.clone();
        // Written-back writes are older than the pending ops they overlap.
        for op in file.written_back.iter().chain(&file.pending) {
            apply_pending(op, &mut image, mode, &mut next.rng);
        }
        // Whatever the crash kept, a range an unsynced op touched other
        // than by a plain overwrite (written-back ops are all overwrites)
        // may be on no written block.
        let holes = file.unwritten(image.len() as u64);
        next.files.insert(id, FileData::settled(image, holes));
    }
    // Keep the old machine's stream moving too, so a second crash of the
    // same pre-crash state draws a different image.
    state.rng = next.rng.clone();
    next.next_id = state.next_id;
    next.unordered_dir_ops = state.unordered_dir_ops;
    next.live = names.clone();
    next.durable = names;
    tracing::debug!(?mode, files = next.files.len(), "simulated crash");
    next
}
