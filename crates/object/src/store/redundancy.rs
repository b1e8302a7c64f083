//! The store's redundant copies, for fsck: what each superblock slot holds
//! now, and rewriting those that do not hold the current copy.

use crate::error::Result;
use crate::superblock::{self, Copies, SlotState};
use crate::Store;

impl Store {
    /// What each slot of the superblock holds, read from disk now (damage
    /// since open included).
    pub fn superblock_copies(&self) -> Result<Copies> {
        superblock::inspect(&*self.storage, &self.dir)
    }

    /// Rewrites every superblock slot that does not hold the current copy
    /// (damaged, stale or empty) with it, each synced; safe against a
    /// crash at any point since the store's lock is held and the slot
    /// written is never the only valid one. If both slots were damaged
    /// since open, both are rewritten from the copy the store opened with.
    /// Returns the slots rewritten and what they held.
    pub fn repair_superblock_copies(&self) -> Result<Vec<(usize, SlotState)>> {
        superblock::repair(&*self.storage, &self.dir, self.superblock())
    }
}
