//! A create allocates little: the allocations one `create_file` of a new
//! name makes on the calling thread, counted by this binary's allocator,
//! stay at what its path needs (the transaction's batch, pending writes and
//! lock requests, the onodes' encodings, the log record, the memtable's
//! nodes, the values the metadata cache keeps). A create through a FUSE
//! mount runs with the caches cold after the kernel's work between two
//! requests, and each call into malloc there cost more than natively: a
//! third of the create handler's time was allocation, so a change that adds
//! allocations to this path should show here.
#![allow(clippy::unwrap_used)]

mod common;

#[global_allocator]
static ALLOCATOR: larder_testkit::CountingAllocator = larder_testkit::CountingAllocator;

/// Most allocations the median create of a new empty file may make: 22
/// when this test was written (37 before its batch was given room up front
/// and keys and copies were built in place).
const MOST: u64 = 24;

#[test]
fn a_create_of_a_new_file_allocates_at_most_a_few_dozen_times() {
    let (_dir, fs) = common::fresh();
    let cred = common::root();
    let d = fs.mkdir(&cred, fs.root(), b"d", 0o755).unwrap().ino;
    let names: Vec<Vec<u8>> = (0..2_000).map(|i| format!("file{i:06}").into_bytes()).collect();
    let mut per_create = Vec::with_capacity(names.len());
    for name in &names {
        // The absent name looked up first, as the kernel does.
        assert!(fs.lookup(&cred, d, name).is_err());
        let before = larder_testkit::allocation_calls();
        let (_, fh) = fs.create_file(&cred, d, name, 0o644, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL).unwrap();
        per_create.push(larder_testkit::allocation_calls() - before);
        fs.release(fh).unwrap();
    }
    let median = larder_testkit::median(per_create);
    assert!(median <= MOST, "a create allocated {median} times (median of {}), at most {MOST} expected", names.len());
    // Every file is there, with its name.
    assert_eq!(fs.lookup(&cred, d, &names[1_234]).unwrap().kind, larder_fs::Kind::File);
}
