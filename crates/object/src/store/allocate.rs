//! Data space for writes. Space freed by a delete is reused only once the
//! index covers the delete (a checkpoint), so a store whose containers are
//! full would refuse writes after a delete until the checkpointer's next
//! round for space (at most one a second, and only once a quarter of a
//! container waits; a store without the thread, never). An allocation
//! that finds no room while frees wait takes that checkpoint itself and
//! tries once more.

use larder_space::Extent;

use super::checkpoint::checkpoint_once;
use super::Store;
use crate::error::Result;

impl Store {
    /// `len` bytes of fresh space (see [`larder_space::SpaceManager::allocate`]),
    /// after a checkpoint that releases waiting frees if there was no room
    /// without them.
    pub(crate) fn allocate_space(&self, len: u64) -> Result<Vec<Extent>> {
        match self.space.allocate(len) {
            Err(e) if e.is_no_space() && self.space.stats().bytes_pending_free > 0 => {
                if !self.release_waiting_frees() {
                    return Err(e.into());
                }
                Ok(self.space.allocate(len)?)
            }
            allocated => Ok(allocated?),
        }
    }

    /// Makes the log durable and checkpoints, which releases every free
    /// no reader still needs; false if the checkpoint failed (a failure
    /// not worth a retry poisons the store, as after a commit).
    fn release_waiting_frees(&self) -> bool {
        let done = self
            .log
            .sync()
            .map_err(crate::error::CheckpointError::Log)
            .and_then(|()| checkpoint_once(&self.index, &self.log, &self.space, true));
        match done {
            Ok(()) => true,
            Err(e) => {
                self.checkpoint_failed(&e, "the checkpoint to reuse freed space", "the write gets no space");
                false
            }
        }
    }
}
