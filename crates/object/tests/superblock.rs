//! The superblock survives a torn update at every point, refuses newer
//! formats and unknown features by name, and reports a missing or damaged
//! store clearly. Runs on the simulated storage.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use larder_io::sim::CrashMode;
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};
use larder_object::superblock::{self, SlotState, SLOT_BYTES, SUPERBLOCK_FILE};
use larder_object::{CreationOptions, ObjectError, Superblock};

const DIR: &str = "/store";

fn new_store(sim: &SimStorage) -> Superblock {
    sim.create_dir_all(Path::new(DIR)).unwrap();
    let sb = Superblock::new(CreationOptions::default());
    superblock::create(sim, Path::new(DIR), &sb).unwrap();
    sb
}

#[test]
fn create_then_load_and_update_alternate_slots() {
    let sim = SimStorage::new(1);
    let sb = new_store(&sim);
    let l = superblock::load(&sim, Path::new(DIR)).unwrap();
    assert_eq!((l.superblock.clone(), l.slot), (sb.clone(), 0));
    let l2 = superblock::update(&sim, Path::new(DIR), &l, l.superblock.clone()).unwrap();
    assert_eq!((l2.superblock.generation, l2.slot), (2, 1));
    let l3 = superblock::update(&sim, Path::new(DIR), &l2, l2.superblock.clone()).unwrap();
    assert_eq!((l3.superblock.generation, l3.slot), (3, 0));
    let back = superblock::load(&sim, Path::new(DIR)).unwrap();
    assert_eq!((back.superblock.generation, back.slot, back.superblock.uuid), (3, 0, sb.uuid));
}

/// Under the media model (writes torn only at 512-byte sector boundaries)
/// a slot's fields, all in its first sector, cannot tear; the A/B slots
/// guard media without that guarantee. This checks the store always opens
/// at the old or the new generation, whatever reaches the disk.
#[test]
fn a_torn_update_keeps_the_previous_generation() {
    for seed in 0..64 {
        let sim = SimStorage::new(seed);
        sim.set_unordered_dir_ops(true);
        new_store(&sim);
        let l = superblock::load(&sim, Path::new(DIR)).unwrap();
        // The update's write happens (unsynced); the machine dies at its
        // sync, so the write reaches the disk whole, torn, or not at all.
        sim.crash_after_writes(1);
        let _ = superblock::update(&sim, Path::new(DIR), &l, l.superblock.clone());
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let image = sim.crash_with(mode);
            let got = superblock::load(&image, Path::new(DIR)).unwrap();
            assert!(
                matches!(got.superblock.generation, 1 | 2),
                "seed {seed}: generation {}",
                got.superblock.generation
            );
        }
    }
}

#[test]
fn two_damaged_slots_are_reported_by_name() {
    let sim = SimStorage::new(1);
    new_store(&sim);
    let l = superblock::load(&sim, Path::new(DIR)).unwrap();
    superblock::update(&sim, Path::new(DIR), &l, l.superblock.clone()).unwrap();
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    sim.corrupt(&path, 20, 1).unwrap();
    assert!(superblock::load(&sim, Path::new(DIR)).is_ok(), "one bad slot is a torn update");
    sim.corrupt(&path, SLOT_BYTES as u64 + 20, 1).unwrap();
    let e = superblock::load(&sim, Path::new(DIR)).unwrap_err();
    assert!(matches!(e, ObjectError::Corrupt { .. }) && e.to_string().contains("SUPERBLOCK"), "{e}");
}

/// Writes slot B as `base` changed by `mutate`, one generation newer.
fn patch_slot(sim: &SimStorage, base: &Superblock, mutate: impl Fn(&mut Superblock)) {
    let mut sb = base.clone();
    mutate(&mut sb);
    sb.generation = base.generation + 1;
    let f = sim.open(&Path::new(DIR).join(SUPERBLOCK_FILE), OpenOptions::WRITE).unwrap();
    write_all_at(&*f, &sb.encode(), SLOT_BYTES as u64).unwrap();
}

#[test]
fn unknown_incompatible_and_read_only_features_are_refused() {
    let sim = SimStorage::new(1);
    let base = new_store(&sim);
    patch_slot(&sim, &base, |sb| sb.incompat = 1 << 7);
    let e = superblock::load(&sim, Path::new(DIR)).unwrap_err();
    assert!(matches!(e, ObjectError::UnknownFeature { class: "incompatible", flags: 0x80, .. }), "{e}");
    patch_slot(&sim, &base, |sb| sb.ro_compat = 2);
    let e = superblock::load(&sim, Path::new(DIR)).unwrap_err();
    assert!(matches!(e, ObjectError::UnknownFeature { class: "read-only compatible", .. }), "{e}");
    // Unknown compatible features are ignored.
    patch_slot(&sim, &base, |sb| sb.compat = 4);
    assert_eq!(superblock::load(&sim, Path::new(DIR)).unwrap().superblock.compat, 4);
}

/// A slot of `sb` with `version`, its checksum recomputed: a real newer
/// format, not damage.
fn sealed_with_version(sb: &Superblock, version: u32) -> Vec<u8> {
    let mut slot = sb.encode();
    slot[8..12].copy_from_slice(&version.to_le_bytes());
    let length = u32::from_le_bytes(slot[12..16].try_into().unwrap()) as usize;
    let c = crc32c::crc32c(&slot[..length - 4]);
    slot[length - 4..length].copy_from_slice(&c.to_le_bytes());
    slot
}

#[test]
fn a_newer_version_is_refused_even_if_the_other_slot_is_valid() {
    let sim = SimStorage::new(1);
    let sb = new_store(&sim);
    let f = sim.open(&Path::new(DIR).join(SUPERBLOCK_FILE), OpenOptions::WRITE).unwrap();
    write_all_at(&*f, &sealed_with_version(&sb, 2), SLOT_BYTES as u64).unwrap();
    let e = superblock::load(&sim, Path::new(DIR)).unwrap_err();
    assert!(matches!(e, ObjectError::NewerVersion { found: 2, supported: 1, .. }), "{e}");
    assert!(e.to_string().contains("SUPERBLOCK"));
}

/// The checksum is checked before the version: a flipped version byte
/// (offset 8) or magic byte is damage to one copy, and the other is used.
#[test]
fn a_damaged_version_or_magic_falls_back_to_the_other_copy() {
    let sim = SimStorage::new(1);
    let sb = new_store(&sim);
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    for offset in [0u64, 4, 8, 9, 12, 40] {
        sim.corrupt(&path, offset, 0x02).unwrap();
        let l = superblock::load(&sim, Path::new(DIR)).unwrap();
        assert_eq!((l.superblock.clone(), l.slot), (sb.clone(), 1), "offset {offset}");
        sim.corrupt(&path, offset, 0x02).unwrap();
    }
}

/// Both slots hold the current copy from creation on, so one flipped byte
/// anywhere in the file leaves the store readable, and `inspect` names
/// the slot hit.
#[test]
fn every_single_flipped_byte_is_survived_and_named() {
    let sim = SimStorage::new(1);
    let sb = new_store(&sim);
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    let copies = superblock::inspect(&sim, Path::new(DIR)).unwrap();
    assert_eq!(copies.slots, [SlotState::Current, SlotState::Current]);
    for offset in 0..2 * SLOT_BYTES as u64 {
        sim.corrupt(&path, offset, 0x10).unwrap();
        let l = superblock::load(&sim, Path::new(DIR)).unwrap();
        assert_eq!(l.superblock, sb, "offset {offset}");
        let hit = (offset / SLOT_BYTES as u64) as usize;
        let copies = superblock::inspect(&sim, Path::new(DIR)).unwrap();
        assert!(matches!(copies.slots[hit], SlotState::Damaged { .. }), "offset {offset}: {:?}", copies.slots);
        assert_eq!(copies.slots[1 - hit], SlotState::Current, "offset {offset}");
        sim.corrupt(&path, offset, 0x10).unwrap();
    }
}

#[test]
fn repair_rewrites_a_damaged_or_empty_slot_and_nothing_else() {
    let sim = SimStorage::new(1);
    let sb = new_store(&sim);
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    assert!(superblock::repair(&sim, Path::new(DIR), &sb).unwrap().is_empty(), "a clean superblock needs nothing");
    sim.corrupt(&path, 40, 0x01).unwrap();
    let rewritten = superblock::repair(&sim, Path::new(DIR), &sb).unwrap();
    assert!(matches!(rewritten.as_slice(), [(0, SlotState::Damaged { .. })]), "{rewritten:?}");
    let copies = superblock::inspect(&sim, Path::new(DIR)).unwrap();
    assert_eq!(copies.slots, [SlotState::Current, SlotState::Current]);
    // A store made before both slots were written: slot B is zeros.
    let f = sim.open(&path, OpenOptions::WRITE).unwrap();
    write_all_at(&*f, &[0u8; SLOT_BYTES], SLOT_BYTES as u64).unwrap();
    assert_eq!(superblock::load(&sim, Path::new(DIR)).unwrap().superblock, sb, "the old layout still opens");
    assert_eq!(superblock::inspect(&sim, Path::new(DIR)).unwrap().slots[1], SlotState::Empty);
    assert_eq!(superblock::repair(&sim, Path::new(DIR), &sb).unwrap(), [(1, SlotState::Empty)]);
    // The repair is durable: a crash keeps it.
    let image = sim.crash_with(CrashMode::DropAllPending);
    let copies = superblock::inspect(&image, Path::new(DIR)).unwrap();
    assert_eq!(copies.slots, [SlotState::Current, SlotState::Current]);
}

/// An update cut between its two writes leaves the new copy in one slot
/// and the previous generation in the other: open takes the new one and
/// `inspect` calls the other stale.
#[test]
fn an_update_cut_between_its_writes_leaves_a_stale_copy() {
    let sim = SimStorage::new(3);
    new_store(&sim);
    let l = superblock::load(&sim, Path::new(DIR)).unwrap();
    // The first write and its sync complete; the machine dies at the second write.
    sim.crash_after_writes(2);
    let _ = superblock::update(&sim, Path::new(DIR), &l, l.superblock.clone());
    let image = sim.crash_with(CrashMode::DropAllPending);
    let copies = superblock::inspect(&image, Path::new(DIR)).unwrap();
    assert_eq!(copies.current.generation, 2);
    assert_eq!(copies.slots, [SlotState::Stale { generation: 1 }, SlotState::Current]);
    superblock::repair(&image, Path::new(DIR), &l.superblock).unwrap();
    let copies = superblock::inspect(&image, Path::new(DIR)).unwrap();
    assert_eq!(copies.slots, [SlotState::Current, SlotState::Current]);
}

#[test]
fn missing_and_existing_stores_are_named() {
    let sim = SimStorage::new(1);
    sim.create_dir_all(Path::new(DIR)).unwrap();
    let e = superblock::load(&sim, Path::new(DIR)).unwrap_err();
    assert!(matches!(e, ObjectError::NotAStore { .. }) && e.to_string().contains("larder init"), "{e}");
    new_store(&sim);
    let e = superblock::create(&sim, Path::new(DIR), &Superblock::new(CreationOptions::default())).unwrap_err();
    assert!(matches!(e, ObjectError::AlreadyExists { .. }), "{e}");
}
