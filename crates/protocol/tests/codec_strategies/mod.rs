//! Strategies for every request and response, shared by the codec's tests
//! (a module of each test crate, not a test of its own).
//!
//! `Sizes` chooses how long byte strings and lists get: `Small` keeps
//! every message short (for tests that try each truncation or bit flip),
//! `Limits` reaches each field's limit exactly, `Beyond` goes one past it
//! and adds out-of-range timestamps, so a test sees both sides of every
//! rule.
#![allow(dead_code)]

use larder_protocol::codec::{
    MAX_BATCH_OPERATIONS, MAX_DATA_BYTES, MAX_LIST_ENTRIES, MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_TEXT_BYTES,
};
use larder_protocol::message::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

/// How large generated fields get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// A few bytes and elements.
    Small,
    /// Also exactly at each limit.
    Limits,
    /// Also one past each limit, and invalid values.
    Beyond,
}

/// A byte string for a field with limit `limit`.
pub fn bytes(limit: usize, sizes: Sizes) -> BoxedStrategy<Vec<u8>> {
    let short = vec(any::<u8>(), 0..=6).boxed();
    match sizes {
        Sizes::Small => short,
        Sizes::Limits => prop_oneof![
            6 => short,
            1 => Just(Vec::new()),
            1 => any::<u8>().prop_map(move |b| vec![b; limit]),
        ]
        .boxed(),
        Sizes::Beyond => prop_oneof![
            6 => short,
            1 => any::<u8>().prop_map(move |b| vec![b; limit]),
            1 => any::<u8>().prop_map(move |b| vec![b; limit + 1]),
        ]
        .boxed(),
    }
}

/// Text for a field with limit `limit` (ASCII and multi-byte characters).
pub fn text(limit: usize, sizes: Sizes) -> BoxedStrategy<String> {
    let short = "[a-zé€ 0-9]{0,6}".boxed();
    match sizes {
        Sizes::Small => short,
        Sizes::Limits => prop_oneof![6 => short, 1 => Just("x".repeat(limit))].boxed(),
        Sizes::Beyond => {
            prop_oneof![6 => short, 1 => Just("x".repeat(limit)), 1 => Just("x".repeat(limit + 1))].boxed()
        }
    }
}

/// A list of `element`s: a few, or (with `Limits` and `Beyond`) exactly
/// `MAX_LIST_ENTRIES` of `filler`, or one more with `Beyond`.
pub fn list<T: Clone + std::fmt::Debug + 'static>(
    element: BoxedStrategy<T>,
    filler: T,
    sizes: Sizes,
) -> BoxedStrategy<Vec<T>> {
    list_up_to(element, filler, MAX_LIST_ENTRIES, sizes)
}

/// As [`list`], for a list whose limit is `limit`.
pub fn list_up_to<T: Clone + std::fmt::Debug + 'static>(
    element: BoxedStrategy<T>,
    filler: T,
    limit: usize,
    sizes: Sizes,
) -> BoxedStrategy<Vec<T>> {
    let few = vec(element, 0..4).boxed();
    match sizes {
        Sizes::Small => few,
        Sizes::Limits => prop_oneof![8 => few, 1 => Just(vec![filler; limit])].boxed(),
        Sizes::Beyond => prop_oneof![
            8 => few,
            1 => Just(vec![filler.clone(); limit]),
            1 => Just(vec![filler; limit + 1]),
        ]
        .boxed(),
    }
}

/// An operation a metadata batch may hold; with `Beyond`, sometimes one
/// it may not (a `Sync`), which the decoder refuses.
pub fn metadata_operation(sizes: Sizes) -> BoxedStrategy<Request> {
    let s = sizes;
    let allowed = prop_oneof![
        (any::<u64>(), name(s), any::<u32>(), any::<u64>()).prop_map(|(parent, name, mode, rdev)| Request::Mknod {
            parent,
            name,
            mode,
            rdev
        }),
        (any::<u64>(), name(s), any::<u32>()).prop_map(|(parent, name, mode)| Request::Mkdir { parent, name, mode }),
        (any::<u64>(), name(s), path(s)).prop_map(|(parent, name, target)| Request::Symlink { parent, name, target }),
        (any::<u64>(), any::<u64>(), name(s)).prop_map(|(ino, parent, name)| Request::Link { ino, parent, name }),
        (any::<u64>(), name(s)).prop_map(|(parent, name)| Request::Unlink { parent, name }),
        (any::<u64>(), name(s)).prop_map(|(parent, name)| Request::Rmdir { parent, name }),
        (any::<u64>(), name(s), any::<u64>(), name(s), any::<bool>(), any::<bool>()).prop_map(
            |(parent, name, new_parent, new_name, noreplace, exchange)| Request::Rename {
                parent,
                name,
                new_parent,
                new_name,
                flags: RenameFlags { noreplace, exchange },
            }
        ),
    ]
    .boxed();
    match sizes {
        Sizes::Beyond => prop_oneof![12 => allowed, 1 => Just(Request::Sync)].boxed(),
        _ => allowed,
    }
}

pub fn name(sizes: Sizes) -> BoxedStrategy<Vec<u8>> {
    bytes(MAX_NAME_BYTES, sizes)
}

pub fn path(sizes: Sizes) -> BoxedStrategy<Vec<u8>> {
    bytes(MAX_PATH_BYTES, sizes)
}

pub fn timestamp(sizes: Sizes) -> BoxedStrategy<Timestamp> {
    let nanoseconds = match sizes {
        Sizes::Beyond => {
            prop_oneof![8 => 0..1_000_000_000u32, 1 => Just(1_000_000_000u32), 1 => 1_000_000_000..=u32::MAX].boxed()
        }
        _ => prop_oneof![0..1_000_000_000u32, Just(999_999_999u32), Just(0u32)].boxed(),
    };
    (any::<i64>(), nanoseconds).prop_map(|(seconds, nanoseconds)| Timestamp { seconds, nanoseconds }).boxed()
}

pub fn file_kind() -> BoxedStrategy<FileKind> {
    prop_oneof![
        Just(FileKind::File),
        Just(FileKind::Directory),
        Just(FileKind::Symlink),
        Just(FileKind::Fifo),
        Just(FileKind::Socket),
        Just(FileKind::CharDevice),
        Just(FileKind::BlockDevice),
    ]
    .boxed()
}

pub fn durability() -> BoxedStrategy<Durability> {
    prop_oneof![Just(Durability::Durable), Just(Durability::Buffered)].boxed()
}

pub fn buffer_slice() -> BoxedStrategy<BufferSlice> {
    (any::<u64>(), any::<u32>()).prop_map(|(offset, length)| BufferSlice { offset, length }).boxed()
}

pub fn payload(sizes: Sizes) -> BoxedStrategy<Payload> {
    prop_oneof![bytes(MAX_DATA_BYTES, sizes).prop_map(Payload::Inline), buffer_slice().prop_map(Payload::Buffer)]
        .boxed()
}

pub fn attributes(sizes: Sizes) -> BoxedStrategy<Attributes> {
    (
        (any::<u64>(), file_kind(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()),
        (any::<u64>(), any::<u64>(), timestamp(sizes), timestamp(sizes), timestamp(sizes), timestamp(sizes)),
        any::<u64>(),
    )
        .prop_map(
            |((ino, kind, mode, nlink, uid, gid, rdev), (size, blocks, atime, mtime, ctime, btime), generation)| {
                Attributes {
                    ino,
                    kind,
                    mode,
                    nlink,
                    uid,
                    gid,
                    rdev,
                    size,
                    blocks,
                    atime,
                    mtime,
                    ctime,
                    btime,
                    generation,
                }
            },
        )
        .boxed()
}

pub fn time_change(sizes: Sizes) -> BoxedStrategy<TimeChange> {
    prop_oneof![Just(TimeChange::Now), timestamp(sizes).prop_map(TimeChange::At)].boxed()
}

pub fn set_attributes(sizes: Sizes) -> BoxedStrategy<SetAttributes> {
    (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(time_change(sizes)),
        proptest::option::of(time_change(sizes)),
    )
        .prop_map(|(mode, uid, gid, size, atime, mtime)| SetAttributes { mode, uid, gid, size, atime, mtime })
        .boxed()
}

pub fn kv_operation(sizes: Sizes) -> BoxedStrategy<KvOperation> {
    prop_oneof![
        (path(sizes), payload(sizes)).prop_map(|(key, value)| KvOperation::Put { key, value }),
        path(sizes).prop_map(|key| KvOperation::Delete { key }),
    ]
    .boxed()
}

/// Every request variant, each equally likely.
pub fn request(sizes: Sizes) -> BoxedStrategy<Request> {
    let s = sizes;
    let variants: Vec<BoxedStrategy<Request>> = vec![
        Just(Request::Ping).boxed(),
        prop_oneof![any::<u64>().prop_map(LeaseTarget::Object), Just(LeaseTarget::Namespace)]
            .prop_map(|target| Request::Lease { target })
            .boxed(),
        (any::<u64>(), name(s)).prop_map(|(parent, name)| Request::Lookup { parent, name }).boxed(),
        any::<u64>().prop_map(|ino| Request::GetAttributes { ino }).boxed(),
        (any::<u64>(), set_attributes(s), proptest::option::of(any::<u64>()))
            .prop_map(|(ino, set, handle)| Request::SetAttributes { ino, set, handle })
            .boxed(),
        (path(s), any::<bool>()).prop_map(|(path, follow)| Request::Resolve { path, follow }).boxed(),
        (path(s), any::<i32>(), any::<u32>(), any::<bool>())
            .prop_map(|(path, flags, read, lease)| Request::OpenPath { path, flags, read, lease })
            .boxed(),
        (any::<u64>(), name(s), any::<u32>(), any::<u64>())
            .prop_map(|(parent, name, mode, rdev)| Request::Mknod { parent, name, mode, rdev })
            .boxed(),
        (any::<u64>(), name(s), any::<u32>())
            .prop_map(|(parent, name, mode)| Request::Mkdir { parent, name, mode })
            .boxed(),
        (any::<u64>(), name(s), path(s))
            .prop_map(|(parent, name, target)| Request::Symlink { parent, name, target })
            .boxed(),
        any::<u64>().prop_map(|ino| Request::Readlink { ino }).boxed(),
        (any::<u64>(), any::<u64>(), name(s))
            .prop_map(|(ino, parent, name)| Request::Link { ino, parent, name })
            .boxed(),
        (any::<u64>(), name(s)).prop_map(|(parent, name)| Request::Unlink { parent, name }).boxed(),
        (any::<u64>(), name(s)).prop_map(|(parent, name)| Request::Rmdir { parent, name }).boxed(),
        (any::<u64>(), name(s), any::<u64>(), name(s), any::<bool>(), any::<bool>())
            .prop_map(|(parent, name, new_parent, new_name, noreplace, exchange)| Request::Rename {
                parent,
                name,
                new_parent,
                new_name,
                flags: RenameFlags { noreplace, exchange },
            })
            .boxed(),
        (any::<u64>(), any::<i32>()).prop_map(|(ino, flags)| Request::Open { ino, flags }).boxed(),
        (any::<u64>(), name(s), any::<u32>(), any::<i32>(), any::<bool>())
            .prop_map(|(parent, name, mode, flags, lease)| Request::Create { parent, name, mode, flags, lease })
            .boxed(),
        (any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(handle, offset, length)| Request::Read { handle, offset, length })
            .boxed(),
        (any::<u64>(), any::<u64>(), buffer_slice())
            .prop_map(|(handle, offset, into)| Request::ReadBuffer { handle, offset, into })
            .boxed(),
        (any::<u64>(), any::<u64>(), payload(s))
            .prop_map(|(handle, offset, data)| Request::Write { handle, offset, data })
            .boxed(),
        any::<u64>().prop_map(|handle| Request::Fsync { handle }).boxed(),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<i32>())
            .prop_map(|(handle, offset, length, mode)| Request::Fallocate { handle, offset, length, mode })
            .boxed(),
        any::<u64>().prop_map(|handle| Request::Release { handle }).boxed(),
        any::<u64>().prop_map(|ino| Request::OpenDirectory { ino }).boxed(),
        (any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(handle, offset, max_entries)| Request::ReadDirectory { handle, offset, max_entries })
            .boxed(),
        any::<u64>().prop_map(|handle| Request::ReleaseDirectory { handle }).boxed(),
        any::<u64>().prop_map(|handle| Request::FsyncDirectory { handle }).boxed(),
        (any::<u64>(), any::<u32>()).prop_map(|(ino, mask)| Request::Access { ino, mask }).boxed(),
        Just(Request::StatFs).boxed(),
        (any::<u64>(), name(s)).prop_map(|(ino, name)| Request::GetXattr { ino, name }).boxed(),
        (any::<u64>(), name(s), bytes(MAX_DATA_BYTES, s), any::<bool>(), any::<bool>())
            .prop_map(|(ino, name, value, create, replace)| Request::SetXattr {
                ino,
                name,
                value,
                flags: XattrFlags { create, replace },
            })
            .boxed(),
        any::<u64>().prop_map(|ino| Request::ListXattr { ino }).boxed(),
        (any::<u64>(), name(s)).prop_map(|(ino, name)| Request::RemoveXattr { ino, name }).boxed(),
        Just(Request::Sync).boxed(),
        (name(s), path(s), payload(s), durability())
            .prop_map(|(bucket, key, value, durability)| Request::KvPut { bucket, key, value, durability })
            .boxed(),
        (name(s), path(s), proptest::option::of(buffer_slice()))
            .prop_map(|(bucket, key, into)| Request::KvGet { bucket, key, into })
            .boxed(),
        (name(s), path(s)).prop_map(|(bucket, key)| Request::KvHead { bucket, key }).boxed(),
        (name(s), path(s), durability())
            .prop_map(|(bucket, key, durability)| Request::KvDelete { bucket, key, durability })
            .boxed(),
        (name(s), path(s), proptest::option::of(path(s)), any::<u32>())
            .prop_map(|(bucket, start, end, max_entries)| Request::KvScan { bucket, start, end, max_entries })
            .boxed(),
        (name(s), list(kv_operation(s), KvOperation::Delete { key: Vec::new() }, s), durability())
            .prop_map(|(bucket, operations, durability)| Request::KvWriteBatch { bucket, operations, durability })
            .boxed(),
        (name(s), path(s), durability())
            .prop_map(|(bucket, key, durability)| Request::KvWriterOpen { bucket, key, durability })
            .boxed(),
        any::<u64>().prop_map(|handle| Request::KvWriterFinish { handle }).boxed(),
        (name(s), path(s)).prop_map(|(bucket, key)| Request::KvReaderOpen { bucket, key }).boxed(),
        name(s).prop_map(|bucket| Request::CreateBucket { bucket }).boxed(),
        name(s).prop_map(|bucket| Request::DeleteBucket { bucket }).boxed(),
        Just(Request::ListBuckets).boxed(),
        Just(Request::Stats).boxed(),
        (
            list_up_to(
                metadata_operation(s),
                Request::Unlink { parent: 1, name: b"x".to_vec() },
                MAX_BATCH_OPERATIONS,
                s,
            ),
            durability(),
        )
            .prop_map(|(operations, durability)| Request::MetadataBatch { operations, durability })
            .boxed(),
        path(s).prop_map(|path| Request::HeapOpen { path }).boxed(),
        (any::<u64>(), heap_operation(s)).prop_map(|(heap, operation)| Request::Heap { heap, operation }).boxed(),
        (any::<u64>(), any::<bool>()).prop_map(|(heap, sync)| Request::HeapClose { heap, sync }).boxed(),
    ];
    Union::new(variants).boxed()
}

/// Every heap operation.
pub fn heap_operation(s: Sizes) -> BoxedStrategy<HeapOperation> {
    use HeapOperation as H;
    let pointer = (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(object, offset, generation)| HeapPointer {
        object,
        offset,
        generation,
    });
    prop_oneof![
        any::<u64>().prop_map(|size| H::Alloc { size }),
        (any::<u64>(), any::<bool>(), any::<u64>(), any::<u64>())
            .prop_map(|(object, write, tag, received)| H::Attach { object, write, tag, received }),
        any::<u64>().prop_map(|object| H::Size { object }),
        name(s).prop_map(|name| H::GetByName { name }),
        (any::<u64>(), name(s)).prop_map(|(object, name)| H::AddName { object, name }),
        any::<u64>().prop_map(|object| H::Names { object }),
        any::<u64>().prop_map(|object| H::Free { object }),
        any::<u64>().prop_map(|object| H::Copy { object }),
        any::<u64>().prop_map(|object| H::Clone { object }),
        list_up_to(any::<u64>().boxed(), 0, larder_protocol::codec::MAX_HEAP_TYPE_OFFSETS, s)
            .prop_map(|offsets| H::AllocType { offsets }),
        (any::<u64>(), any::<u64>()).prop_map(|(object, type_id)| H::AttachType { object, type_id }),
        any::<u64>().prop_map(|object| H::TypeOf { object }),
        (any::<u64>(), any::<u64>()).prop_map(|(object, size)| H::Grow { object, size }),
        (pointer.clone(), any::<u64>()).prop_map(|(pointer, length)| H::Check { pointer, length }),
        Just(H::Sync),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(object, size, align)| H::AllocIn { object, size, align }),
        pointer.prop_map(|pointer| H::FreeIn { pointer }),
    ]
    .boxed()
}

/// Every response variant, each equally likely.
pub fn response(sizes: Sizes) -> BoxedStrategy<Response> {
    let s = sizes;
    let entry = (any::<u64>(), file_kind(), name(s), any::<u64>())
        .prop_map(|(ino, kind, name, next)| DirectoryEntry { ino, kind, name, next })
        .boxed();
    let scan_entry =
        (path(s), any::<u64>(), any::<u64>()).prop_map(|(key, object, size)| ScanEntry { key, object, size }).boxed();
    let empty_entry = DirectoryEntry { ino: 0, kind: FileKind::File, name: Vec::new(), next: 0 };
    let empty_scan_entry = ScanEntry { key: Vec::new(), object: 0, size: 0 };
    let variants: Vec<BoxedStrategy<Response>> = vec![
        Just(Response::Done).boxed(),
        any::<u64>().prop_map(|epoch| Response::Pong { epoch }).boxed(),
        attributes(s).prop_map(Response::Attributes).boxed(),
        (any::<u64>(), name(s), proptest::option::of(attributes(s)))
            .prop_map(|(parent, name, attributes)| Response::Resolved { parent, name, attributes })
            .boxed(),
        any::<u64>().prop_map(Response::Handle).boxed(),
        (any::<u64>(), any::<u64>()).prop_map(|(handle, size)| Response::Opened { handle, size }).boxed(),
        (attributes(s), any::<u64>(), proptest::option::of((any::<u32>(), any::<u32>(), any::<u64>())))
            .prop_map(|(attributes, handle, lease)| Response::Created {
                attributes,
                handle,
                lease: lease.map(|(slot, sequence, term_nanos)| LeaseGrant { slot, sequence, term_nanos }),
            })
            .boxed(),
        (
            any::<u64>(),
            name(s),
            attributes(s),
            any::<u64>(),
            proptest::option::of(bytes(MAX_DATA_BYTES, s)),
            proptest::option::of((any::<u32>(), any::<u32>(), any::<u64>())),
        )
            .prop_map(|(parent, name, attributes, handle, data, lease)| Response::PathOpened {
                parent,
                name,
                attributes,
                handle,
                data,
                lease: lease.map(|(slot, sequence, term_nanos)| LeaseGrant { slot, sequence, term_nanos }),
            })
            .boxed(),
        bytes(MAX_DATA_BYTES, s).prop_map(Response::Data).boxed(),
        any::<u64>().prop_map(Response::Length).boxed(),
        list(entry, empty_entry, s).prop_map(Response::Entries).boxed(),
        list(name(s), Vec::new(), s).prop_map(Response::Names).boxed(),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(block_bytes, blocks, blocks_free, blocks_available, files, files_free, name_max)| {
                Response::FsStats(FsStats {
                    block_bytes,
                    blocks,
                    blocks_free,
                    blocks_available,
                    files,
                    files_free,
                    name_max,
                })
            })
            .boxed(),
        proptest::option::of(bytes(MAX_DATA_BYTES, s)).prop_map(Response::Value).boxed(),
        any::<u64>().prop_map(|length| Response::ValueInBuffer { length }).boxed(),
        proptest::option::of((any::<u64>(), any::<u64>()).prop_map(|(object, size)| KeyHead { object, size }))
            .prop_map(Response::Head)
            .boxed(),
        any::<bool>().prop_map(Response::Deleted).boxed(),
        (list(scan_entry, empty_scan_entry, s), any::<bool>())
            .prop_map(|(entries, more)| Response::ScanPage { entries, more })
            .boxed(),
        text(MAX_TEXT_BYTES, s).prop_map(Response::Text).boxed(),
        any::<u32>().prop_map(|worker| Response::Redirect { worker }).boxed(),
        (any::<i32>(), text(MAX_TEXT_BYTES, s)).prop_map(|(errno, message)| Response::Error { errno, message }).boxed(),
        list_up_to(proptest::option::of(attributes(s)).boxed(), None, MAX_BATCH_OPERATIONS, s)
            .prop_map(Response::BatchApplied)
            .boxed(),
        (any::<u32>(), any::<u32>(), any::<u64>())
            .prop_map(|(slot, sequence, term_nanos)| Response::Lease(LeaseGrant { slot, sequence, term_nanos }))
            .boxed(),
        any::<u64>().prop_map(Response::HeapObject).boxed(),
        (any::<u64>(), any::<u64>(), any::<bool>())
            .prop_map(|(object, size, writable)| Response::HeapAttached { object, size, writable })
            .boxed(),
        proptest::option::of(any::<u64>()).prop_map(Response::HeapType).boxed(),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(object, offset, generation, object_size)| Response::HeapBlock {
                pointer: HeapPointer { object, offset, generation },
                object_size,
            })
            .boxed(),
    ];
    Union::new(variants).boxed()
}
