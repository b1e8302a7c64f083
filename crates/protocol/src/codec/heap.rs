//! Heap request bodies (`Request::HeapOpen`, `Heap`, `HeapClose`) and
//! heap responses, in the order `docs/format.md` lists them. An operation
//! of `Request::Heap` is a one-byte tag and its fields.

use super::decode::Reader;
use super::encode::{Encoder, Sink};
use super::error::DecodeError;
use super::{MAX_HEAP_TYPE_OFFSETS, MAX_NAME_BYTES};
use crate::message::{HeapOperation, HeapPointer};

/// `HeapOperation`'s tags.
const ALLOC: u8 = 1;
const ATTACH: u8 = 2;
const SIZE: u8 = 3;
const GET_BY_NAME: u8 = 4;
const ADD_NAME: u8 = 5;
const NAMES: u8 = 6;
const FREE: u8 = 7;
const COPY: u8 = 8;
const CLONE: u8 = 9;
const ALLOC_TYPE: u8 = 10;
const ATTACH_TYPE: u8 = 11;
const TYPE_OF: u8 = 12;
const GROW: u8 = 13;
const CHECK: u8 = 14;
const SYNC: u8 = 15;
const ALLOC_IN: u8 = 16;
const FREE_IN: u8 = 17;

/// Bytes of one type offset.
const OFFSET_BYTES: usize = 8;

pub(super) fn encode_operation<S: Sink>(e: &mut Encoder<'_, S>, operation: &HeapOperation) {
    use HeapOperation as H;
    match operation {
        H::Alloc { size } => {
            e.u8(ALLOC);
            e.u64(*size);
        }
        H::Attach { object, write, tag, received } => {
            e.u8(ATTACH);
            e.u64(*object);
            e.bool(*write);
            e.u64(*tag);
            e.u64(*received);
        }
        H::Size { object } => {
            e.u8(SIZE);
            e.u64(*object);
        }
        H::GetByName { name } => {
            e.u8(GET_BY_NAME);
            e.bytes("Heap.GetByName.name", MAX_NAME_BYTES, name);
        }
        H::AddName { object, name } => {
            e.u8(ADD_NAME);
            e.u64(*object);
            e.bytes("Heap.AddName.name", MAX_NAME_BYTES, name);
        }
        H::Names { object } => {
            e.u8(NAMES);
            e.u64(*object);
        }
        H::Free { object } => {
            e.u8(FREE);
            e.u64(*object);
        }
        H::Copy { object } => {
            e.u8(COPY);
            e.u64(*object);
        }
        H::Clone { object } => {
            e.u8(CLONE);
            e.u64(*object);
        }
        H::AllocType { offsets } => {
            e.u8(ALLOC_TYPE);
            e.count("Heap.AllocType.offsets", MAX_HEAP_TYPE_OFFSETS, offsets.len());
            for offset in offsets {
                e.u64(*offset);
            }
        }
        H::AttachType { object, type_id } => {
            e.u8(ATTACH_TYPE);
            e.u64(*object);
            e.u64(*type_id);
        }
        H::TypeOf { object } => {
            e.u8(TYPE_OF);
            e.u64(*object);
        }
        H::Grow { object, size } => {
            e.u8(GROW);
            e.u64(*object);
            e.u64(*size);
        }
        H::Check { pointer, length } => {
            e.u8(CHECK);
            e.u64(pointer.object);
            e.u64(pointer.offset);
            e.u64(pointer.generation);
            e.u64(*length);
        }
        H::Sync => e.u8(SYNC),
        H::AllocIn { object, size, align } => {
            e.u8(ALLOC_IN);
            e.u64(*object);
            e.u64(*size);
            e.u64(*align);
        }
        H::FreeIn { pointer } => {
            e.u8(FREE_IN);
            e.u64(pointer.object);
            e.u64(pointer.offset);
            e.u64(pointer.generation);
        }
    }
}

pub(super) fn decode_operation(r: &mut Reader<'_>) -> Result<HeapOperation, DecodeError> {
    use HeapOperation as H;
    Ok(match r.u8("Heap.operation")? {
        ALLOC => H::Alloc { size: r.u64("Heap.Alloc.size")? },
        ATTACH => H::Attach {
            object: r.u64("Heap.Attach.object")?,
            write: r.bool("Heap.Attach.write")?,
            tag: r.u64("Heap.Attach.tag")?,
            received: r.u64("Heap.Attach.received")?,
        },
        SIZE => H::Size { object: r.u64("Heap.Size.object")? },
        GET_BY_NAME => H::GetByName { name: r.bytes("Heap.GetByName.name", MAX_NAME_BYTES)? },
        ADD_NAME => {
            H::AddName { object: r.u64("Heap.AddName.object")?, name: r.bytes("Heap.AddName.name", MAX_NAME_BYTES)? }
        }
        NAMES => H::Names { object: r.u64("Heap.Names.object")? },
        FREE => H::Free { object: r.u64("Heap.Free.object")? },
        COPY => H::Copy { object: r.u64("Heap.Copy.object")? },
        CLONE => H::Clone { object: r.u64("Heap.Clone.object")? },
        ALLOC_TYPE => {
            let count = r.count("Heap.AllocType.offsets", MAX_HEAP_TYPE_OFFSETS, OFFSET_BYTES)?;
            let mut offsets = Vec::with_capacity(count);
            for _ in 0..count {
                offsets.push(r.u64("Heap.AllocType.offsets")?);
            }
            H::AllocType { offsets }
        }
        ATTACH_TYPE => {
            H::AttachType { object: r.u64("Heap.AttachType.object")?, type_id: r.u64("Heap.AttachType.type_id")? }
        }
        TYPE_OF => H::TypeOf { object: r.u64("Heap.TypeOf.object")? },
        GROW => H::Grow { object: r.u64("Heap.Grow.object")?, size: r.u64("Heap.Grow.size")? },
        CHECK => H::Check {
            pointer: HeapPointer {
                object: r.u64("Heap.Check.object")?,
                offset: r.u64("Heap.Check.offset")?,
                generation: r.u64("Heap.Check.generation")?,
            },
            length: r.u64("Heap.Check.length")?,
        },
        SYNC => H::Sync,
        ALLOC_IN => H::AllocIn {
            object: r.u64("Heap.AllocIn.object")?,
            size: r.u64("Heap.AllocIn.size")?,
            align: r.u64("Heap.AllocIn.align")?,
        },
        FREE_IN => H::FreeIn {
            pointer: HeapPointer {
                object: r.u64("Heap.FreeIn.object")?,
                offset: r.u64("Heap.FreeIn.offset")?,
                generation: r.u64("Heap.FreeIn.generation")?,
            },
        },
        tag => return Err(DecodeError::UnknownTag { field: "Heap.operation", tag }),
    })
}
