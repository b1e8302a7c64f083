//! The store's redundant copies: a superblock slot that does not hold the
//! current copy is a problem of its own (the store still opens, on the
//! other slot), and [`repair`] rewrites it.

use std::fmt;
use std::path::PathBuf;

use larder_object::superblock::{slot_offset, SlotState};
use larder_object::{ObjectError, Store};

use crate::error::{FsckError, Result};
use crate::model::Problems;
use crate::problem::Problem;

/// What a slot not holding the current copy holds, for a person.
fn describe(state: &SlotState) -> String {
    match state {
        SlotState::Current => "holds the current copy".into(),
        SlotState::Stale { generation } => format!("holds an older generation ({generation})"),
        SlotState::Empty => "is zeros (a store created before both copies were written)".into(),
        SlotState::Damaged { what } => format!("is damaged: {what}"),
    }
}

/// Reports every superblock slot that does not hold the current copy.
pub(crate) fn check(store: &Store, problems: &mut Problems) -> Result<()> {
    let copies = match store.superblock_copies() {
        Ok(copies) => copies,
        // Both slots damaged since open: the next open would fail, and
        // repair rewrites both from the copy this store opened with.
        Err(ObjectError::Corrupt { path, what, .. }) => {
            for slot in 0..2 {
                let what = format!("is damaged, and so is the other copy ({what})");
                problems.push(Problem::SuperblockCopy { path: path.clone(), slot, offset: slot_offset(slot), what });
            }
            return Ok(());
        }
        Err(e) => return Err(FsckError::Superblock(e)),
    };
    for (slot, state) in copies.slots.iter().enumerate() {
        if !state.is_current() {
            problems.push(Problem::SuperblockCopy {
                path: copies.path.clone(),
                slot,
                offset: slot_offset(slot),
                what: describe(state),
            });
        }
    }
    Ok(())
}

/// One redundant copy rewritten by [`repair`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repaired {
    /// The file rewritten.
    pub path: PathBuf,
    /// Which copy (0 for superblock slot A, 1 for B).
    pub slot: usize,
    /// What it held before.
    pub was: String,
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: rewrote superblock copy {} (offset {}), which {}",
            self.path.display(),
            if self.slot == 0 { "A" } else { "B" },
            slot_offset(self.slot),
            self.was
        )
    }
}

/// Rewrites every redundant copy that does not hold the current contents
/// (today: the superblock's slots), each synced before the next. Returns
/// what was rewritten; empty when every copy was sound.
pub fn repair(store: &Store) -> Result<Vec<Repaired>> {
    let path = store.dir().join(larder_object::superblock::SUPERBLOCK_FILE);
    let rewritten = store.repair_superblock_copies().map_err(FsckError::Superblock)?;
    Ok(rewritten
        .into_iter()
        .map(|(slot, state)| Repaired { path: path.clone(), slot, was: describe(&state) })
        .collect())
}
