//! Counters the space manager keeps, for the CLI, benchmarks and tests.

/// A copy of the space counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpaceStats {
    /// Container files in use.
    pub containers: u64,
    /// Containers with nothing allocated or pending (ready spares).
    pub spare_containers: u64,
    /// Bytes of all container files (as far as they are filled).
    pub bytes_total: u64,
    /// Bytes free and reusable now (punched ones included).
    pub bytes_free: u64,
    /// Bytes in extents handed out and not freed.
    pub bytes_allocated: u64,
    /// Bytes freed whose release waits for durability or older readers.
    pub bytes_pending_free: u64,
    /// Free bytes that are punched holes now.
    pub bytes_punched_now: u64,
    /// Frees waiting for release.
    pub deferred_frees_pending: u64,
    /// Readers registered now.
    pub readers: u64,
    /// Successful `allocate` calls.
    pub allocations: u64,
    /// Extents those calls returned (more than `allocations` when free
    /// space was fragmented or a request exceeded a container).
    pub extents_allocated: u64,
    /// Successful `free` calls.
    pub frees: u64,
    /// Frees released (space made reusable).
    pub frees_released: u64,
    /// Successful `punch_hole` calls.
    pub punches: u64,
    /// Bytes punched since open.
    pub bytes_punched: u64,
    /// Containers created since open.
    pub containers_created: u64,
    /// Of those, containers an allocation had to create itself because no
    /// spare was ready (it waited for the zero-fill).
    pub containers_created_inline: u64,
    /// Times a container file grew.
    pub container_growths: u64,
    /// Growths an allocation waited for.
    pub container_growths_inline: u64,
    /// Large allocations that took space past a growing container's
    /// filled part, unwritten (`Options::unwritten_min_bytes`), instead
    /// of zero-filled space.
    pub unfilled_allocations: u64,
}

/// Counters kept under the manager's lock.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub allocations: u64,
    pub extents_allocated: u64,
    pub frees: u64,
    pub frees_released: u64,
    pub punches: u64,
    pub bytes_punched: u64,
    pub containers_created: u64,
    pub containers_created_inline: u64,
    pub container_growths: u64,
    pub container_growths_inline: u64,
    pub unfilled_allocations: u64,
}
