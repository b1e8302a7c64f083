//! The heap's limits, named.

/// Largest object, in bytes: the object layer's (2^63 - 1, fits `off_t`).
pub const MAX_OBJECT_BYTES: u64 = larder_object::meta::MAX_OBJECT_BYTES;
/// Largest alignment `alloc_in` serves: a page (spans are page-aligned).
pub const MAX_ALIGN: u64 = 4096;
/// Most pointer fields a type may list.
pub const MAX_TYPE_POINTERS: usize = larder_object::meta::MAX_TYPE_POINTERS;
/// Bytes of a persistent pointer in an object.
pub const POINTER_BYTES: u64 = larder_object::meta::POINTER_BYTES;
/// Longest name (`add_name`), in bytes; names are 1-255 bytes without NUL
/// or `/`, not `.` or `..` (the object layer's file name rules).
pub const MAX_NAME_BYTES: usize = larder_object::meta::MAX_NAME_BYTES;
/// Smallest address range reserved per attached object, so it grows in
/// place: an object is mapped in `max(2 x size, MIN_RESERVE_BYTES)`.
pub const MIN_RESERVE_BYTES: u64 = 1 << 30;
/// Most closed objects whose mapping a heap keeps (per heap, in each
/// process), so that attaching one again costs one `stat` of its file
/// instead of an open, an mmap, page faults and the munmap of its
/// reservation at the next close (docs/heap.md, "Closed mappings"). Each
/// is one of the process's `vm.max_map_count` mappings.
pub const CLOSED_MAPPINGS: usize = 64;
/// Most bytes of file the kept mappings of closed objects expose together
/// (per heap): what their page tables and the pages they keep mapped can
/// cost. An object longer than this is unmapped when closed.
pub const CLOSED_MAPPING_BYTES: u64 = 64 << 20;
/// Most objects one `clone` copies (its transaction holds them all).
pub const MAX_CLONE_OBJECTS: usize = 1 << 16;
/// Smallest `write_at` that goes to the object's file (pwrite) rather than
/// through its mapping, when the mapping is real: 256 KiB, where the page
/// faults it saves outweigh opening the file.
pub const FILE_WRITE_BYTES: usize = 256 * 1024;
/// Most files of freed objects a heap keeps for its next allocations and
/// copies to reuse (renamed) instead of creating files: a create
/// allocates an inode, which on ext4 without a journal walks every inode
/// of its group freed in the last minutes (docs/heap.md, "Recycled
/// files"). Frees become spares in batches, at the log's group commits,
/// and a loop of small copies and frees runs more than 128 between two.
pub const SPARE_FILES: usize = 512;
/// Most spare files a heap keeps mapped, so that the object taking one
/// only sizes it (each mapping reserves `MIN_RESERVE_BYTES` of address
/// space, which many heaps in one process share); the others are mapped
/// when taken, and keep no bytes.
pub const SPARE_MAPPINGS: usize = 128;
/// Frees waiting for the log's next group commit (which makes them
/// durable and their files spares) past which, with fewer than half of
/// [`SPARE_MAPPINGS`] mapped spares left, a `free` asks the log to sync now
/// rather than at the end of its interval (10 ms): a loop of small copies
/// and frees otherwise ran out of mapped spares between two group commits,
/// and a tenth of its copies made a file (70 µs instead of 15).
pub const SPARE_SYNC_SOON_FREES: usize = 32;
/// Longest freed object's file a spare keeps whole (not emptied), so that
/// a copy of an object no longer than it overwrites pages and blocks
/// already there instead of allocating them (docs/heap.md, "Recycled
/// files"): a new small file's first write cost most of a copy.
pub const SPARE_KEPT_FILE_BYTES: u64 = 256 * 1024;
/// Most bytes the spares of a heap keep together (in each process): disk
/// space a freed object does not give back until its spare is used, or
/// removed when the heap closes.
pub const SPARE_KEPT_BYTES: u64 = 8 << 20;
/// Most mappings whose file's descriptor a heap keeps open between syncs
/// (per heap and process): a one-flush sync writes an object's pages back
/// through it (sync_file_range), and opening the file per sync cost about
/// 3% of a durable allocation (2026-11-27). Only the owning process keeps
/// them; a client of a server holds none.
pub const SYNC_DESCRIPTORS: usize = 16;
