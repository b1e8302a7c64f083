//! Deep clone of random graphs of objects with cycles, self-loops, shared
//! nodes and null pointers: the copy is isomorphic to what is reachable
//! from the root, every copy has a fresh id, each object is copied once,
//! and a clone that meets a bad pointer or offset leaves nothing behind.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap, VecDeque};

use larder_heap::{Heap, HeapError, ObjectId, PPtr, TypeId};
use proptest::prelude::*;

use common::sim_heap;

/// Pointer slots per node (a type per count); the payload follows them.
const MAX_SLOTS: usize = 3;

/// A graph: per node, its slots' targets (`None`: null) and pointer offsets.
#[derive(Clone, Debug)]
struct Graph {
    edges: Vec<Vec<Option<usize>>>,
}

fn graphs() -> impl Strategy<Value = Graph> {
    (1usize..10).prop_flat_map(|n| {
        proptest::collection::vec(proptest::collection::vec(proptest::option::weighted(0.8, 0..n), 0..=MAX_SLOTS), n)
            .prop_map(|edges| Graph { edges })
    })
}

/// Builds the graph's objects: node i has its slots, then its index (u64).
fn build(h: &Heap, graph: &Graph, types: &[TypeId]) -> Vec<ObjectId> {
    let ids: Vec<ObjectId> = graph.edges.iter().map(|slots| h.alloc(24 * slots.len() as u64 + 8).unwrap()).collect();
    for (i, slots) in graph.edges.iter().enumerate() {
        for (s, target) in slots.iter().enumerate() {
            let p = target.map_or(PPtr::<()>::NULL, |t| PPtr::new(ids[t].0, 0, 0));
            h.write_at(ids[i], 24 * s as u64, &p.to_bytes()).unwrap();
        }
        h.write_at(ids[i], 24 * slots.len() as u64, &(i as u64).to_le_bytes()).unwrap();
        h.attach_type(ids[i], types[slots.len()]).unwrap();
    }
    ids
}

/// Reads node `id`'s pointers (via its type) and payload.
fn read_node(h: &Heap, id: ObjectId) -> (Vec<PPtr<()>>, u64) {
    let offsets = match h.type_of(id).unwrap() {
        Some(t) => h.type_offsets(t).unwrap(),
        None => Vec::new(),
    };
    let mut pointers = Vec::new();
    for offset in &offsets {
        let mut raw = [0u8; 24];
        h.read_at(id, *offset, &mut raw).unwrap();
        pointers.push(PPtr::from_bytes(&raw));
    }
    let mut payload = [0u8; 8];
    h.read_at(id, 24 * offsets.len() as u64, &mut payload).unwrap();
    (pointers, u64::from_le_bytes(payload))
}

fn types(h: &Heap) -> Vec<TypeId> {
    (0..=MAX_SLOTS).map(|k| h.alloc_type(&(0..k as u64).map(|s| 24 * s).collect::<Vec<_>>()).unwrap()).collect()
}

fn reachable(graph: &Graph) -> BTreeSet<usize> {
    let mut seen = BTreeSet::from([0]);
    let mut queue = VecDeque::from([0]);
    while let Some(n) = queue.pop_front() {
        for t in graph.edges[n].iter().flatten() {
            if seen.insert(*t) {
                queue.push_back(*t);
            }
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn clone_is_isomorphic_with_fresh_ids(graph in graphs(), seed in 0u64..1000) {
        let (_sim, store, h) = sim_heap(seed);
        let types = types(&h);
        let ids = build(&h, &graph, &types);
        let before = store.list_heap_files().unwrap().0;
        let copy_root = h.clone(ids[0]).unwrap();
        let after = store.list_heap_files().unwrap().0;
        let reach = reachable(&graph);
        prop_assert_eq!(after.len() - before.len(), reach.len(), "each reachable object copied once");

        // Walk the copy beside the original: a bijection, payloads equal.
        let original: BTreeSet<u64> = ids.iter().map(|i| i.0).collect();
        let mut copy_of: HashMap<usize, u64> = HashMap::from([(0, copy_root.0)]);
        let mut queue = VecDeque::from([0usize]);
        while let Some(n) = queue.pop_front() {
            let copy = copy_of[&n];
            prop_assert!(!original.contains(&copy), "a fresh id");
            let (pointers, payload) = read_node(&h, ObjectId(copy));
            prop_assert_eq!(payload, n as u64);
            prop_assert_eq!(pointers.len(), graph.edges[n].len());
            for (p, target) in pointers.iter().zip(&graph.edges[n]) {
                match target {
                    None => prop_assert!(p.is_null()),
                    Some(t) => match copy_of.get(t) {
                        Some(c) => prop_assert_eq!(p.object, *c, "shared nodes and cycles stay shared"),
                        None => {
                            prop_assert!(!original.contains(&p.object));
                            copy_of.insert(*t, p.object);
                            queue.push_back(*t);
                        }
                    },
                }
            }
        }
        prop_assert_eq!(copy_of.len(), reach.len());
        let distinct: BTreeSet<u64> = copy_of.values().copied().collect();
        prop_assert_eq!(distinct.len(), reach.len(), "one copy per object");
        // The originals are untouched.
        for (i, id) in ids.iter().enumerate() {
            let (pointers, payload) = read_node(&h, *id);
            prop_assert_eq!(payload, i as u64);
            for (p, t) in pointers.iter().zip(&graph.edges[i]) {
                prop_assert_eq!(p.object, t.map_or(0, |t| ids[t].0));
            }
        }
    }

    #[test]
    fn clone_with_a_bad_pointer_leaves_nothing(graph in graphs(), victim in 0usize..10, seed in 0u64..1000) {
        let (_sim, store, h) = sim_heap(seed);
        let types = types(&h);
        let ids = build(&h, &graph, &types);
        let reach: Vec<usize> = reachable(&graph).into_iter().collect();
        let node = reach[victim % reach.len()];
        prop_assume!(!graph.edges[node].is_empty());
        // Its first slot now points to an object that does not exist.
        h.write_at(ids[node], 0, &PPtr::<()>::new(u64::MAX - 1, 0, 0).to_bytes()).unwrap();
        let before = (store.list_heap_files().unwrap(), store.heap_objects().unwrap().len());
        let result = h.clone(ids[0]);
        prop_assert!(matches!(result, Err(HeapError::BadPointer { .. })), "{:?}", result);
        prop_assert_eq!((store.list_heap_files().unwrap(), store.heap_objects().unwrap().len()), before);
    }
}

#[test]
fn a_type_offset_past_the_object_is_refused_and_leaves_nothing() {
    let (_sim, store, h) = sim_heap(1);
    let t = h.alloc_type(&[0, 24]).unwrap();
    let a = h.alloc(48).unwrap();
    let b = h.alloc(8).unwrap();
    h.write_at(a, 0, &PPtr::<()>::new(b.0, 0, 0).to_bytes()).unwrap();
    h.attach_type(a, t).unwrap();
    // b claims a type its 8 bytes cannot hold: refused at attach...
    assert!(matches!(h.attach_type(b, t), Err(HeapError::BadType { .. })));
    // ...and a pointer past its target's size is refused by clone.
    h.write_at(a, 24, &PPtr::<()>::new(b.0, 9, 0).to_bytes()).unwrap();
    let before = store.list_heap_files().unwrap();
    assert!(matches!(h.clone(a), Err(HeapError::BadPointer { .. })));
    assert_eq!(store.list_heap_files().unwrap(), before);
    // Fixed, it clones: a and b copied once each.
    h.write_at(a, 24, &PPtr::<()>::new(b.0, 8, 0).to_bytes()).unwrap();
    let c = h.clone(a).unwrap();
    assert_eq!(store.list_heap_files().unwrap().0.len(), before.0.len() + 2);
    let mut raw = [0u8; 24];
    h.read_at(c, 0, &mut raw).unwrap();
    let first = PPtr::<()>::from_bytes(&raw);
    h.read_at(c, 24, &mut raw).unwrap();
    let second = PPtr::<()>::from_bytes(&raw);
    assert_eq!(first.object, second.object, "both fields point to the one copy of b");
    assert_ne!(first.object, b.0);
    assert_eq!(second.offset, 8, "offsets are kept");
}
