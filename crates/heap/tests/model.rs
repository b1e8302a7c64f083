//! Every heap call against a simple model (proptest): random sequences of
//! alloc, write, grow, add_name, free, copy, types and sync, with the
//! store closed and reopened between steps, or crashed right after a sync
//! (only what was synced survives: one-flush syncs' page images are
//! replayed); after every step the heap agrees with the model (objects,
//! sizes, bytes, names, types).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use larder_heap::{Heap, HeapError, ObjectId, PPtr, TypeId};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::Store;
use proptest::prelude::*;

use common::{heap, reopen_sim, sim_store};

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64),
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
    AddName {
        object: usize,
        name: u8,
    },
    Free(usize),
    Copy(usize),
    AllocType(u8),
    AttachType {
        object: usize,
        ty: usize,
    },
    AllocIn {
        object: usize,
        size: u64,
        byte: u8,
    },
    FreeIn(usize),
    Sync,
    Reopen,
    /// Sync, write bytes of an object in place (so that the next sync may
    /// take one flush), sync again, then crash losing every write not
    /// synced, and reopen.
    SyncCrash {
        object: usize,
        offset: u64,
        byte: u8,
    },
}

fn ops() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..6000).prop_map(Op::Alloc),
        4 => (0usize..8, 0u64..7000, any::<u8>(), 1u64..300).prop_map(|(object, offset, byte, len)| Op::Write { object, offset, byte, len }),
        2 => (0usize..8, 0u64..9000).prop_map(|(object, by)| Op::Grow { object, by }),
        2 => (0usize..8, 0u8..5).prop_map(|(object, name)| Op::AddName { object, name }),
        2 => (0usize..8).prop_map(Op::Free),
        1 => (0usize..8).prop_map(Op::Copy),
        1 => (1u8..4).prop_map(Op::AllocType),
        1 => (0usize..8, 0usize..4).prop_map(|(object, ty)| Op::AttachType { object, ty }),
        3 => (0usize..8, 1u64..5000, 1u8..255).prop_map(|(object, size, byte)| Op::AllocIn { object, size, byte }),
        2 => (0usize..64).prop_map(Op::FreeIn),
        1 => Just(Op::Sync),
        2 => Just(Op::Reopen),
        3 => (0usize..8, 0u64..6000, any::<u8>()).prop_map(|(object, offset, byte)| Op::SyncCrash { object, offset, byte }),
    ]
}

#[derive(Clone, Debug, Default)]
struct Model {
    /// Live objects in allocation order: id, bytes, type.
    objects: Vec<(ObjectId, Vec<u8>, Option<TypeId>)>,
    names: BTreeMap<String, ObjectId>,
    types: Vec<(TypeId, u64)>,
    /// Live `alloc_in` blocks: pointer and length.
    blocks: Vec<(PPtr<u8>, u64)>,
    /// Blocks freed by `free_in` (their objects still live).
    freed_blocks: Vec<PPtr<u8>>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<usize> {
        (!self.objects.is_empty()).then(|| i % self.objects.len())
    }
}

fn reopen(sim: &SimStorage, store: Arc<Store>, h: Heap) -> (Arc<Store>, Heap) {
    h.close().unwrap();
    Arc::into_inner(store).unwrap().close().unwrap();
    let store = reopen_sim(sim);
    let h = heap(&store);
    (store, h)
}

/// Syncs, crashes the machine keeping only synced writes, and recovers.
fn sync_crash(sim: &mut SimStorage, store: Arc<Store>, h: Heap) -> (Arc<Store>, Heap) {
    h.sync().unwrap();
    drop(h);
    drop(store);
    *sim = sim.crash_with(CrashMode::DropAllPending);
    let store = reopen_sim(sim);
    let h = heap(&store);
    (store, h)
}

fn check(h: &Heap, model: &Model) -> Result<(), TestCaseError> {
    for (id, bytes, ty) in &model.objects {
        prop_assert_eq!(h.size(*id).unwrap(), bytes.len() as u64);
        let mut got = vec![0u8; bytes.len()];
        h.read_at(*id, 0, &mut got).unwrap();
        prop_assert!(&got == bytes, "object {} bytes differ", id.0);
        prop_assert_eq!(h.type_of(*id).unwrap(), *ty);
        let mut names: Vec<String> = model.names.iter().filter(|(_, o)| *o == id).map(|(n, _)| n.clone()).collect();
        names.sort();
        prop_assert_eq!(h.names(*id).unwrap(), names);
    }
    for (name, id) in &model.names {
        prop_assert_eq!(h.get_by_name(name).unwrap(), *id);
    }
    for (p, len) in &model.blocks {
        prop_assert!(h.deref(p.cast::<u8>()).is_ok(), "live block {:?}", p);
        prop_assert!(p.offset + len <= h.size(p.object_id()).unwrap());
    }
    for p in &model.freed_blocks {
        let stale = matches!(h.deref(*p), Err(HeapError::Stale { .. }));
        prop_assert!(stale, "freed block {:?} is stale", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn heap_agrees_with_the_model(steps in proptest::collection::vec(ops(), 1..40), seed in 0u64..1000) {
        let mut sim = SimStorage::new(seed);
        let mut store = sim_store(&sim);
        let mut h = heap(&store);
        let mut model = Model::default();
        let mut freed: Vec<ObjectId> = Vec::new();
        for op in steps {
            match op {
                Op::Alloc(size) => {
                    let id = h.alloc(size).unwrap();
                    model.objects.push((id, vec![0; size as usize], None));
                }
                Op::Write { object, offset, byte, len } => {
                    let Some(i) = model.pick(object) else { continue };
                    let (id, bytes, _) = &mut model.objects[i];
                    let data = vec![byte; len as usize];
                    let result = h.write_at(*id, offset, &data);
                    if offset + len <= bytes.len() as u64 {
                        result.unwrap();
                        bytes[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                    } else {
                        let out_of_bounds = matches!(result, Err(HeapError::OutOfBounds { .. }));
                        prop_assert!(out_of_bounds, "{:?}", result);
                    }
                }
                Op::Grow { object, by } => {
                    let Some(i) = model.pick(object) else { continue };
                    let (id, bytes, _) = &mut model.objects[i];
                    let size = bytes.len() as u64 + by;
                    h.grow(*id, size).unwrap();
                    bytes.resize(size as usize, 0);
                }
                Op::AddName { object, name } => {
                    let Some(i) = model.pick(object) else { continue };
                    let id = model.objects[i].0;
                    let name = format!("name-{name}");
                    match model.names.get(&name) {
                        Some(_) => {
                            let taken = matches!(h.add_name(id, &name), Err(HeapError::AlreadyExists { .. }));
                            prop_assert!(taken);
                        }
                        None => {
                            h.add_name(id, &name).unwrap();
                            model.names.insert(name, id);
                        }
                    }
                }
                Op::Free(object) => {
                    let Some(i) = model.pick(object) else { continue };
                    let (id, _, _) = model.objects.remove(i);
                    h.free(id).unwrap();
                    model.names.retain(|_, o| *o != id);
                    model.blocks.retain(|(p, _)| p.object != id.0);
                    model.freed_blocks.retain(|p| p.object != id.0);
                    freed.push(id);
                }
                Op::Copy(object) => {
                    let Some(i) = model.pick(object) else { continue };
                    let (id, bytes, ty) = model.objects[i].clone();
                    let copy = h.copy(id).unwrap();
                    model.objects.push((copy, bytes, ty));
                }
                Op::AllocType(pointers) => {
                    let offsets: Vec<u64> = (0..u64::from(pointers)).map(|p| 24 * p).collect();
                    let ty = h.alloc_type(&offsets).unwrap();
                    model.types.push((ty, 24 * u64::from(pointers)));
                }
                Op::AttachType { object, ty } => {
                    let Some(i) = model.pick(object) else { continue };
                    if model.types.is_empty() {
                        continue;
                    }
                    let (ty, needs) = model.types[ty % model.types.len()];
                    let (id, bytes, current) = &mut model.objects[i];
                    let result = h.attach_type(*id, ty);
                    if needs <= bytes.len() as u64 {
                        result.unwrap();
                        *current = Some(ty);
                    } else {
                        let refused = matches!(result, Err(HeapError::BadType { .. }));
                        prop_assert!(refused, "{:?}", result);
                    }
                }
                Op::AllocIn { object, size, byte } => {
                    let Some(i) = model.pick(object) else { continue };
                    let id = model.objects[i].0;
                    let p = h.alloc_in(id, size, 8).unwrap();
                    let data = vec![byte; size as usize];
                    h.write_at(id, p.offset, &data).unwrap();
                    let bytes = &mut model.objects[i].1;
                    bytes.resize(h.size(id).unwrap() as usize, 0);
                    bytes[p.offset as usize..(p.offset + size) as usize].copy_from_slice(&data);
                    // A freed block's pointer stays stale even when its
                    // slot is handed out again (a new generation).
                    model.blocks.push((p, size));
                }
                Op::FreeIn(block) => {
                    if model.blocks.is_empty() {
                        continue;
                    }
                    let (p, _) = model.blocks.remove(block % model.blocks.len());
                    h.free_in(p).unwrap();
                    let again = matches!(h.free_in(p), Err(HeapError::Stale { .. }));
                    prop_assert!(again, "a second free_in is stale");
                    model.freed_blocks.push(p);
                }
                Op::Sync => h.sync().unwrap(),
                Op::Reopen => (store, h) = reopen(&sim, store, h),
                Op::SyncCrash { object, offset, byte } => {
                    h.sync().unwrap();
                    if let Some(i) = model.pick(object) {
                        let (id, bytes, _) = &mut model.objects[i];
                        if offset < bytes.len() as u64 {
                            h.write_at(*id, offset, &[byte]).unwrap();
                            bytes[offset as usize] = byte;
                        }
                    }
                    (store, h) = sync_crash(&mut sim, store, h);
                }
            }
            check(&h, &model)?;
            for id in &freed {
                let gone = matches!(h.get(*id), Err(HeapError::NotFound { .. }));
                prop_assert!(gone, "freed object {} still found", id.0);
            }
        }
        // After a last reopen the heap directory holds exactly the live objects.
        (store, h) = reopen(&sim, store, h);
        check(&h, &model)?;
        let mut live: Vec<u64> = model.objects.iter().map(|o| o.0 .0).collect();
        live.sort();
        prop_assert_eq!(store.list_heap_files().unwrap().0, live);
    }
}
