//! Values of the object layer's maps: round trips, the byte layouts of
//! docs/format.md section 13, refusals with their reasons, and damage:
//! every truncation and every bit flip of an encoded value is either
//! refused or decodes to a value that re-encodes to the damaged bytes
//! (never a silent mis-parse).

#![allow(clippy::unwrap_used)]

use larder_object::meta::onode::{FLAG_APPEND_ONLY, FLAG_NO_ATIME, KNOWN_FLAGS, ONODE_FIXED_BYTES};
use larder_object::meta::{
    block_crcs, decode_counter, verify_block, DataLocation, Dentry, DirInfo, Extent, ExtentMapEntry, Kind, MetaLimits,
    Onode, Orphan, OrphanReason, Timestamp, XattrValue, MAX_OBJECT_BYTES,
};
use larder_object::{CreationOptions, ObjectError};
use proptest::prelude::*;

/// Limits writing onodes in the fixed layout (version 1).
const LIMITS: MetaLimits = MetaLimits { inline_max_bytes: 64, container_bytes: 1 << 20, compact_onodes: false };
/// The same, writing the compact layout (version 2).
const COMPACT: MetaLimits = MetaLimits { compact_onodes: true, ..LIMITS };

/// Outcome of damaging a value in every way: how many damaged forms were
/// refused and how many accepted (each accepted one re-encoded exactly).
#[derive(Debug, Default)]
struct Damage {
    truncations_accepted: usize,
    flips_refused: usize,
    flips_accepted: usize,
}

/// Truncates `good` to every shorter length, flips every bit and appends
/// a byte; `round_trip` decodes and re-encodes. Each damaged input must be
/// refused or re-encode to itself.
fn damage(good: &[u8], round_trip: impl Fn(&[u8]) -> Result<Vec<u8>, ObjectError>) -> Damage {
    let mut d = Damage::default();
    assert_eq!(round_trip(good).unwrap(), good, "the undamaged value must round-trip");
    for n in 0..good.len() {
        if let Ok(re) = round_trip(&good[..n]) {
            assert_eq!(re, &good[..n], "truncation to {n} mis-parsed");
            d.truncations_accepted += 1;
        }
    }
    for bit in 0..good.len() * 8 {
        let mut x = good.to_vec();
        x[bit / 8] ^= 1 << (bit % 8);
        match round_trip(&x) {
            Ok(re) => {
                assert_eq!(re, x, "flip of bit {bit} mis-parsed");
                d.flips_accepted += 1;
            }
            Err(_) => d.flips_refused += 1,
        }
    }
    for extra in [0u8, 0xFF] {
        let x = [good, &[extra][..]].concat();
        if let Ok(re) = round_trip(&x) {
            assert_eq!(re, x, "appended byte mis-parsed");
        }
    }
    d
}

/// Decodes and re-encodes in the layout of the version byte.
fn onode_rt(b: &[u8]) -> Result<Vec<u8>, ObjectError> {
    let limits = if b.first() == Some(&1) { LIMITS } else { COMPACT };
    Onode::decode(b, &limits)?.encode(&limits)
}

fn entry_rt(b: &[u8]) -> Result<Vec<u8>, ObjectError> {
    ExtentMapEntry::decode(b, &LIMITS)?.encode(&LIMITS)
}

fn ts(secs: i64, nanos: u32) -> Timestamp {
    Timestamp { secs, nanos }
}

fn file_onode() -> Onode {
    Onode {
        kind: Kind::File,
        flags: FLAG_NO_ATIME,
        size: 0x1234,
        mode: 0o100_644,
        uid: 1000,
        gid: 100,
        nlink: 1,
        generation: 7,
        atime: ts(1, 2),
        mtime: ts(3, 4),
        ctime: ts(5, 6),
        btime: ts(-1, 999_999_999),
        rdev: 0,
        location: DataLocation::Extents,
        dir: None,
    }
}

fn dir_onode() -> Onode {
    Onode {
        kind: Kind::Directory,
        size: 0,
        mode: 0o040_755,
        nlink: 2,
        location: DataLocation::Inline(vec![]),
        dir: Some(DirInfo { parent: 1, entries: 3 }),
        flags: 0,
        ..file_onode()
    }
}

#[test]
fn onode_layout_matches_format_md() {
    let b = file_onode().encode(&LIMITS).unwrap();
    assert_eq!(b.len(), ONODE_FIXED_BYTES);
    assert_eq!(&b[0..3], &[1, 1, 2], "version, kind File, location Extents");
    assert_eq!(&b[3..7], &FLAG_NO_ATIME.to_le_bytes());
    assert_eq!(&b[7..15], &0x1234u64.to_le_bytes());
    assert_eq!(&b[15..19], &0o100_644u32.to_le_bytes());
    assert_eq!(&b[19..23], &1000u32.to_le_bytes());
    assert_eq!(&b[23..27], &100u32.to_le_bytes());
    assert_eq!(&b[27..31], &1u32.to_le_bytes());
    assert_eq!(&b[31..39], &7u64.to_le_bytes());
    assert_eq!(&b[39..47], &1i64.to_le_bytes());
    assert_eq!(&b[47..51], &2u32.to_le_bytes());
    assert_eq!(&b[51..63], &[3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0]);
    assert_eq!(&b[63..75], &[5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0]);
    assert_eq!(&b[75..83], &(-1i64).to_le_bytes());
    assert_eq!(&b[83..87], &999_999_999u32.to_le_bytes());
    assert_eq!(&b[87..95], &[0; 8]);

    let d = dir_onode().encode(&LIMITS).unwrap();
    assert_eq!(d.len(), ONODE_FIXED_BYTES + 16);
    assert_eq!(&d[0..3], &[1, 2, 1], "version, kind Directory, location Inline");
    assert_eq!(&d[95..103], &1u64.to_le_bytes());
    assert_eq!(&d[103..111], &3u64.to_le_bytes());

    let inline = Onode { size: 3, location: DataLocation::Inline(b"abc".to_vec()), ..file_onode() };
    let i = inline.encode(&LIMITS).unwrap();
    assert_eq!((i[2], &i[95..]), (1, &b"abc"[..]));

    let heap = Onode { location: DataLocation::OwnFile { file: 0x55 }, ..file_onode() };
    let h = heap.encode(&LIMITS).unwrap();
    assert_eq!((h[2], &h[95..]), (3, &0x55u64.to_le_bytes()[..]));

    for o in [file_onode(), dir_onode(), inline, heap] {
        assert_eq!(Onode::decode(&o.encode(&LIMITS).unwrap(), &LIMITS).unwrap(), o);
    }
}

#[test]
fn onode_decode_refusals_say_why() {
    let good = file_onode().encode(&LIMITS).unwrap();
    let with = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    let e = Onode::decode(&with(0, &[3]), &LIMITS).unwrap_err();
    assert!(matches!(e, ObjectError::NewerRecord { record: "onode", found: 3, supported: 2 }), "{e}");
    assert!(e.to_string().contains("upgrade larder"), "{e}");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "needs 1 bytes"),
        (with(0, &[0]), "version 0"),
        (with(1, &[0]), "unknown kind 0"),
        (with(1, &[8]), "unknown kind 8"),
        (with(2, &[0]), "unknown data location tag 0"),
        (with(2, &[4]), "unknown data location tag 4"),
        (with(3, &[0x20]), "unknown flags 0x20"),
        (with(7, &(MAX_OBJECT_BYTES + 1).to_le_bytes()), "largest object"),
        (with(15, &0o040_644u32.to_le_bytes()), "type bits of another kind"),
        (with(15, &0o1_100_644u32.to_le_bytes()), "beyond type and permissions"),
        (with(47, &1_000_000_000u32.to_le_bytes()), "atime"),
        (with(87, &[1]), "device number"),
        ([&good[..], &[0][..]].concat(), "trailing"),
        (good[..94].to_vec(), "rdev: needs 8 bytes"),
        // A file onode marked Directory lacks the directory fields.
        (with(1, &[2]), "directory parent"),
    ];
    for (bytes, what) in cases {
        let e = Onode::decode(&bytes, &LIMITS).unwrap_err();
        assert!(matches!(e, ObjectError::BadRecord { record: "onode", .. }), "{e}");
        assert!(e.to_string().contains(what), "{e} (expected {what:?})");
    }

    // Inline bytes above the store's threshold, read with a smaller one.
    let big = Onode { size: 64, location: DataLocation::Inline(vec![7; 64]), ..file_onode() };
    let b = big.encode(&LIMITS).unwrap();
    let small = MetaLimits { inline_max_bytes: 63, ..LIMITS };
    let e = Onode::decode(&b, &small).unwrap_err().to_string();
    assert!(e.contains("inline_max_bytes"), "{e}");
    // A huge inline size is refused before anything is allocated.
    let mut h = b.clone();
    h[7..15].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Onode::decode(&h, &LIMITS).unwrap_err().to_string().contains("inline_max_bytes"));

    let mut d = dir_onode().encode(&LIMITS).unwrap();
    d[95..103].copy_from_slice(&0u64.to_le_bytes());
    assert!(Onode::decode(&d, &LIMITS).unwrap_err().to_string().contains("parent id is 0"));
}

#[test]
fn onode_encode_refuses_what_no_reader_accepts() {
    let cases: Vec<(Onode, &str)> = vec![
        (Onode { mode: 0o040_644, ..file_onode() }, "type bits"),
        (Onode { flags: 1 << 31, ..file_onode() }, "unknown flags"),
        (Onode { size: 5, location: DataLocation::Inline(vec![1; 4]), ..file_onode() }, "4 inline bytes for size 5"),
        (Onode { size: 65, location: DataLocation::Inline(vec![1; 65]), ..file_onode() }, "inline_max_bytes"),
        (Onode { dir: None, ..dir_onode() }, "without parent"),
        (Onode { dir: Some(DirInfo { parent: 1, entries: 0 }), ..file_onode() }, "directory fields"),
        (Onode { location: DataLocation::Extents, ..dir_onode() }, "no bytes"),
        (Onode { size: 1, location: DataLocation::Inline(vec![1]), ..dir_onode() }, "no bytes"),
        (
            Onode { kind: Kind::Symlink, mode: 0o120_777, location: DataLocation::OwnFile { file: 1 }, ..file_onode() },
            "file of its own",
        ),
        (Onode { rdev: 5, ..file_onode() }, "device number"),
        (Onode { mtime: ts(0, 1_000_000_000), ..file_onode() }, "mtime"),
        (Onode { size: u64::MAX, ..file_onode() }, "largest object"),
    ];
    for (o, what) in cases {
        let e = o.encode(&LIMITS).unwrap_err();
        assert!(matches!(e, ObjectError::InvalidRecord { record: "onode", .. }), "{e}");
        assert!(e.to_string().contains(what), "{e} (expected {what:?})");
    }
    let dev = Onode { kind: Kind::CharDevice, mode: 0o020_600, rdev: 0x0501, ..dir_onode() };
    assert!(dev.encode(&LIMITS).is_err(), "devices have no directory fields");
    let dev = Onode { dir: None, ..dev };
    assert_eq!(Onode::decode(&dev.encode(&LIMITS).unwrap(), &LIMITS).unwrap(), dev);
}

#[test]
fn onode_damage_is_refused_or_exact() {
    for o in [
        file_onode(),
        dir_onode(),
        Onode { size: 3, location: DataLocation::Inline(b"abc".to_vec()), ..file_onode() },
        Onode { location: DataLocation::OwnFile { file: 9 }, ..file_onode() },
    ] {
        for limits in [LIMITS, COMPACT] {
            let d = damage(&o.encode(&limits).unwrap(), onode_rt);
            // Every field is fixed-width, a terminated varint or
            // length-checked: no truncation is ever a valid onode.
            assert_eq!(d.truncations_accepted, 0, "{o:?}");
            assert!(d.flips_refused > 0 && d.flips_accepted > 0, "{d:?}");
        }
    }
}

#[test]
fn attribute_decodes_leave_inline_bytes_at_the_end_and_refuse_what_decodes_refuse() {
    let inline = Onode { size: 40, location: DataLocation::Inline((0..40).collect()), ..file_onode() };
    for o in [file_onode(), dir_onode(), inline, Onode { location: DataLocation::OwnFile { file: 9 }, ..file_onode() }]
    {
        for limits in [LIMITS, COMPACT] {
            // The onode's bytes taken from the encoding's tail, as a reader
            // of an attribute decode takes them.
            let rt = |b: &[u8]| -> Result<Vec<u8>, ObjectError> {
                let (mut onode, n) = Onode::decode_attributes(b, &limits)?;
                if let Some(n) = n {
                    assert!(matches!(&onode.location, DataLocation::Inline(v) if v.is_empty()), "bytes left out");
                    onode.location = DataLocation::Inline(b[b.len() - n..].to_vec());
                } else {
                    assert!(!matches!(onode.location, DataLocation::Inline(_)));
                }
                assert_eq!(onode, Onode::decode(b, &limits).unwrap(), "the same onode as a whole decode");
                onode.encode(&limits)
            };
            let good = o.encode(&limits).unwrap();
            let left = damage(&good, rt);
            let whole = damage(&good, |b| Onode::decode(b, &limits)?.encode(&limits));
            assert_eq!(
                (left.truncations_accepted, left.flips_refused, left.flips_accepted),
                (whole.truncations_accepted, whole.flips_refused, whole.flips_accepted),
                "{o:?}"
            );
        }
    }
}

#[test]
fn compact_onodes_are_small_and_read_with_the_fixed_ones() {
    let now = ts(1_764_000_000, 123_456_789);
    let later = ts(1_764_000_000, 123_999_000);
    // A file as a KV put leaves it: born, then written a moment later.
    let kv_file = Onode {
        flags: 0,
        size: 1024,
        uid: 1000,
        gid: 1000,
        generation: 2,
        atime: now,
        mtime: later,
        ctime: later,
        btime: now,
        location: DataLocation::Inline(vec![7; 1024]),
        ..file_onode()
    };
    let compact = kv_file.encode(&MetaLimits { inline_max_bytes: 4096, ..COMPACT }).unwrap();
    let fixed = kv_file.encode(&MetaLimits { inline_max_bytes: 4096, ..LIMITS }).unwrap();
    assert_eq!(fixed.len() - 1024, ONODE_FIXED_BYTES);
    assert!(compact.len() - 1024 <= 36, "{} bytes of attributes", compact.len() - 1024);
    assert_eq!(compact[0], 2);
    // Either layout decodes under either setting.
    for limits in [LIMITS, COMPACT] {
        let limits = MetaLimits { inline_max_bytes: 4096, ..limits };
        assert_eq!(Onode::decode(&compact, &limits).unwrap(), kv_file);
        assert_eq!(Onode::decode(&fixed, &limits).unwrap(), kv_file);
    }
    // Every field and every optional part round-trips: flags, a device
    // number, times before btime and whole times far apart.
    let dev = Onode { kind: Kind::CharDevice, mode: 0o020_600, rdev: 0x0501, dir: None, ..dir_onode() };
    let apart = Onode { atime: ts(i64::MIN / 2, 0), mtime: ts(i64::MAX / 2, 1), ..file_onode() };
    let before = Onode { atime: ts(-5, 0), mtime: ts(-3, 999_999_999), ..file_onode() };
    let heap = Onode { location: DataLocation::OwnFile { file: 1 << 50 }, ..file_onode() };
    for o in [file_onode(), dir_onode(), dev, apart, before, heap] {
        let b = o.encode(&COMPACT).unwrap();
        assert_eq!(Onode::decode(&b, &COMPACT).unwrap(), o);
    }
}

#[test]
fn compact_onodes_are_canonical() {
    // file_onode in the compact layout: version 2, kind, location, present
    // (flags), size 0x1234 as a 2-byte varint, mode (3 bytes), uid 1000
    // (2), gid 100 (1), nlink (1), generation (1), flags (1), btime (12),
    // three time differences.
    let good = file_onode().encode(&COMPACT).unwrap();
    assert_eq!(&good[..6], &[2, 1, 2, 1, 0xB4, 0x24], "version, kind, location, present, size varint");
    let refused = |b: &[u8], why: &str| {
        let e = Onode::decode(b, &COMPACT).unwrap_err();
        assert!(e.to_string().contains(why), "{e} (wanted {why:?})");
    };
    // A size varint padded to three bytes.
    let mut padded = good.clone();
    padded.splice(4..6, [0xB4, 0xA4, 0x00]);
    refused(&padded, "shortest form");
    // Flags said present but zero; unknown present bits.
    let mut zero_flags = good.clone();
    let flags_at = 4 + 2 + 3 + 2 + 1 + 1 + 1;
    zero_flags[flags_at] = 0;
    refused(&zero_flags, "present but zero");
    let mut unknown = good.clone();
    unknown[3] |= 0x80;
    refused(&unknown, "unknown present-field bits");
    // Whole times where differences fit.
    let o = file_onode();
    let mut whole = good[..flags_at + 1].to_vec();
    whole[3] |= 1 << 2;
    for t in [o.btime, o.atime, o.mtime, o.ctime] {
        whole.extend_from_slice(&t.secs.to_le_bytes());
        whole.extend_from_slice(&t.nanos.to_le_bytes());
    }
    refused(&whole, "whole timestamps");
    let mut trailing = good.clone();
    trailing.push(0);
    refused(&trailing, "trailing");
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| Timestamp { secs, nanos })
}

prop_compose! {
    fn any_onode()(
        kind in proptest::sample::select(Kind::ALL.to_vec()),
        perm in 0u32..=0o7777,
        flags in any::<u32>(),
        ids in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()),
        times in (timestamp(), timestamp(), timestamp(), timestamp()),
        rdev in any::<u64>(),
        where_ in 0u8..3,
        data in proptest::collection::vec(any::<u8>(), 0..=64),
        size in 0u64..=MAX_OBJECT_BYTES,
        file in any::<u64>(),
        dir in (1u64.., any::<u64>()),
    ) -> Onode {
        let has_bytes = matches!(kind, Kind::File | Kind::Symlink);
        let (size, location) = match where_ {
            _ if !has_bytes => (0, DataLocation::Inline(vec![])),
            0 => (data.len() as u64, DataLocation::Inline(data)),
            2 if kind == Kind::File => (size, DataLocation::OwnFile { file }),
            _ => (size, DataLocation::Extents),
        };
        Onode {
            kind,
            flags: flags & KNOWN_FLAGS,
            size,
            mode: kind.mode_bits() | perm,
            uid: ids.0,
            gid: ids.1,
            nlink: ids.2,
            generation: ids.3,
            atime: times.0,
            mtime: times.1,
            ctime: times.2,
            btime: times.3,
            rdev: if matches!(kind, Kind::CharDevice | Kind::BlockDevice) { rdev } else { 0 },
            location,
            dir: (kind == Kind::Directory).then_some(DirInfo { parent: dir.0, entries: dir.1 }),
        }
    }
}

prop_compose! {
    fn any_entry()(start in 0u64..256, blocks in 1u64..=16, container in any::<u64>(), short in 0u64..4096, seed in any::<u32>(), unwritten in any::<bool>()) -> ExtentMapEntry {
        let blocks = blocks.min(256 - start);
        let len = blocks * 4096;
        let crcs = if unwritten { Vec::new() } else { (0..blocks as u32).map(|i| seed.wrapping_mul(2_654_435_761).wrapping_add(i)).collect() };
        ExtentMapEntry {
            extent: Extent { container, offset: start * 4096, len },
            logical_len: len - short,
            crcs,
            unwritten,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn onodes_round_trip_and_resist_damage(o in any_onode(), compact in any::<bool>()) {
        let limits = if compact { COMPACT } else { LIMITS };
        let b = o.encode(&limits).unwrap();
        prop_assert_eq!(&Onode::decode(&b, &limits).unwrap(), &o);
        prop_assert_eq!(damage(&b, onode_rt).truncations_accepted, 0);
    }

    #[test]
    fn fmap_entries_round_trip_and_resist_damage(e in any_entry()) {
        let b = e.encode(&LIMITS).unwrap();
        prop_assert_eq!(&ExtentMapEntry::decode(&b, &LIMITS).unwrap(), &e);
        prop_assert_eq!(damage(&b, entry_rt).truncations_accepted, 0);
    }

    #[test]
    fn block_crcs_pad_the_last_block_with_zeros(data in proptest::collection::vec(any::<u8>(), 0..20_000)) {
        let crcs = block_crcs(&data);
        prop_assert_eq!(crcs.len(), data.len().div_ceil(4096));
        let mut padded = data.clone();
        padded.resize(crcs.len() * 4096, 0);
        for (i, &c) in crcs.iter().enumerate() {
            prop_assert_eq!(c, crc32c::crc32c(&padded[i * 4096..(i + 1) * 4096]));
            prop_assert!(verify_block(&data, i, c));
            prop_assert!(verify_block(&padded, i, c));
            prop_assert!(!verify_block(&data, i, c ^ 1));
        }
        prop_assert!(!verify_block(&data, crcs.len(), 0));
        prop_assert!(!verify_block(&data, usize::MAX, 0));
    }
}

#[test]
fn fmap_entry_layout_and_refusals() {
    let extent = Extent { container: 3, offset: 8192, len: 8192 };
    let data = vec![0xAB; 5000];
    let e = ExtentMapEntry::for_data(extent, &data, &LIMITS).unwrap();
    assert_eq!(e.logical_len, 5000);
    assert_eq!(e.crcs, block_crcs(&data));
    let b = e.encode(&LIMITS).unwrap();
    assert_eq!(b.len(), 33 + 8);
    assert_eq!(b[0], 1);
    assert_eq!(&b[1..9], &5000u64.to_le_bytes());
    assert_eq!(&b[9..33], &extent.encode());
    assert_eq!(&b[33..37], &e.crcs[0].to_le_bytes());
    assert_eq!(&b[37..41], &e.crcs[1].to_le_bytes());
    assert_eq!(ExtentMapEntry::decode(&b, &LIMITS).unwrap(), e);

    // A stale byte after the logical end of the last block fails its crc.
    let mut on_disk = data.clone();
    on_disk.resize(8192, 0);
    assert!(verify_block(&on_disk, 1, e.crcs[1]));
    on_disk[8000] = 1;
    assert!(!verify_block(&on_disk, 1, e.crcs[1]));

    let with = |at: usize, v: &[u8]| {
        let mut x = b.clone();
        x[at..at + v.len()].copy_from_slice(v);
        x
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "needs 1 bytes"),
        (with(0, &[0]), "tag 0"),
        (with(0, &[3]), "unknown entry tag 3"),
        (with(0, &[2]), "bytes of checksums for 0 blocks"),
        (with(1, &0u64.to_le_bytes()), "logical length 0"),
        (with(1, &4096u64.to_le_bytes()), "does not fill"),
        (with(1, &8193u64.to_le_bytes()), "does not fill"),
        (with(17, &8193u64.to_le_bytes()), "offset is not a multiple"),
        (with(25, &0u64.to_le_bytes()), "zero length"),
        (with(17, &(1u64 << 20).to_le_bytes()), "past the end"),
        (b[..40].to_vec(), "checksums for 2 blocks"),
        ([&b[..], &[0; 4][..]].concat(), "checksums for 2 blocks"),
        (b[..20].to_vec(), "extent: needs 24 bytes"),
    ];
    for (bytes, what) in cases {
        let err = ExtentMapEntry::decode(&bytes, &LIMITS).unwrap_err();
        assert!(matches!(err, ObjectError::BadRecord { record: "fmap entry", .. }), "{err}");
        assert!(err.to_string().contains(what), "{err} (expected {what:?})");
    }
    // A huge extent length claims many checksums; refused by length, with
    // no allocation.
    let huge = with(25, &(1u64 << 62).to_le_bytes());
    assert!(ExtentMapEntry::decode(&huge, &MetaLimits { container_bytes: u64::MAX, ..LIMITS }).is_err());
    // An extent longer than an entry may hold, in a container large enough.
    let big = Extent { container: 0, offset: 0, len: (64 << 30) + 4096 };
    let too_long = ExtentMapEntry { extent: big, logical_len: big.len, crcs: vec![], unwritten: false };
    let err = too_long.encode(&MetaLimits { container_bytes: 1 << 40, ..LIMITS }).unwrap_err();
    assert!(err.to_string().contains("longer than an entry may hold"), "{err}");

    let wrong = ExtentMapEntry { crcs: vec![1], ..e.clone() };
    let err = wrong.encode(&LIMITS).unwrap_err();
    assert!(matches!(err, ObjectError::InvalidRecord { .. }) && err.to_string().contains("1 checksums"), "{err}");
    assert!(ExtentMapEntry::for_data(extent, &[1; 4096], &LIMITS).is_err(), "one block of data, two of extent");
    assert!(ExtentMapEntry::for_data(extent, &[], &LIMITS).is_err());

    assert!(e.check_at(4096).is_ok());
    assert_eq!(e.end(4096), Some(4096 + 5000));
    assert!(e.check_at(MAX_OBJECT_BYTES - 4096).unwrap_err().to_string().contains("largest object"));

    let d = damage(&b, entry_rt);
    assert_eq!(d.truncations_accepted, 0);
}

#[test]
fn dentry_layout_refusals_and_damage() {
    let d = Dentry { child: 0x0102, kind: Kind::Symlink };
    let b = d.encode().unwrap();
    assert_eq!(b, [1, 3, 2, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(Dentry::decode(&b).unwrap(), d);
    let e = Dentry::decode(&[9, 3, 2, 1, 0, 0, 0, 0, 0, 0]).unwrap_err();
    assert!(matches!(e, ObjectError::NewerRecord { record: "dentry", found: 9, .. }), "{e}");
    for (bytes, what) in [
        (&[0u8, 3, 2, 1, 0, 0, 0, 0, 0, 0][..], "version 0"),
        (&[1, 0, 2, 1, 0, 0, 0, 0, 0, 0], "unknown kind 0"),
        (&[1, 3, 0, 0, 0, 0, 0, 0, 0, 0], "child id 0"),
        (&[1, 3, 2, 1, 0, 0, 0, 0, 0], "needs 8 bytes"),
        (&[1, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0], "trailing"),
    ] {
        let e = Dentry::decode(bytes).unwrap_err();
        assert!(matches!(e, ObjectError::BadRecord { record: "dentry", .. }), "{e}");
        assert!(e.to_string().contains(what), "{e} (expected {what:?})");
    }
    assert!(Dentry { child: 0, kind: Kind::File }.encode().is_err());
    for kind in Kind::ALL {
        let d = Dentry { child: u64::MAX, kind };
        let dmg = damage(&d.encode().unwrap(), |b| Ok(Dentry::decode(b)?.encode()?.to_vec()));
        assert_eq!(dmg.truncations_accepted, 0);
    }
}

#[test]
fn orphan_layout_refusals_and_damage() {
    let o = Orphan { reason: OrphanReason::Unlinked, since: ts(0x0102, 5) };
    let b = o.encode().unwrap();
    assert_eq!(b, [1, 1, 2, 1, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0]);
    assert_eq!(Orphan::decode(&b).unwrap(), o);
    let mut x = b;
    x[1] = 4;
    assert!(Orphan::decode(&x).unwrap_err().to_string().contains("unknown reason 4"));
    x = b;
    x[10..14].copy_from_slice(&1_000_000_000u32.to_le_bytes());
    assert!(Orphan::decode(&x).unwrap_err().to_string().contains("since"));
    x = b;
    x[0] = 2;
    assert!(matches!(Orphan::decode(&x), Err(ObjectError::NewerRecord { found: 2, .. })));
    assert!(Orphan { since: ts(0, 1_000_000_000), ..o }.encode().is_err());
    for reason in [OrphanReason::Unlinked, OrphanReason::Anonymous, OrphanReason::Freeing] {
        let o = Orphan { reason, since: ts(-5, 999_999_999) };
        let dmg = damage(&o.encode().unwrap(), |b| Ok(Orphan::decode(b)?.encode()?.to_vec()));
        assert_eq!(dmg.truncations_accepted, 0);
    }
}

#[test]
fn xattr_values_and_counters() {
    let v = XattrValue(b"hello".to_vec());
    let b = v.encode().unwrap();
    assert_eq!(b, b"\x01hello");
    assert_eq!(XattrValue::decode(&b).unwrap(), v);
    assert_eq!(XattrValue::decode(&[1]).unwrap(), XattrValue(vec![]));
    assert!(XattrValue::decode(&[]).unwrap_err().to_string().contains("empty"));
    assert!(XattrValue::decode(&[2, 0]).unwrap_err().to_string().contains("unknown tag 2"));
    let max = XattrValue(vec![0; 65536]);
    assert_eq!(XattrValue::decode(&max.encode().unwrap()).unwrap(), max);
    assert!(XattrValue(vec![0; 65537]).encode().is_err());
    assert!(XattrValue::decode(&[&[1u8][..], &[0; 65537][..]].concat()).is_err());
    // Truncations of a value are shorter values, exact by construction.
    damage(&b, |b| XattrValue::decode(b)?.encode());

    assert_eq!(decode_counter(&42u64.to_le_bytes()).unwrap(), 42);
    assert!(decode_counter(&[0; 7]).is_err());
    assert!(decode_counter(&[0; 9]).is_err());
}

#[test]
fn limits_come_from_the_superblock_options() {
    let o = CreationOptions { inline_max_bytes: 100, container_bytes: 1 << 21, ..CreationOptions::default() };
    let l = MetaLimits::from_options(&o);
    assert_eq!((l.inline_max_bytes, l.container_bytes), (100, 1 << 21));
    assert_eq!(MetaLimits::default().inline_max_bytes, CreationOptions::default().inline_max_bytes);
    let _ = FLAG_APPEND_ONLY;
}

#[test]
fn an_unwritten_entry_is_tag_2_without_checksums() {
    let extent = Extent { container: 3, offset: 8192, len: 8192 };
    let e = ExtentMapEntry::unwritten(extent, 5000, &LIMITS).unwrap();
    let b = e.encode(&LIMITS).unwrap();
    assert_eq!(b.len(), 33, "tag, logical length, extent; no checksums");
    assert_eq!(b[0], 2);
    assert_eq!(ExtentMapEntry::decode(&b, &LIMITS).unwrap(), e);
    let mut with_crcs = b.clone();
    with_crcs.extend_from_slice(&[0; 8]);
    assert!(ExtentMapEntry::decode(&with_crcs, &LIMITS).is_err(), "an unwritten entry has no checksums");
    let mut as_data = b;
    as_data[0] = 1;
    assert!(ExtentMapEntry::decode(&as_data, &LIMITS).is_err(), "a data entry needs its checksums");
    assert!(ExtentMapEntry::unwritten(extent, 9000, &LIMITS).is_err(), "the extent must fit the range");
}
