//! `Transaction::create_object_with` leaves what a create then a write at
//! 0 leaves (the same onode, the same bytes, after a crash too), and a
//! small object's record carries its onode once instead of twice.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::meta::{DataLocation, Kind, Onode};
use larder_object::{Durability, Store};

/// Creates an object holding `data` both ways, each in a durable
/// transaction of its own; returns (with, then write) ids and each
/// record's payload bytes.
fn both_ways(store: &Store, data: &[u8]) -> ((u64, u64), (u64, u64)) {
    let payload = || store.log_stats().payload_bytes;
    let before = payload();
    let (with, _) = store
        .transact(&[], Durability::Durable, |t| t.create_object_with(Kind::File, 0o644, (3, 4), |o| o.nlink = 1, data))
        .unwrap();
    let between = payload();
    let (then_write, _) = store
        .transact(&[], Durability::Durable, |t| {
            let id = t.create_object_as(Kind::File, 0o644, 3, 4, |o| o.nlink = 1)?;
            t.write(id, 0, data)?;
            Ok(id)
        })
        .unwrap();
    ((with, then_write), (between - before, payload() - between))
}

/// The fields a create-then-write sets, without the times and the id.
fn shape(o: &Onode) -> (Kind, u64, u32, u32, u32, u32, u64, bool) {
    let inline = matches!(o.location, DataLocation::Inline(_));
    (o.kind, o.size, o.mode, o.uid, o.gid, o.nlink, o.generation, inline)
}

#[test]
fn an_object_created_with_its_bytes_is_one_created_then_written_and_survives_a_crash() {
    let sim = SimStorage::new(29);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let inline_max = creation().inline_max_bytes as usize;
    let sizes = [0, 1, 100, inline_max, inline_max + 1, 3 * 4096 + 5];
    let mut made = Vec::new();
    for &len in &sizes {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let ((with, then_write), (with_bytes, then_write_bytes)) = both_ways(&store, &data);
        let (a, b) = (store.stat(with).unwrap().unwrap(), store.stat(then_write).unwrap().unwrap());
        assert_eq!(shape(&a), shape(&b), "{len} bytes");
        assert_eq!(store.read_to_end(with).unwrap().as_deref(), Some(&data[..]), "{len} bytes");
        if (1..=inline_max).contains(&len) {
            // The create-then-write record holds an empty onode besides the full one.
            assert!(with_bytes < then_write_bytes, "{len} bytes: {with_bytes} against {then_write_bytes}");
        }
        made.push((with, data));
    }
    let rebooted = sim.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = Store::open(storage(&rebooted), Path::new(DIR), common::deterministic()).unwrap();
    for (id, data) in made {
        assert_eq!(store.read_to_end(id).unwrap().as_deref(), Some(&data[..]), "{} bytes after the crash", data.len());
    }
    common::assert_consistent(&store, "after the crash");
}
