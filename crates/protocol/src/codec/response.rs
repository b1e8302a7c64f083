//! Response bodies: the fields after the header, per kind, in the order
//! `docs/format.md` lists them.

use super::decode::Reader;
use super::encode::{Encoder, Sink};
use super::error::DecodeError;
use super::opcode::ResponseKind;
use super::{MAX_DATA_BYTES, MAX_LIST_ENTRIES, MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_TEXT_BYTES};
use crate::message::{DirectoryEntry, FsStats, HeapPointer, KeyHead, LeaseGrant, Response, ScanEntry};

/// Smallest encoding of a directory entry: ino, kind, name length, next.
pub(super) const DIRECTORY_ENTRY_MIN_BYTES: usize = 8 + 1 + 4 + 8;

/// Smallest encoding of a name: its length.
const NAME_MIN_BYTES: usize = 4;

/// Smallest encoding of a batch's result: its option tag.
const BATCH_RESULT_MIN_BYTES: usize = 1;

/// Smallest encoding of a scan entry: key length, object, size.
pub(super) const SCAN_ENTRY_MIN_BYTES: usize = 4 + 8 + 8;

pub(super) fn encode<S: Sink>(e: &mut Encoder<'_, S>, response: &Response) {
    match response {
        Response::Done => {}
        Response::BatchApplied(results) => {
            e.count("BatchApplied", super::MAX_BATCH_OPERATIONS, results.len());
            for result in results {
                e.option(result);
                if let Some(attributes) = result {
                    e.attributes(attributes);
                }
            }
        }
        Response::Pong { epoch } => e.u64(*epoch),
        Response::Lease(grant) => {
            e.u32(grant.slot);
            e.u32(grant.sequence);
            e.u64(grant.term_nanos);
        }
        Response::Attributes(attributes) => e.attributes(attributes),
        Response::Resolved { parent, name, attributes } => {
            e.u64(*parent);
            e.bytes("Resolved.name", MAX_NAME_BYTES, name);
            e.option(attributes);
            if let Some(attributes) = attributes {
                e.attributes(attributes);
            }
        }
        Response::Handle(handle) => e.u64(*handle),
        Response::Opened { handle, size } => {
            e.u64(*handle);
            e.u64(*size);
        }
        Response::Created { attributes, handle, lease } => {
            e.attributes(attributes);
            e.u64(*handle);
            encode_grant(e, lease);
        }
        Response::PathOpened { parent, name, attributes, handle, data, lease } => {
            e.u64(*parent);
            e.bytes("PathOpened.name", MAX_NAME_BYTES, name);
            e.attributes(attributes);
            e.u64(*handle);
            e.option(data);
            if let Some(data) = data {
                e.bytes("PathOpened.data", MAX_DATA_BYTES, data);
            }
            encode_grant(e, lease);
        }
        Response::Data(data) => e.bytes("Data", MAX_DATA_BYTES, data),
        Response::Length(length) => e.u64(*length),
        Response::Entries(entries) => {
            e.count("Entries", MAX_LIST_ENTRIES, entries.len());
            for entry in entries {
                e.u64(entry.ino);
                e.file_kind(entry.kind);
                e.bytes("Entries.name", MAX_NAME_BYTES, &entry.name);
                e.u64(entry.next);
            }
        }
        Response::Names(names) => {
            e.count("Names", MAX_LIST_ENTRIES, names.len());
            for name in names {
                e.bytes("Names.name", MAX_NAME_BYTES, name);
            }
        }
        Response::FsStats(stats) => {
            e.u32(stats.block_bytes);
            e.u64(stats.blocks);
            e.u64(stats.blocks_free);
            e.u64(stats.blocks_available);
            e.u64(stats.files);
            e.u64(stats.files_free);
            e.u32(stats.name_max);
        }
        Response::Value(value) => {
            e.option(value);
            if let Some(value) = value {
                e.bytes("Value", MAX_DATA_BYTES, value);
            }
        }
        Response::ValueInBuffer { length } => e.u64(*length),
        Response::Head(head) => {
            e.option(head);
            if let Some(head) = head {
                e.u64(head.object);
                e.u64(head.size);
            }
        }
        Response::Deleted(deleted) => e.bool(*deleted),
        Response::ScanPage { entries, more } => {
            e.count("ScanPage.entries", MAX_LIST_ENTRIES, entries.len());
            for entry in entries {
                e.bytes("ScanPage.entries.key", MAX_PATH_BYTES, &entry.key);
                e.u64(entry.object);
                e.u64(entry.size);
            }
            e.bool(*more);
        }
        Response::Text(text) => e.text("Text", MAX_TEXT_BYTES, text),
        Response::Redirect { worker } => e.u32(*worker),
        Response::HeapObject(object) => e.u64(*object),
        Response::HeapAttached { object, size, writable } => {
            e.u64(*object);
            e.u64(*size);
            e.bool(*writable);
        }
        Response::HeapType(type_id) => {
            e.option(type_id);
            if let Some(type_id) = type_id {
                e.u64(*type_id);
            }
        }
        Response::HeapBlock { pointer, object_size } => {
            e.u64(pointer.object);
            e.u64(pointer.offset);
            e.u64(pointer.generation);
            e.u64(*object_size);
        }
        Response::Error { errno, message } => {
            e.i32(*errno);
            e.text("Error.message", MAX_TEXT_BYTES, message);
        }
    }
}

/// A lease option as `PathOpened` and `Created` carry it: a tag, then
/// slot, sequence and term as `Lease` (kind 22).
fn encode_grant<S: Sink>(e: &mut Encoder<'_, S>, lease: &Option<LeaseGrant>) {
    e.option(lease);
    if let Some(grant) = lease {
        e.u32(grant.slot);
        e.u32(grant.sequence);
        e.u64(grant.term_nanos);
    }
}

/// Decodes what [`encode_grant`] wrote; `fields` name the tag's field and
/// the grant's three.
fn decode_grant(
    r: &mut Reader<'_>,
    tag: &'static str,
    fields: [&'static str; 3],
) -> Result<Option<LeaseGrant>, DecodeError> {
    if !r.option(tag)? {
        return Ok(None);
    }
    Ok(Some(LeaseGrant { slot: r.u32(fields[0])?, sequence: r.u32(fields[1])?, term_nanos: r.u64(fields[2])? }))
}

pub(super) fn decode(r: &mut Reader<'_>, kind: ResponseKind) -> Result<Response, DecodeError> {
    Ok(match kind {
        ResponseKind::Done => Response::Done,
        ResponseKind::BatchApplied => {
            let count = r.count("BatchApplied", super::MAX_BATCH_OPERATIONS, BATCH_RESULT_MIN_BYTES)?;
            let mut results = Vec::with_capacity(count);
            for _ in 0..count {
                results.push(if r.option("BatchApplied.attributes")? { Some(r.attributes()?) } else { None });
            }
            Response::BatchApplied(results)
        }
        ResponseKind::Pong => Response::Pong { epoch: r.u64("Pong.epoch")? },
        ResponseKind::Lease => Response::Lease(LeaseGrant {
            slot: r.u32("Lease.slot")?,
            sequence: r.u32("Lease.sequence")?,
            term_nanos: r.u64("Lease.term_nanos")?,
        }),
        ResponseKind::Attributes => Response::Attributes(r.attributes()?),
        ResponseKind::Resolved => {
            let parent = r.u64("Resolved.parent")?;
            let name = r.bytes("Resolved.name", MAX_NAME_BYTES)?;
            let attributes = if r.option("Resolved.attributes")? { Some(r.attributes()?) } else { None };
            Response::Resolved { parent, name, attributes }
        }
        ResponseKind::Handle => Response::Handle(r.u64("Handle")?),
        ResponseKind::Opened => Response::Opened { handle: r.u64("Opened.handle")?, size: r.u64("Opened.size")? },
        ResponseKind::Created => Response::Created {
            attributes: r.attributes()?,
            handle: r.u64("Created.handle")?,
            lease: decode_grant(
                r,
                "Created.lease",
                ["Created.lease.slot", "Created.lease.sequence", "Created.lease.term_nanos"],
            )?,
        },
        ResponseKind::PathOpened => {
            let parent = r.u64("PathOpened.parent")?;
            let name = r.bytes("PathOpened.name", MAX_NAME_BYTES)?;
            let attributes = r.attributes()?;
            let handle = r.u64("PathOpened.handle")?;
            let data =
                if r.option("PathOpened.data")? { Some(r.bytes("PathOpened.data", MAX_DATA_BYTES)?) } else { None };
            let lease = decode_grant(
                r,
                "PathOpened.lease",
                ["PathOpened.lease.slot", "PathOpened.lease.sequence", "PathOpened.lease.term_nanos"],
            )?;
            Response::PathOpened { parent, name, attributes, handle, data, lease }
        }
        ResponseKind::Data => Response::Data(r.bytes("Data", MAX_DATA_BYTES)?),
        ResponseKind::Length => Response::Length(r.u64("Length")?),
        ResponseKind::Entries => {
            let count = r.count("Entries", MAX_LIST_ENTRIES, DIRECTORY_ENTRY_MIN_BYTES)?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(DirectoryEntry {
                    ino: r.u64("Entries.ino")?,
                    kind: r.file_kind("Entries.kind")?,
                    name: r.bytes("Entries.name", MAX_NAME_BYTES)?,
                    next: r.u64("Entries.next")?,
                });
            }
            Response::Entries(entries)
        }
        ResponseKind::Names => {
            let count = r.count("Names", MAX_LIST_ENTRIES, NAME_MIN_BYTES)?;
            let mut names = Vec::with_capacity(count);
            for _ in 0..count {
                names.push(r.bytes("Names.name", MAX_NAME_BYTES)?);
            }
            Response::Names(names)
        }
        ResponseKind::FsStats => Response::FsStats(FsStats {
            block_bytes: r.u32("FsStats.block_bytes")?,
            blocks: r.u64("FsStats.blocks")?,
            blocks_free: r.u64("FsStats.blocks_free")?,
            blocks_available: r.u64("FsStats.blocks_available")?,
            files: r.u64("FsStats.files")?,
            files_free: r.u64("FsStats.files_free")?,
            name_max: r.u32("FsStats.name_max")?,
        }),
        ResponseKind::Value => {
            Response::Value(if r.option("Value")? { Some(r.bytes("Value", MAX_DATA_BYTES)?) } else { None })
        }
        ResponseKind::ValueInBuffer => Response::ValueInBuffer { length: r.u64("ValueInBuffer.length")? },
        ResponseKind::Head => Response::Head(if r.option("Head")? {
            Some(KeyHead { object: r.u64("Head.object")?, size: r.u64("Head.size")? })
        } else {
            None
        }),
        ResponseKind::Deleted => Response::Deleted(r.bool("Deleted")?),
        ResponseKind::ScanPage => {
            let count = r.count("ScanPage.entries", MAX_LIST_ENTRIES, SCAN_ENTRY_MIN_BYTES)?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(ScanEntry {
                    key: r.bytes("ScanPage.entries.key", MAX_PATH_BYTES)?,
                    object: r.u64("ScanPage.entries.object")?,
                    size: r.u64("ScanPage.entries.size")?,
                });
            }
            Response::ScanPage { entries, more: r.bool("ScanPage.more")? }
        }
        ResponseKind::Text => Response::Text(r.text("Text", MAX_TEXT_BYTES)?),
        ResponseKind::Redirect => Response::Redirect { worker: r.u32("Redirect.worker")? },
        ResponseKind::HeapObject => Response::HeapObject(r.u64("HeapObject")?),
        ResponseKind::HeapAttached => Response::HeapAttached {
            object: r.u64("HeapAttached.object")?,
            size: r.u64("HeapAttached.size")?,
            writable: r.bool("HeapAttached.writable")?,
        },
        ResponseKind::HeapType => {
            Response::HeapType(if r.option("HeapType")? { Some(r.u64("HeapType.type_id")?) } else { None })
        }
        ResponseKind::HeapBlock => Response::HeapBlock {
            pointer: HeapPointer {
                object: r.u64("HeapBlock.object")?,
                offset: r.u64("HeapBlock.offset")?,
                generation: r.u64("HeapBlock.generation")?,
            },
            object_size: r.u64("HeapBlock.object_size")?,
        },
        ResponseKind::Error => {
            Response::Error { errno: r.i32("Error.errno")?, message: r.text("Error.message", MAX_TEXT_BYTES)? }
        }
    })
}
