//! Run-time options of the space manager, with documented defaults.

use crate::error::{Result, SpaceError};
use crate::BLOCK_BYTES;

/// How the space manager sizes containers and punches holes.
///
/// `container_bytes` must be the same every time a directory is opened:
/// container files carry no header (format.md, section 12), so a container
/// of another size is refused at open.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Size of every container file: a power of two, at least 4 KiB and at
    /// most 1 TiB. Default 1 GiB.
    pub container_bytes: u64,
    /// Bytes a new container file starts with, a multiple of 4 KiB of at
    /// most `container_bytes`: the file then grows, zero-filled, as
    /// allocations need it (by an eighth of its size, at least this much
    /// and at most [`GROWTH_MAX_BYTES`]), so a small store keeps small
    /// files and a small file system fills up to its reserve. Equal to
    /// `container_bytes`, containers are made whole at once. Default 4 MiB.
    pub initial_container_bytes: u64,
    /// Bytes of the file system that creating or growing a container
    /// leaves free, for what must still be written when the store is full
    /// (the log, an index flush or merge, the metadata of a delete):
    /// allocations that would need more fail with
    /// [`SpaceError::FileSystemFull`]. The owner may change it while open
    /// ([`crate::SpaceManager::set_reserve_bytes`]). Default 0.
    pub reserve_bytes: u64,
    /// Containers with nothing allocated kept ready, created and zero-filled
    /// ahead of need by [`crate::SpaceManager::ensure_spares`] (and at open),
    /// so an allocation rarely waits for a creation. Default 1.
    pub spare_containers: u64,
    /// Keep spares only once a first container exists (created by the first
    /// allocation that needs it). A store of small, inline objects then
    /// never holds a container, which is as large as it is (1 GiB by
    /// default). Default true.
    pub spares_after_first_use: bool,
    /// Containers created at open, whether or not anything needs them yet:
    /// a store sized ahead of its data, like a preallocated database file,
    /// so its first gigabytes of large writes never wait for (or compete
    /// with) a zero-fill: they are made whole, whatever
    /// `initial_container_bytes` says. Counted towards the spares.
    /// Default 0.
    pub min_containers: u64,
    /// Most containers that may exist; past it allocations fail with
    /// [`SpaceError::NoSpace`]. Default 1024 (1 TiB of 1 GiB containers).
    pub max_containers: u64,
    /// Hole-punching rate: the token bucket refills at this many bytes per
    /// second and holds at most one second's worth (or `punch_min_bytes`,
    /// if larger). 0 disables punching. Default 64 MiB/s: a punch drops
    /// the range's cached pages and frees its blocks, work that competes
    /// with durable commits; at 256 MiB/s, durable 4 KiB puts while a
    /// 1 GiB object was deleted ran at 0.64-0.94x their rate alone (median
    /// 0.74, five runs), at 64 MiB/s 0.77-1.12x (median 1.01). Freed space
    /// is reusable before it is punched; punching only hands it back to
    /// the file system (1 GiB in about 16 s).
    pub punch_bytes_per_sec: u64,
    /// Punch only while free space is more than this share of all container
    /// space: below it, freed space is likely reused soon, and punching it
    /// would only make its next write slower. Default 0.25.
    pub punch_free_threshold: f64,
    /// Smallest range punched, a multiple of 4 KiB: smaller freed ranges
    /// wait until neighbouring frees coalesce with them, so punches stay few
    /// and large. Default 1 MiB.
    pub punch_min_bytes: u64,
    /// Write a container's zeros through a direct (O_DIRECT) descriptor,
    /// where the file system takes one: no copy into the page cache and
    /// no write-back pass. A store written in large pieces gains (a fresh
    /// Garage node's 1 MiB blocks: the fill through the cache was 20% of
    /// its CPU; 1.09x the puts with it). A store written in small pieces
    /// loses by it: its writes then land in pages no fill left cached and
    /// must allocate them (the file-server mix's median 20% lower, four
    /// alternating runs on a busy machine). Default false.
    pub direct_fill: bool,
    /// Allocations of at least this many bytes take space past the filled
    /// part of a growing container when one has room for them in one
    /// piece: the file is extended over them by `fallocate` (unwritten
    /// extents, no zeros written) instead of being zero-filled ahead of
    /// the data. The space is a hole to [`crate::SpaceManager::is_written`],
    /// so the write that fills it takes the path that syncs the container
    /// before its record counts as durable (the sync commits the extents'
    /// conversion, one journal commit). For large writes that costs less
    /// than the zeros (a 1 MiB write wrote 1 MiB of zeros first); for
    /// small ones more, so they keep the zero-filled space. 0 turns it
    /// off. Default 256 KiB.
    pub unwritten_min_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            container_bytes: 1 << 30,
            initial_container_bytes: 4 << 20,
            reserve_bytes: 0,
            spare_containers: 1,
            spares_after_first_use: true,
            min_containers: 0,
            max_containers: 1024,
            punch_bytes_per_sec: 64 << 20,
            punch_free_threshold: 0.25,
            punch_min_bytes: 1 << 20,
            direct_fill: false,
            unwritten_min_bytes: 256 << 10,
        }
    }
}

impl Options {
    /// Refuses inconsistent settings with the option's name and why.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| Err(SpaceError::InvalidOption { name, reason: reason.to_string() });
        if !self.container_bytes.is_power_of_two() || !(BLOCK_BYTES..=(1 << 40)).contains(&self.container_bytes) {
            return bad("container_bytes", "must be a power of two between 4 KiB and 1 TiB");
        }
        if self.initial_container_bytes == 0
            || !self.initial_container_bytes.is_multiple_of(BLOCK_BYTES)
            || self.initial_container_bytes > self.container_bytes
        {
            return bad("initial_container_bytes", "must be a positive multiple of 4096 of at most container_bytes");
        }
        if self.max_containers == 0 || self.max_containers > u64::from(u32::MAX) {
            return bad("max_containers", "must be between 1 and 2^32 - 1");
        }
        if self.max_containers.checked_mul(self.container_bytes).is_none() {
            return bad("max_containers", "max_containers * container_bytes must fit in 64 bits");
        }
        if self.min_containers > self.max_containers {
            return bad("min_containers", "must not exceed max_containers");
        }
        if self.spare_containers > self.max_containers {
            return bad("spare_containers", "must not exceed max_containers");
        }
        if !(0.0..=1.0).contains(&self.punch_free_threshold) {
            return bad("punch_free_threshold", "must be between 0 and 1");
        }
        if self.punch_min_bytes == 0 || !self.punch_min_bytes.is_multiple_of(BLOCK_BYTES) {
            return bad("punch_min_bytes", "must be a positive multiple of 4096");
        }
        Ok(())
    }

    /// 4 KiB blocks per container.
    pub(crate) fn container_blocks(&self) -> u64 {
        self.container_bytes / BLOCK_BYTES
    }

    /// Blocks a container that has `filled` grows by at once: an eighth of
    /// it, at most [`GROWTH_MAX_BYTES`] unless `initial_container_bytes` is
    /// more, at least that (the caller also bounds it by the container and the file system).
    pub(crate) fn growth_blocks(&self, filled: u64) -> u64 {
        (filled / 8).min(GROWTH_MAX_BYTES / BLOCK_BYTES).max(self.initial_container_bytes / BLOCK_BYTES)
    }
}

/// Most bytes a container grows by at once: a store holds at most this
/// much zero-filled space it has not used (and an allocation waits for
/// at most this much zero-filling, about 0.06 s at 1 GiB/s).
pub const GROWTH_MAX_BYTES: u64 = 64 << 20;
