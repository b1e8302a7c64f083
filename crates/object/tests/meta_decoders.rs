//! Stable replay of the metadata decoders' fuzz entry points
//! (`larder_object::meta::fuzzing`): 20,000 inputs from a fixed generator,
//! random bytes and damaged valid encodings (bit flips, truncations,
//! overwritten and appended bytes). Each entry point must return without
//! panicking, and accepts only inputs that re-encode to themselves. The
//! number accepted per decoder is pinned, so a change in what a decoder
//! accepts (a format change) shows up here. The committed seed corpora of
//! the fuzz targets (`fuzz/corpus/object_*`) are replayed here, and
//! regenerated from the same seeds by the ignored `generate_fuzz_corpus`.

#![allow(clippy::unwrap_used)]

#[path = "../../../fuzz/corpus_files.rs"]
mod corpus_files;

use larder_object::meta::fuzzing::{self, FUZZ_LIMITS};
use larder_object::meta::{
    dentry_key, fmap_key, heap_image_key, heap_name_key, heap_object_key, heap_root_key, heap_span_key, heap_type_key,
    onode_key, orphan_key, xattr_key, DataLocation, Dentry, DirInfo, Extent, ExtentMapEntry, HeapObject, HeapPageImage,
    HeapRoot, HeapType, Kind, MetaKey, Name, Onode, Orphan, OrphanReason, StoreName, Timestamp, XattrName, XattrValue,
};

/// SplitMix64: fixed forever, so the inputs never change with a crate
/// upgrade.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn onode_seeds() -> Vec<Vec<u8>> {
    let base = Onode {
        kind: Kind::File,
        flags: 0,
        size: 10,
        mode: 0o100_600,
        uid: 0,
        gid: 0,
        nlink: 1,
        generation: 1,
        atime: Timestamp { secs: 1_700_000_000, nanos: 5 },
        mtime: Timestamp::default(),
        ctime: Timestamp::default(),
        btime: Timestamp::default(),
        rdev: 0,
        location: DataLocation::Inline(b"0123456789".to_vec()),
        dir: None,
    };
    let dir = Onode {
        kind: Kind::Directory,
        mode: 0o040_755,
        size: 0,
        location: DataLocation::Inline(vec![]),
        dir: Some(DirInfo { parent: 1, entries: 0 }),
        ..base.clone()
    };
    let big = Onode { size: 1 << 40, location: DataLocation::Extents, ..base.clone() };
    let heap = Onode { location: DataLocation::OwnFile { file: 3 }, ..big.clone() };
    let dev = Onode { kind: Kind::BlockDevice, mode: 0o060_660, rdev: 0x0801, ..dir.clone() };
    let dev = Onode { dir: None, ..dev };
    // Whole timestamps (a difference beyond 64 bits of nanoseconds), and
    // flags: the compact layout's optional fields.
    let old = Onode { atime: Timestamp { secs: -(1 << 40), nanos: 0 }, flags: 1, ..base.clone() };
    let fixed = larder_object::meta::MetaLimits { compact_onodes: false, ..FUZZ_LIMITS };
    let all = [base, dir, big, heap, dev, old];
    let compact = all.iter().map(|o| o.encode(&FUZZ_LIMITS).unwrap());
    compact.chain(all.iter().map(|o| o.encode(&fixed).unwrap())).collect()
}

fn entry_seeds() -> Vec<Vec<u8>> {
    let mut out = vec![];
    for (len, data_len) in [(4096u64, 1usize), (8192, 8192), (16384, 12289)] {
        let data: Vec<u8> = (0..data_len).map(|i| i as u8).collect();
        let e = ExtentMapEntry::for_data(Extent { container: 1, offset: 4096, len }, &data, &FUZZ_LIMITS).unwrap();
        out.push(e.encode(&FUZZ_LIMITS).unwrap());
    }
    out
}

fn key_seeds() -> Vec<Vec<u8>> {
    vec![
        onode_key(5).to_vec(),
        fmap_key(5, 8192).to_vec(),
        dentry_key(1, &Name::new("readme.txt").unwrap()),
        xattr_key(5, &XattrName::new("user.mime").unwrap()),
        orphan_key(77).to_vec(),
        MetaKey::Store(StoreName::new("next_object_id").unwrap()).encode(),
    ]
}

fn dentry_seeds() -> Vec<Vec<u8>> {
    Kind::ALL.iter().map(|&kind| Dentry { child: 42, kind }.encode().unwrap().to_vec()).collect()
}

fn orphan_seeds() -> Vec<Vec<u8>> {
    [OrphanReason::Unlinked, OrphanReason::Anonymous, OrphanReason::Freeing]
        .iter()
        .map(|&reason| Orphan { reason, since: Timestamp { secs: -3, nanos: 7 } }.encode().unwrap().to_vec())
        .collect()
}

fn xattr_seeds() -> Vec<Vec<u8>> {
    vec![XattrValue(b"text/plain".to_vec()).encode().unwrap(), XattrValue(vec![]).encode().unwrap()]
}

/// A damaged copy of `seed`, or random bytes.
fn input(g: &mut Gen, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut x = seeds[g.below(seeds.len())].clone();
    match g.below(6) {
        0 => (0..g.below(160)).map(|_| g.next() as u8).collect(),
        1 => {
            for _ in 0..=g.below(3) {
                if !x.is_empty() {
                    let bit = g.below(x.len() * 8);
                    x[bit / 8] ^= 1 << (bit % 8);
                }
            }
            x
        }
        2 => {
            x.truncate(g.below(x.len() + 1));
            x
        }
        3 => {
            if !x.is_empty() {
                let at = g.below(x.len());
                x[at] = g.next() as u8;
            }
            x
        }
        4 => {
            x.extend((0..=g.below(8)).map(|_| g.next() as u8));
            x
        }
        _ => x,
    }
}

#[test]
fn twenty_thousand_inputs_never_panic_and_accept_only_exact_encodings() {
    type Target = (&'static str, fn(&[u8]) -> bool, Vec<Vec<u8>>);
    let targets: [Target; 6] = [
        ("key", fuzzing::key, key_seeds()),
        ("onode", fuzzing::onode, onode_seeds()),
        ("dentry", fuzzing::dentry, dentry_seeds()),
        ("extent_entry", fuzzing::extent_entry, entry_seeds()),
        ("orphan", fuzzing::orphan, orphan_seeds()),
        ("xattr_value", fuzzing::xattr_value, xattr_seeds()),
    ];
    let mut g = Gen(0x4C41_5244_4552_4D45);
    let mut accepted = [0usize; 6];
    for i in 0..20_000 {
        let t = i % targets.len();
        let (_, decode, seeds) = &targets[t];
        let data = input(&mut g, seeds);
        if decode(&data) {
            accepted[t] += 1;
        }
    }
    let names: Vec<&str> = targets.iter().map(|t| t.0).collect();
    println!("accepted per decoder: {:?}", names.iter().zip(accepted).collect::<Vec<_>>());
    // Every decoder saw both outcomes.
    for (t, &n) in accepted.iter().enumerate() {
        assert!(n > 0 && n < 20_000 / 6, "{}: {n} accepted", names[t]);
    }
    assert_eq!(accepted, PINNED, "what the decoders accept changed (a format change?): {names:?}");
}

/// Accepted inputs per decoder, in the order of `targets`.
const PINNED: [usize; 6] = [1750, 1278, 1459, 961, 1458, 1980];

/// Valid log record payloads: batches of every operation kind, an empty
/// batch, and ingest markers with and without a run.
fn log_payload_seeds() -> Vec<Vec<u8>> {
    let mut b = larder_index::WriteBatch::new();
    b.put(b"k", b"value").delete(b"gone").merge("dir-entries", b"d", [1u8; 17]).delete_range(b"a", b"c");
    let mut one = vec![1u8];
    one.extend_from_slice(b.as_bytes());
    let mut empty = vec![1u8];
    empty.extend_from_slice(larder_index::WriteBatch::new().as_bytes());
    let marker = |v: u64| {
        let mut m = vec![2u8];
        m.extend_from_slice(&v.to_le_bytes());
        m
    };
    vec![one, empty, marker(0), marker(8)]
}

#[test]
fn log_payloads_never_panic_and_accept_only_exact_encodings() {
    let seeds = log_payload_seeds();
    for s in &seeds {
        assert!(fuzzing::log_payload(s), "seed {s:?} refused");
    }
    let mut g = Gen(0x5041_594C_4F41_4453);
    let mut accepted = 0usize;
    for _ in 0..5_000 {
        if fuzzing::log_payload(&input(&mut g, &seeds)) {
            accepted += 1;
        }
    }
    println!("log payloads accepted: {accepted}");
    assert!(accepted > 0 && accepted < 5_000, "{accepted} accepted");
    assert_eq!(accepted, PINNED_LOG_PAYLOADS, "what the payload decoder accepts changed (a format change?)");
}

/// Accepted inputs of the log payload replay.
const PINNED_LOG_PAYLOADS: usize = 1853;

fn tree_record_seeds() -> Vec<Vec<u8>> {
    use larder_object::meta::encode_tree_record;
    [1, 2, 1 << 40, u64::MAX].iter().map(|&v| encode_tree_record(v).to_vec()).collect()
}

fn tree_key_seeds() -> Vec<Vec<u8>> {
    use larder_object::meta::{tree_catalog_key, tree_count_key, tree_entry_key, tree_next_id_key};
    vec![
        tree_catalog_key("accounts"),
        tree_next_id_key().to_vec(),
        tree_count_key(3),
        tree_entry_key(3, b""),
        tree_entry_key(u64::MAX, b"a key\xff"),
    ]
}

fn heap_root_seeds() -> Vec<Vec<u8>> {
    vec![HeapRoot { objects_dir: 2, names_dir: 3 }.encode().unwrap().to_vec()]
}

fn heap_object_seeds() -> Vec<Vec<u8>> {
    [
        HeapObject { heap: 1, type_id: 0, durable_size: 0, flags: 0 },
        HeapObject { heap: 9, type_id: 12, durable_size: 1 << 40, flags: 1 },
        HeapObject { heap: 4, type_id: 0, durable_size: 0, flags: 3 },
    ]
    .iter()
    .map(|o| o.encode().unwrap().to_vec())
    .collect()
}

fn heap_type_seeds() -> Vec<Vec<u8>> {
    [vec![], vec![0], vec![8, 40, 4096]].into_iter().map(|offsets| HeapType { offsets }.encode().unwrap()).collect()
}

fn heap_page_image_seeds() -> Vec<Vec<u8>> {
    [vec![1u8], (0..=255u8).collect(), vec![0xA5; 4096]]
        .into_iter()
        .map(|bytes| HeapPageImage { bytes }.encode().unwrap())
        .collect()
}

fn heap_key_seeds() -> Vec<Vec<u8>> {
    vec![
        heap_root_key(1),
        heap_object_key(77),
        heap_name_key(77, &Name::new("a name").unwrap()),
        heap_type_key(5),
        heap_span_key(77, 8192),
        heap_span_key(77, u64::MAX),
        heap_image_key(77, 4096),
    ]
}

#[test]
fn heap_decoders_never_panic_and_accept_only_exact_encodings() {
    type Target = (&'static str, fn(&[u8]) -> bool, Vec<Vec<u8>>);
    let targets: [Target; 5] = [
        ("heap key", fuzzing::key, heap_key_seeds()),
        ("heap root", fuzzing::heap_root, heap_root_seeds()),
        ("heap object", fuzzing::heap_object, heap_object_seeds()),
        ("heap type", fuzzing::heap_type, heap_type_seeds()),
        ("heap page image", fuzzing::heap_page_image, heap_page_image_seeds()),
    ];
    for (name, decode, seeds) in &targets {
        for s in seeds {
            assert!(decode(s), "{name}: seed {s:?} refused");
        }
    }
    let mut g = Gen(0x4845_4150_5245_4353);
    let mut accepted = [0usize; 5];
    for i in 0..10_000 {
        let t = i % targets.len();
        let (_, decode, seeds) = &targets[t];
        if decode(&input(&mut g, seeds)) {
            accepted[t] += 1;
        }
    }
    println!("heap decoders accepted: {accepted:?}");
    for (t, &n) in accepted.iter().enumerate() {
        assert!(n > 0 && n < 2_000, "{}: {n} accepted", targets[t].0);
    }
    assert_eq!(accepted, PINNED_HEAP, "what the heap decoders accept changed (a format change?)");
}

/// Accepted inputs per heap decoder, in the order of its `targets`.
const PINNED_HEAP: [usize; 5] = [957, 969, 933, 507, 353];

/// The fuzz targets of this layer, their entry points and valid seeds.
fn fuzz_targets() -> [corpus_files::Target; 11] {
    [
        ("object_tree_record", fuzzing::tree_record, tree_record_seeds()),
        ("object_tree_key", fuzzing::tree_key, tree_key_seeds()),
        ("object_heap_root", fuzzing::heap_root, heap_root_seeds()),
        ("object_heap_object", fuzzing::heap_object, heap_object_seeds()),
        ("object_heap_type", fuzzing::heap_type, heap_type_seeds()),
        ("object_heap_page_image", fuzzing::heap_page_image, heap_page_image_seeds()),
        ("object_key", fuzzing::key, key_seeds()),
        ("object_onode", fuzzing::onode, onode_seeds()),
        ("object_extent_entry", fuzzing::extent_entry, entry_seeds()),
        ("object_dentry", fuzzing::dentry, dentry_seeds()),
        ("object_log_payload", fuzzing::log_payload, log_payload_seeds()),
    ]
}

#[test]
#[ignore = "rewrites the committed fuzz seed corpus; run with --ignored"]
fn generate_fuzz_corpus() {
    for (target, decode, valid) in fuzz_targets() {
        corpus_files::write_corpus(target, decode, &valid, &corpus_files::near_seeds(&valid, decode));
    }
}

#[test]
fn fuzz_corpus_replays() {
    for (target, decode, _) in fuzz_targets() {
        corpus_files::replay_corpus(target, decode);
    }
}
