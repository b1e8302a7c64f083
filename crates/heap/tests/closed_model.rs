//! Attach, close, free and grow sequences against a model (proptest), on
//! real mappings, where closed objects' mappings are kept and reused
//! (docs/heap.md, "Closed mappings"). Besides the heap's own calls, the
//! steps change objects behind the heap while they are closed: writes and
//! growth through the object layer, a free through the object layer, and a
//! file cut short and restored with plain std::fs. After each step the
//! heap agrees with the model: a freed object is NotFound (never its old
//! bytes), a cut file is refused, sizes and bytes are the model's.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_heap::limits::CLOSED_MAPPINGS;
use larder_heap::{Heap, HeapError, ObjectId};
use larder_object::Durability;
use proptest::prelude::*;

use common::real_heap;

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64),
    Close(usize),
    Get(usize),
    Read(usize),
    Write {
        object: usize,
        offset: u64,
        byte: u8,
        len: u64,
    },
    Grow {
        object: usize,
        by: u64,
    },
    Free(usize),
    /// A write through the object layer (past the end: it extends the file).
    OuterWrite {
        object: usize,
        offset: u64,
        byte: u8,
        len: u64,
    },
    /// Growth by the object layer's truncate.
    OuterGrow {
        object: usize,
        by: u64,
    },
    /// `larder heap rm`'s free, buffered (the file stays until reopen).
    OuterFree(usize),
    /// The file cut to half with std::fs, attached (refused), restored.
    CutAndRestore(usize),
    Sync,
}

fn ops() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1u64..9000).prop_map(Op::Alloc),
        4 => (0usize..6).prop_map(Op::Close),
        3 => (0usize..6).prop_map(Op::Get),
        3 => (0usize..6).prop_map(Op::Read),
        3 => (0usize..6, 0u64..9000, any::<u8>(), 1u64..300)
            .prop_map(|(object, offset, byte, len)| Op::Write { object, offset, byte, len }),
        2 => (0usize..6, 0u64..9000).prop_map(|(object, by)| Op::Grow { object, by }),
        1 => (0usize..6).prop_map(Op::Free),
        2 => (0usize..6, 0u64..12000, any::<u8>(), 1u64..300)
            .prop_map(|(object, offset, byte, len)| Op::OuterWrite { object, offset, byte, len }),
        1 => (0usize..6, 0u64..9000).prop_map(|(object, by)| Op::OuterGrow { object, by }),
        1 => (0usize..6).prop_map(Op::OuterFree),
        1 => (0usize..6).prop_map(Op::CutAndRestore),
        1 => Just(Op::Sync),
    ]
}

/// One object as the model has it.
#[derive(Clone, Debug)]
struct Object {
    id: ObjectId,
    /// `None` once freed.
    bytes: Option<Vec<u8>>,
    /// Attached now (not closed) in the heap.
    attached: bool,
}

fn file_of(dir: &Path, id: ObjectId) -> std::path::PathBuf {
    dir.join(larder_object::HEAP_DIR).join(id.0.to_string())
}

/// The heap's whole view of `object`, checked against the model; attaches it.
fn check(h: &Heap, object: &mut Object) -> Result<(), TestCaseError> {
    match &object.bytes {
        None => {
            let got = h.get(object.id);
            prop_assert!(matches!(got, Err(HeapError::NotFound { .. })), "freed {:?}: {:?}", object.id, got);
            let mut one = [0u8; 1];
            let read = h.read_at(object.id, 0, &mut one);
            prop_assert!(matches!(read, Err(HeapError::NotFound { .. })), "freed {:?}: {:?}", object.id, read);
        }
        Some(bytes) => {
            prop_assert_eq!(h.size(object.id).unwrap(), bytes.len() as u64);
            let mut read = vec![0u8; bytes.len()];
            h.read_at(object.id, 0, &mut read).unwrap();
            prop_assert!(&read == bytes, "object {:?}'s bytes differ", object.id);
            object.attached = true;
        }
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let (dir, store, h) = real_heap();
    let mut objects: Vec<Object> = Vec::new();
    for op in ops {
        let pick = |i: usize, objects: &[Object]| if objects.is_empty() { None } else { Some(i % objects.len()) };
        match *op {
            Op::Alloc(size) => {
                let id = h.alloc(size).unwrap();
                objects.push(Object { id, bytes: Some(vec![0; size as usize]), attached: true });
            }
            Op::Close(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                h.close_object(objects[i].id).unwrap();
                objects[i].attached = false;
            }
            Op::Get(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                let o = &mut objects[i];
                match (&o.bytes, h.get(o.id)) {
                    (Some(_), Ok(id)) => {
                        prop_assert_eq!(id, o.id);
                        o.attached = true;
                    }
                    (None, Err(HeapError::NotFound { .. })) => {}
                    (bytes, got) => prop_assert!(false, "get {:?} (live {}): {:?}", o.id, bytes.is_some(), got),
                }
            }
            Op::Read(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                check(&h, &mut objects[i])?;
            }
            Op::Write { object, offset, byte, len } => {
                let Some(i) = pick(object, &objects) else { continue };
                let o = &mut objects[i];
                let data = vec![byte; len as usize];
                let result = h.write_at(o.id, offset, &data);
                match &mut o.bytes {
                    None => prop_assert!(matches!(result, Err(HeapError::NotFound { .. })), "{:?}", result),
                    Some(bytes) if offset + len <= bytes.len() as u64 => {
                        result.unwrap();
                        bytes[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                        o.attached = true;
                    }
                    Some(_) => {
                        prop_assert!(matches!(result, Err(HeapError::OutOfBounds { .. })), "{:?}", result);
                        o.attached = true;
                    }
                }
            }
            Op::Grow { object, by } => {
                let Some(i) = pick(object, &objects) else { continue };
                let o = &mut objects[i];
                match &mut o.bytes {
                    None => {
                        let grown = h.grow(o.id, by);
                        prop_assert!(matches!(grown, Err(HeapError::NotFound { .. })), "{:?}", grown)
                    }
                    Some(bytes) => {
                        let size = bytes.len() as u64 + by;
                        h.grow(o.id, size).unwrap();
                        bytes.resize(size as usize, 0);
                        o.attached = true;
                    }
                }
            }
            Op::Free(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                let o = &mut objects[i];
                let result = h.free(o.id);
                if o.bytes.take().is_some() {
                    result.unwrap();
                } else {
                    prop_assert!(matches!(result, Err(HeapError::NotFound { .. })), "{:?}", result);
                }
                o.attached = false;
            }
            Op::OuterWrite { object, offset, byte, len } => {
                let Some(i) = pick(object, &objects) else { continue };
                let o = &mut objects[i];
                let Some(bytes) = &mut o.bytes else { continue };
                // An attached object takes no growth behind its back: only
                // writes inside it while attached.
                let end = (offset + len) as usize;
                if o.attached && end > bytes.len() {
                    continue;
                }
                let data = vec![byte; len as usize];
                store.write(o.id.0, offset, &data, Durability::Buffered).unwrap();
                if end > bytes.len() {
                    bytes.resize(end, 0);
                }
                bytes[offset as usize..end].copy_from_slice(&data);
            }
            Op::OuterGrow { object, by } => {
                let Some(i) = pick(object, &objects) else { continue };
                let o = &mut objects[i];
                let Some(bytes) = &mut o.bytes else { continue };
                if o.attached {
                    continue;
                }
                let size = bytes.len() as u64 + by;
                store.truncate(o.id.0, size, Durability::Buffered).unwrap();
                bytes.resize(size as usize, 0);
            }
            Op::OuterFree(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                let o = &mut objects[i];
                if o.bytes.is_none() || o.attached {
                    continue;
                }
                store.free_heap_object(h.root_id(), o.id.0, Durability::Buffered).unwrap();
                o.bytes = None;
            }
            Op::CutAndRestore(i) => {
                let Some(i) = pick(i, &objects) else { continue };
                let o = &mut objects[i];
                let Some(bytes) = &mut o.bytes else { continue };
                if o.attached || bytes.len() < 2 {
                    continue;
                }
                let len = bytes.len() as u64;
                let file = std::fs::OpenOptions::new().write(true).open(file_of(dir.path(), o.id)).unwrap();
                file.set_len(len / 2).unwrap();
                let got = h.get(o.id);
                prop_assert!(matches!(got, Err(HeapError::Shrunk { .. })), "cut to {} of {}: {:?}", len / 2, len, got);
                file.set_len(len).unwrap();
                bytes[(len / 2) as usize..].fill(0);
            }
            Op::Sync => h.sync().unwrap(),
        }
        prop_assert!(h.kept_mappings() <= CLOSED_MAPPINGS);
    }
    for o in &mut objects {
        check(&h, o)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn attach_close_free_grow_sequences_match_the_model(ops in proptest::collection::vec(ops(), 1..40)) {
        run(&ops)?;
    }
}
