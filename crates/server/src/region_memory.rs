//! The executor's view of a client's data area: bytes copied out of
//! shared memory before anything looks at them, and copied in for reads.

use larder_protocol::message::BufferSlice;
use larder_protocol::region::Region;

use crate::{ClientMemory, Violation};

/// A client's data area, as the executor uses it.
pub(crate) struct RegionMemory<'a> {
    region: &'a Region,
}

impl<'a> RegionMemory<'a> {
    pub(crate) fn new(region: &'a Region) -> RegionMemory<'a> {
        RegionMemory { region }
    }
}

impl ClientMemory for RegionMemory<'_> {
    fn copy_out(&self, slice: BufferSlice) -> Result<Vec<u8>, Violation> {
        self.region.data().copy_out(slice.offset, slice.length).map_err(|e| Violation::new(e.to_string()))
    }

    fn copy_in(&self, slice: BufferSlice, bytes: &[u8]) -> Result<(), Violation> {
        // The whole slice must lie in the area, whatever is written of it.
        crate::slice_range(slice, self.region.data().len())?;
        let bytes = &bytes[..bytes.len().min(slice.length as usize)];
        self.region.data().copy_in(slice.offset, bytes).map_err(|e| Violation::new(e.to_string()))
    }
}
